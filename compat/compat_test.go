package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	numPartitions = 6
	numRecords    = 240
	// bigRecord is the index of one record with a 200 KiB value, so every
	// client also reads a record larger than its usual fetch chunk.
	bigRecord = 123
	// toolTimeout bounds one run of an external client program.
	toolTimeout = 90 * time.Second
	installHint = "run .ci/run (its install step installs kcat, python3-kafka, python3-confluent-kafka, python3-jsonschema, python3-protobuf, python3-requests, kafkajs and @kafkajs/confluent-schema-registry)"
)

// record is one record as produced and as consumed. Partition and Offset
// are where the producer was told it went, or where the consumer found it.
type record struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// testRecords are the records every client produces: distinct keys,
// values with multi-byte UTF-8, and one large value.
func testRecords() []record {
	recs := make([]record, numRecords)
	for i := range recs {
		v := fmt.Sprintf("value-%d-%s", i, strings.Repeat("é", i%7))
		if i == bigRecord {
			v += strings.Repeat("0123456789abcdef", 200<<10/16)
		}
		recs[i] = record{Key: fmt.Sprintf("key-%d", i), Value: v, Partition: -1, Offset: -1}
	}
	return recs
}

// murmur2 is the Java client's key hash (org.apache.kafka.common.utils.Utils.murmur2),
// written here so placement is checked against the reference formula rather
// than against any client under test.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
	)
	h := seed ^ uint32(len(data))
	n := len(data) / 4
	for i := 0; i < n; i++ {
		k := uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24
		k *= m
		k ^= k >> 24
		k *= m
		h *= m
		h ^= k
	}
	switch tail := data[4*n:]; len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// javaPartition is the Java default partitioner's choice for a keyed record.
func javaPartition(key string, partitions int32) int32 {
	return (murmur2([]byte(key)) & 0x7fffffff) % partitions
}

func TestMurmur2ReferenceVectors(t *testing.T) {
	// Expected values from Kafka's UtilsTest.testMurmur2.
	for in, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

// placement is the partition a client's partitioner must have chosen for
// a key, for numPartitions partitions.
type placement func(key string) int32

// javaMurmur2 is the Java client's default partitioner for keyed records.
func javaMurmur2(key string) int32 { return javaPartition(key, numPartitions) }

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// adminFor returns a franz-go admin client used by the driver itself to
// check the broker's state independently of the client under test.
func adminFor(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates a topic through the driver (for clients without an
// admin API).
func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	resp, err := adminFor(t, addr).CreateTopic(testContext(t, 30*time.Second), partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// checkTopic asserts that topic exists with the given partition count
// (after the client under test created it).
func checkTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	td, err := adminFor(t, addr).ListTopics(testContext(t, 30*time.Second), topic)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		t.Fatalf("topic %s not found after the client created it (%v)", topic, d.Err)
	}
	if n := int32(len(d.Partitions)); n != partitions {
		t.Fatalf("topic %s has %d partitions, the client asked for %d", topic, n, partitions)
	}
}

// checkProduced asserts what the producer was told and what the log holds.
// acked (nil for a producer that reports nothing, like kcat) must hold
// every record once, with the partition its partitioner chooses and
// distinct offsets; the log's end offsets must equal the number of records
// each partition should hold: nothing lost, nothing duplicated.
func checkProduced(t *testing.T, addr, topic string, sent, acked []record, place placement) {
	t.Helper()
	want := map[string]string{}
	wantPerPart := map[int32]int64{}
	for _, r := range sent {
		want[r.Key] = r.Value
		wantPerPart[place(r.Key)]++
	}
	if acked != nil {
		offsets := map[[2]int64]string{}
		seen := map[string]bool{}
		for _, r := range acked {
			if _, ok := want[r.Key]; !ok {
				t.Fatalf("producer acknowledged unknown key %q", r.Key)
			}
			if seen[r.Key] {
				t.Fatalf("producer acknowledged key %q twice", r.Key)
			}
			seen[r.Key] = true
			if p := place(r.Key); r.Partition != p {
				t.Fatalf("key %q acknowledged in partition %d, its partitioner says %d", r.Key, r.Partition, p)
			}
			if r.Offset < 0 {
				t.Fatalf("key %q acknowledged without an offset", r.Key)
			}
			at := [2]int64{int64(r.Partition), r.Offset}
			if other, dup := offsets[at]; dup {
				t.Fatalf("keys %q and %q both acknowledged at partition %d offset %d", other, r.Key, r.Partition, r.Offset)
			}
			offsets[at] = r.Key
		}
		if len(seen) != len(want) {
			t.Fatalf("producer acknowledged %d of %d records", len(seen), len(want))
		}
	}
	ends, err := adminFor(t, addr).ListEndOffsets(testContext(t, 30*time.Second), topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	var total int64
	for p := int32(0); p < numPartitions; p++ {
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, p, o.Err)
		}
		if o.Offset != wantPerPart[p] {
			t.Errorf("partition %d: end offset %d, want %d (the records whose keys map there)", p, o.Offset, wantPerPart[p])
		}
		total += o.Offset
	}
	if total != int64(len(sent)) {
		t.Fatalf("the log holds %d records, %d were produced", total, len(sent))
	}
}

// checkConsumed asserts that the consumer read back every produced record
// exactly once, with its key and value, from the partition its partitioner
// chose and the offset the producer was told (when it was told one), and
// in offset order within each partition.
func checkConsumed(t *testing.T, sent, acked, got []record, place placement) {
	t.Helper()
	where := map[string]record{}
	for _, r := range acked {
		where[r.Key] = r
	}
	want := map[string]string{}
	for _, r := range sent {
		want[r.Key] = r.Value
	}
	seen := map[string]bool{}
	for _, r := range got {
		v, ok := want[r.Key]
		if !ok {
			t.Fatalf("consumed unknown key %q (partition %d offset %d)", r.Key, r.Partition, r.Offset)
		}
		if seen[r.Key] {
			t.Fatalf("consumed key %q twice", r.Key)
		}
		seen[r.Key] = true
		if p := place(r.Key); r.Partition != p {
			t.Fatalf("key %q consumed from partition %d, its partitioner says %d", r.Key, r.Partition, p)
		}
		if r.Value != v {
			t.Fatalf("key %q: consumed value of %d bytes %q..., produced %d bytes %q...", r.Key, len(r.Value), trunc(r.Value), len(v), trunc(v))
		}
		if a, ok := where[r.Key]; ok {
			if a.Partition != r.Partition || a.Offset != r.Offset {
				t.Fatalf("key %q: producer was told partition %d offset %d, consumer found it at partition %d offset %d",
					r.Key, a.Partition, a.Offset, r.Partition, r.Offset)
			}
		}
	}
	if len(seen) != len(want) {
		var missing []string
		for k := range want {
			if !seen[k] {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		if len(missing) > 10 {
			missing = append(missing[:10], "...")
		}
		t.Fatalf("consumed %d of %d records; missing %v", len(seen), len(want), missing)
	}
	// Within a partition, records come back in offset order.
	last := map[int32]int64{}
	for _, r := range got {
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			t.Fatalf("partition %d: offset %d consumed after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
	}
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

// requireTool fails the test (never skips) when an external program is
// missing, saying how to install it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found on PATH: %s", name, installHint)
	}
	return p
}

// systemPython is the Debian interpreter the python3-kafka and
// python3-confluent-kafka packages install into; a python3 earlier on PATH
// (pyenv, venv) would not see them.
const systemPython = "/usr/bin/python3"

func requirePythonModule(t *testing.T, module string) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		t.Fatalf("%s not found: %s", systemPython, installHint)
	}
	out, err := exec.Command(systemPython, "-c", "import "+module).CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import %s (%v): %s\n%s", systemPython, module, err, installHint, out)
	}
}

