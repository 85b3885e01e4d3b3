package compat

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// orderV1 and orderV2 are the Go types of the two versions of the Avro
// schema franz-go's serde encodes.
type orderV1 struct {
	ID   int64  `avro:"id" json:"id"`
	Item string `avro:"item" json:"item"`
}

type orderV2 struct {
	ID   int64  `avro:"id" json:"id"`
	Item string `avro:"item" json:"item"`
	Note string `avro:"note" json:"note"`
}

const (
	franzAvroV1 = `{"type":"record","name":"Order","namespace":"weir.compat","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`
	franzAvroV2 = `{"type":"record","name":"Order","namespace":"weir.compat","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"},{"name":"note","type":"string","default":""}]}`
	// franzAvroV3 changes id to a string: incompatible.
	franzAvroV3 = `{"type":"record","name":"Order","namespace":"weir.compat","fields":[{"name":"id","type":"string"},{"name":"item","type":"string"},{"name":"note","type":"string","default":""}]}`
)

// franz-go's pkg/sr client and Serde (Confluent wire format) with Avro by
// hamba/avro, producing and consuming with kgo.
func TestSchemaRegistryFranzGoSerde(t *testing.T) {
	b, url := startSchemaRegistry(t)
	const topic = "compat-sr-franzgo"
	subject := topic + "-value"
	createTopic(t, b.Addr(), topic, 1)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 60*time.Second)

	serde := sr.NewSerde()
	evs := map[string][]srEvent{}
	var recs []*kgo.Record
	for i, v := range []struct {
		schema string
		typ    any
		value  func(i int) any
	}{
		{franzAvroV1, orderV1{}, func(i int) any { return orderV1{ID: int64(i), Item: "item"} }},
		{franzAvroV2, orderV2{}, func(i int) any { return orderV2{ID: int64(srRecordsPerVersion + i), Item: "item", Note: "v2"} }},
	} {
		ss, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: v.schema})
		if err != nil {
			t.Fatalf("register v%d: %v", i+1, err)
		}
		parsed, err := avro.Parse(v.schema)
		if err != nil {
			t.Fatal(err)
		}
		serde.Register(ss.ID, v.typ,
			sr.EncodeFn(func(x any) ([]byte, error) { return avro.Marshal(parsed, x) }),
			sr.DecodeFn(func(b []byte, x any) error { return avro.Unmarshal(parsed, b, x) }))
		for j := range srRecordsPerVersion {
			val := v.value(j)
			enc, err := serde.Encode(val)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Value: enc})
			raw, _ := json.Marshal(val)
			evs["produced"] = append(evs["produced"], srEvent{Event: "produced", Value: raw})
		}
	}
	_, err = cl.CreateSchema(ctx, subject, sr.Schema{Schema: franzAvroV3})
	var re *sr.ResponseError
	if !asResponseError(err, &re) {
		t.Fatalf("incompatible v3: %v, want a 409 response", err)
	}
	evs["refused"] = []srEvent{{Event: "refused", Status: re.StatusCode, Code: re.ErrorCode, Message: re.Message}}

	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for len(evs["consumed"]) < len(recs) && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			v, err := serde.DecodeNew(r.Value)
			if err != nil {
				t.Fatalf("decode offset %d: %v", r.Offset, err)
			}
			raw, _ := json.Marshal(reflect.ValueOf(v).Elem().Interface())
			evs["consumed"] = append(evs["consumed"], srEvent{Event: "consumed", Value: raw, Offset: r.Offset})
		})
	}
	schemas, err := cl.Schemas(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range schemas {
		evs["registered"] = append(evs["registered"], srEvent{Event: "registered", Version: s.Version, ID: s.ID})
	}
	checkSchemaRun(t, b, url, topic, sr.TypeAvro, evs)
}
