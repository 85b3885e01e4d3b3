package compat

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirhq/weir/registry"
	"github.com/weirhq/weir/registry/registrytest"
	"github.com/weirhq/weir/weirtest"
)

// Schema registry clients: each registers a schema through its serializer,
// evolves it compatibly (a second version, registered the same way), is
// refused an incompatible third (409), and produces and consumes records
// through weir with the format's serializer and deserializer. The driver
// checks, independently of the client, what the registry holds and that
// every record in the log is in Confluent's wire format with the id of the
// version it was produced with.

// srRecordsPerVersion is how many records a client produces per version.
const srRecordsPerVersion = 20

// startSchemaRegistry starts a broker and a schema registry on it, served
// on 127.0.0.1, and returns both.
func startSchemaRegistry(t *testing.T) (*weirtest.Broker, string) {
	t.Helper()
	b := startWeir(t)
	return b, registrytest.Serve(t, b.Addr())
}

// srEvent is one line of a client script's output.
type srEvent struct {
	Event   string          `json:"event"`
	Value   json.RawMessage `json:"value"`
	Offset  int64           `json:"offset"`
	Version int             `json:"version"`
	ID      int             `json:"id"`
	Status  int             `json:"status"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
}

func parseSREvents(t *testing.T, out []byte) map[string][]srEvent {
	t.Helper()
	evs := map[string][]srEvent{}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e srEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("bad output line %q: %v", trunc(string(line)), err)
		}
		evs[e.Event] = append(evs[e.Event], e)
	}
	return evs
}

// checkSchemaRun asserts what a client reported and what the registry and
// the log hold after a run on topic (one partition). The subject is
// TOPIC-value (TopicNameStrategy); typ its schema type.
func checkSchemaRun(t *testing.T, b *weirtest.Broker, url, topic string, typ sr.SchemaType, evs map[string][]srEvent) {
	t.Helper()
	subject := topic + "-value"
	const total = 2 * srRecordsPerVersion

	// The incompatible version was refused with 409, and not registered.
	if r := evs["refused"]; len(r) != 1 || r[0].Status != 409 || r[0].Code != registry.CodeIncompatibleSchema || r[0].Message == "" {
		t.Fatalf("incompatible schema: %+v, want one refusal with status and code 409", r)
	}
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 30*time.Second)
	schemas, err := cl.Schemas(ctx, subject)
	if err != nil || len(schemas) != 2 {
		t.Fatalf("registry holds %d versions of %s (%v), want 2", len(schemas), subject, err)
	}
	ids := []int{schemas[0].ID, schemas[1].ID}
	if ids[0] == ids[1] || schemas[0].Type != typ || schemas[1].Type != typ {
		t.Fatalf("versions of %s: %+v", subject, schemas)
	}
	if reg := evs["registered"]; len(reg) != 2 || reg[0].ID != ids[0] || reg[1].ID != ids[1] {
		t.Fatalf("the client saw versions %+v, the registry has ids %v", reg, ids)
	}

	// The log: magic byte 0, then the id of the version the record was
	// produced with (v1 for the first half, v2 for the second).
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var logged []*kgo.Record
	for len(logged) < total && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { logged = append(logged, r) })
	}
	if len(logged) != total {
		t.Fatalf("log holds %d records, want %d", len(logged), total)
	}
	for i, r := range logged {
		if len(r.Value) < 5 || r.Value[0] != 0 {
			t.Fatalf("record %d is not in the wire format: % x", i, r.Value[:min(len(r.Value), 8)])
		}
		if id, want := int(binary.BigEndian.Uint32(r.Value[1:5])), ids[i/srRecordsPerVersion]; id != want {
			t.Fatalf("record %d carries schema id %d, want %d", i, id, want)
		}
	}

	// Every produced value came back, in order, through the deserializer.
	produced, consumed := evs["produced"], evs["consumed"]
	if len(produced) != total || len(consumed) != total {
		t.Fatalf("produced %d, consumed %d, want %d each", len(produced), len(consumed), total)
	}
	for i := range produced {
		var p, c any
		if err := json.Unmarshal(produced[i].Value, &p); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(consumed[i].Value, &c); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, c) || consumed[i].Offset != int64(i) {
			t.Fatalf("record %d: produced %s, consumed %s at offset %d", i, produced[i].Value, consumed[i].Value, consumed[i].Offset)
		}
	}
}

func testConfluentPythonSchemas(t *testing.T, mode string, typ sr.SchemaType) {
	for _, m := range []string{"confluent_kafka", "jsonschema", "google.protobuf", "requests"} {
		requirePythonModule(t, m)
	}
	b, url := startSchemaRegistry(t)
	topic := "compat-sr-python-" + mode
	createTopic(t, b.Addr(), topic, 1)
	path, err := filepath.Abs(filepath.Join("py", "schemaregistry_confluent.py"))
	if err != nil {
		t.Fatal(err)
	}
	out := runToolRaw(t, nil, systemPython, path, mode, b.Addr(), url, topic, fmt.Sprint(srRecordsPerVersion))
	checkSchemaRun(t, b, url, topic, typ, parseSREvents(t, out))
}

// confluent-kafka-python's SchemaRegistryClient with its JSON Schema
// serializer and deserializer.
func TestSchemaRegistryConfluentPythonJSON(t *testing.T) {
	testConfluentPythonSchemas(t, "json", sr.TypeJSON)
}

// confluent-kafka-python's SchemaRegistryClient with its Protobuf
// serializer and deserializer (schemas registered as base64
// FileDescriptorProtos).
func TestSchemaRegistryConfluentPythonProtobuf(t *testing.T) {
	testConfluentPythonSchemas(t, "protobuf", sr.TypeProtobuf)
}

func testKafkajsSchemas(t *testing.T, mode string, typ sr.SchemaType) {
	node := requireTool(t, "node")
	script, err := filepath.Abs(filepath.Join("js", "schemaregistry_kafkajs.js"))
	if err != nil {
		t.Fatal(err)
	}
	b, url := startSchemaRegistry(t)
	topic := "compat-sr-kafkajs-" + mode
	createTopic(t, b.Addr(), topic, 1)
	out := runToolRaw(t, nil, node, script, mode, b.Addr(), url, topic, fmt.Sprint(srRecordsPerVersion))
	checkSchemaRun(t, b, url, topic, typ, parseSREvents(t, out))
}

// @kafkajs/confluent-schema-registry with kafkajs, for each of its formats.
func TestSchemaRegistryKafkajsAvro(t *testing.T) { testKafkajsSchemas(t, "avro", sr.TypeAvro) }

func TestSchemaRegistryKafkajsJSON(t *testing.T) { testKafkajsSchemas(t, "json", sr.TypeJSON) }

func TestSchemaRegistryKafkajsProtobuf(t *testing.T) {
	testKafkajsSchemas(t, "protobuf", sr.TypeProtobuf)
}

func asResponseError(err error, target **sr.ResponseError) bool { return errors.As(err, target) }