// runTool runs an external client program with the JSON-lines protocol:
// stdin is given, stdout is parsed as one record per line. Its stderr is
// logged on failure.
func runTool(t *testing.T, stdin []byte, name string, args ...string) []record {
	t.Helper()
	out := runToolRaw(t, stdin, name, args...)
	var recs []record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: bad output line %q: %v", name, trunc(string(line)), err)
		}
		recs = append(recs, r)
	}
	return recs
}

func runToolRaw(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s: killed after %v\nstderr:\n%s", shortCmd(name, args), toolTimeout, tail(stderr.String()))
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s: %v\nstderr:\n%s", shortCmd(name, args), err, tail(stderr.String()))
		}
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s: ok in %v", shortCmd(name, args), time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

// shortCmd is a command line for logs: program and script paths by base
// name, long arguments cut.
func shortCmd(name string, args []string) string {
	parts := []string{filepath.Base(name)}
	for _, a := range args {
		if filepath.IsAbs(a) {
			a = filepath.Base(a)
		}
		parts = append(parts, trunc(a))
	}
	return strings.Join(parts, " ")
}

func tail(s string) string {
	const max = 8 << 10
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}

// checkGroupCommitted asserts that group committed, for every partition of
// topic, the partition's end offset: the consumer committed everything it
// read, and the broker kept it.
func checkGroupCommitted(t *testing.T, addr, group, topic string) {
	t.Helper()
	adm := adminFor(t, addr)
	ctx := testContext(t, 30*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	for p := int32(0); p < numPartitions; p++ {
		end, _ := ends.Lookup(topic, p)
		c, ok := committed.Lookup(topic, p)
		if end.Offset == 0 && !ok {
			continue // nothing to read, nothing to commit
		}
		if !ok || c.Err != nil {
			t.Fatalf("group %s: no committed offset for %s/%d (%v)", group, topic, p, c.Err)
		}
		if c.At != end.Offset {
			t.Errorf("group %s: committed offset %d for %s/%d, end offset is %d", group, c.At, topic, p, end.Offset)
		}
	}
}

// jsonLines encodes records as the scripts' stdin.
func jsonLines(recs []record) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		_ = enc.Encode(struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		}{r.Key, r.Value})
	}
	return b.Bytes()
}
