package srcodec

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/registry/registrytest"
	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/cockroachdb/pebble/v2.(*cleanupManager).mainLoop"))
}

// startRegistry runs weir's registry on an in-process broker, served on
// 127.0.0.1, and returns a Registry client of it.
func startRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := NewRegistry(registrytest.Serve(t, weirtest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

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
	avroV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`
	avroV2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"},{"name":"note","type":"string","default":"none"}]}`
)

func TestAvroCodec(t *testing.T) {
	reg := startRegistry(t)
	// Without AutoRegister the schema must be registered.
	unregistered, err := Avro[orderV1](reg, "orders-value", avroV1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unregistered.Encode(orderV1{ID: 1}); err == nil {
		t.Fatal("encoding with an unregistered schema succeeded")
	}
	v1, err := Avro[orderV1](reg, "orders-value", avroV1, AutoRegister())
	if err != nil {
		t.Fatal(err)
	}
	b, err := v1.Encode(orderV1{ID: 7, Item: "tea"})
	if err != nil {
		t.Fatal(err)
	}
	if id, _, err := DecodeHeader(b); err != nil || id != 1 {
		t.Fatalf("header: id %d err %v, want id 1", id, err)
	}
	got, err := v1.Decode(b)
	if err != nil || got != (orderV1{ID: 7, Item: "tea"}) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// A reader with v2 reads v1 data: the added field takes its default.
	v2, err := Avro[orderV2](reg, "orders-value", avroV2, AutoRegister())
	if err != nil {
		t.Fatal(err)
	}
	got2, err := v2.Decode(b)
	if err != nil || got2 != (orderV2{ID: 7, Item: "tea", Note: "none"}) {
		t.Fatalf("v1 data read as v2: %+v %v", got2, err)
	}
	b2, err := v2.Encode(orderV2{ID: 8, Item: "cake", Note: "fresh"})
	if err != nil {
		t.Fatal(err)
	}
	if id, _, _ := DecodeHeader(b2); id != 2 {
		t.Fatalf("v2 registered as id %d, want 2", id)
	}
	// And v1 reads v2 data, skipping the field it does not know.
	if got, err := v1.Decode(b2); err != nil || got != (orderV1{ID: 8, Item: "cake"}) {
		t.Fatalf("v2 data read as v1: %+v %v", got, err)
	}

	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"short", []byte{0, 0, 1}, ErrShort},
		{"wrong magic", append([]byte{1}, b[1:]...), ErrMagic},
		{"unknown id", append([]byte{0, 0, 0, 0, 99}, b[5:]...), ErrUnknownSchema},
	} {
		if _, err := v1.Decode(c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := v1.Decode(append(slices.Clone(b[:5]), 0xff)); err == nil {
		t.Error("a truncated payload decoded")
	}
	// A JSON schema's id is not Avro.
	js, err := JSONSchema[orderV1](reg, "j-value", `{"type":"object"}`, AutoRegister())
	if err != nil {
		t.Fatal(err)
	}
	jb, err := js.Encode(orderV1{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Decode(jb); !errors.Is(err, ErrSchemaType) {
		t.Fatalf("avro codec reading a JSON schema's record: %v, want ErrSchemaType", err)
	}
}

func TestJSONSchemaCodec(t *testing.T) {
	reg := startRegistry(t)
	const schema = `{"type":"object","properties":{"id":{"type":"integer","minimum":1},"item":{"type":"string"}},"required":["id"]}`
	c, err := JSONSchema[orderV1](reg, "orders-value", schema, AutoRegister(), ValidateOnDecode())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Encode(orderV1{ID: 3, Item: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Decode(b); err != nil || got != (orderV1{ID: 3, Item: "x"}) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := c.Encode(orderV1{ID: 0}); err == nil {
		t.Fatal("a value violating the schema was encoded")
	}
	// A record whose payload violates its writer schema does not decode.
	bad := append(slices.Clone(b[:5]), []byte(`{"id":0}`)...)
	if _, err := c.Decode(bad); err == nil {
		t.Fatal("a value violating its writer schema decoded")
	}
}

func TestProtobufCodec(t *testing.T) {
	reg := startRegistry(t)
	c, err := Protobuf[*wrapperspb.StringValue](reg, "names-value", AutoRegister())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Encode(wrapperspb.String("hello"))
	if err != nil {
		t.Fatal(err)
	}
	// StringValue is the 8th message of wrappers.proto: indexes [7].
	_, rest, _ := DecodeHeader(b)
	if idx, _, err := DecodeIndexes(rest); err != nil || !slices.Equal(idx, []int{7}) {
		t.Fatalf("message indexes %v %v, want [7]", idx, err)
	}
	got, err := c.Decode(b)
	if err != nil || got.GetValue() != "hello" {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := c.Decode(append(slices.Clone(b[:5]), 0x80)); !errors.Is(err, ErrIndexes) {
		t.Fatalf("bad indexes: %v, want ErrIndexes", err)
	}
	ss, err := reg.Client().SchemaByID(context.Background(), 1)
	if err != nil || ss.Type != sr.TypeProtobuf {
		t.Fatalf("registered schema: %+v %v", ss, err)
	}
}

// TestUndecodableRecordsGoToDLQ runs a stream app whose input holds
// registry-encoded records and records that do not decode: the good ones
// are processed, each bad one lands in the dead-letter topic with the
// decode error as its reason.
func TestUndecodableRecordsGoToDLQ(t *testing.T) {
	reg := startRegistry(t)
	codec, err := Avro[orderV1](reg, "orders-value", avroV1, AutoRegister())
	if err != nil {
		t.Fatal(err)
	}
	b := stream.NewBuilder()
	stream.Map(stream.From(b, "orders", stream.String(), stream.Codec[orderV1](codec)),
		func(r stream.Record[string, orderV1]) (string, error) { return r.Value.Item, nil }).
		To("items", stream.String(), stream.String())
	d, err := stream.NewDriver("shop", b, map[string]int32{"orders": 1}, stream.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	good, err := codec.Encode(orderV1{ID: 1, Item: "tea"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	inputs := [][]byte{good, []byte(`{"id":1}`), append([]byte{0, 0, 0, 1, 0}, good[5:]...), good}
	for i, in := range inputs {
		if _, err := d.Pipe("orders", []byte("k"), in, at.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	items := d.Records("items")
	if len(items) != 2 || string(items[0].Value) != "tea" || string(items[1].Value) != "tea" {
		t.Fatalf("processed %d records, want the 2 good ones", len(items))
	}
	dlq := d.Records(stream.DLQTopic("shop")) // the App's dead-letter topic
	if len(dlq) != 2 {
		t.Fatalf("dead-letter topic holds %d records, want 2", len(dlq))
	}
	wantReasons := []error{ErrMagic, ErrUnknownSchema}
	for i, r := range dlq {
		reason := header(r.Headers, stream.HeaderDLQReason)
		if reason == "" || !strings.Contains(reason, wantReasons[i].Error()) {
			t.Errorf("dead letter %d: reason %q, want it to name %q", i, reason, wantReasons[i])
		}
		if string(r.Value) != string(inputs[i+1]) {
			t.Errorf("dead letter %d keeps value %q, want the original", i, r.Value)
		}
	}
}

func header(hs []stream.Header, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// FuzzDecodeHeader: the wire-format decoder returns an error for any
// malformed input, never panics, and round-trips what it accepts.
func FuzzDecodeHeader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0, 'x'})
	f.Add([]byte{0, 0, 0, 0, 1, 4, 2, 6, 'x'})
	f.Add([]byte{1, 2})
	f.Add([]byte{0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, rest, err := DecodeHeader(b)
		if err != nil {
			return
		}
		idx, payload, err := DecodeIndexes(rest)
		if err != nil {
			return
		}
		again := append(AppendHeader(nil, id, idx), payload...)
		id2, rest2, err := DecodeHeader(again)
		if err != nil || id2 != id {
			t.Fatalf("re-encoded header: id %d err %v, want %d", id2, err, id)
		}
		idx2, payload2, err := DecodeIndexes(rest2)
		if err != nil || !slices.Equal(idx, idx2) || string(payload) != string(payload2) {
			t.Fatalf("re-encoded indexes %v, want %v (%v)", idx2, idx, err)
		}
	})
}
