package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// runCLI runs one weir command line in-process and returns its output and
// exit code.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// mustCLI runs a command line that must succeed.
func mustCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, stdin, args...)
	if code != 0 {
		t.Fatalf("weir %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// murmur2 is Kafka's Java-client hash (org.apache.kafka.common.utils.Utils.murmur2),
// written here independently of any client so partition placement is checked
// against the reference formula, not against the client that produced.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(data))
	n := len(data) / 4
	for i := 0; i < n; i++ {
		k := uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[4*n:]
	switch len(tail) {
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

func javaPartition(key []byte, partitions int32) int32 {
	return (murmur2(key) & 0x7fffffff) % partitions
}

func TestMurmur2ReferenceVectors(t *testing.T) {
	// Values from Kafka's UtilsTest.testMurmur2.
	for in, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
	} {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestTopicLifecycle(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr

	out := mustCLI(t, "", "topic", "create", b, "orders", "-p", "3", "-c", "retention.ms=3600000")
	if !strings.Contains(out, `created topic "orders" (3 partitions`) {
		t.Fatalf("create output: %q", out)
	}
	// Creating it again fails, unless --if-not-exists.
	if _, errOut, code := runCLI(t, "", "topic", "create", b, "orders"); code == 0 || !strings.Contains(errOut, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("duplicate create: exit %d, stderr %q", code, errOut)
	}
	mustCLI(t, "", "topic", "create", b, "orders", "--if-not-exists")

	out = mustCLI(t, "", "topic", "list", b)
	if !regexpLine(out, `^orders\s+3\s+1$`) {
		t.Fatalf("list output:\n%s", out)
	}

	out = mustCLI(t, "", "topic", "describe", b, "orders")
	for _, want := range []string{"Topic: orders", "Partitions: 3", "retention.ms"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe output lacks %q:\n%s", want, out)
		}
	}
	for p := 0; p < 3; p++ {
		if !regexpLine(out, fmt.Sprintf(`^%d\s+\d+\s+\d+\s+\d+\s+0\s+0\s+0$`, p)) {
			t.Fatalf("describe output lacks partition %d row:\n%s", p, out)
		}
	}

	mustCLI(t, "", "topic", "alter", b, "orders", "--partitions", "5", "-c", "retention.ms=7200000")
	out = mustCLI(t, "", "topic", "describe", b, "orders")
	if !strings.Contains(out, "Partitions: 5") || !regexpLine(out, `^retention\.ms\s+7200000\s+topic\b`) {
		t.Fatalf("describe after alter:\n%s", out)
	}
	if _, errOut, code := runCLI(t, "", "topic", "alter", b, "orders", "--partitions", "2"); code == 0 || !strings.Contains(errOut, "INVALID_PARTITIONS") {
		t.Fatalf("shrinking partitions: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "", "topic", "alter", b, "orders", "-c", "retention.ms=soon"); code == 0 || !strings.Contains(errOut, "INVALID_CONFIG") {
		t.Fatalf("invalid config value: exit %d, stderr %q", code, errOut)
	}
	mustCLI(t, "", "topic", "alter", b, "orders", "--delete-config", "retention.ms")
	out = mustCLI(t, "", "topic", "describe", b, "orders")
	if regexpLine(out, `^retention\.ms\s+\d+\s+topic\b`) {
		t.Fatalf("retention.ms still set on the topic after --delete-config:\n%s", out)
	}
	if _, _, code := runCLI(t, "", "topic", "alter", b, "orders"); code == 0 {
		t.Fatal("alter without changes succeeded")
	}

	mustCLI(t, "", "topic", "delete", b, "orders")
	out = mustCLI(t, "", "topic", "list", b)
	if strings.Contains(out, "orders") {
		t.Fatalf("orders still listed after delete:\n%s", out)
	}
	if _, errOut, code := runCLI(t, "", "topic", "describe", b, "orders"); code == 0 || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("describe deleted topic: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := runCLI(t, "", "topic", "delete", b, "orders"); code == 0 {
		t.Fatal("deleting a missing topic succeeded")
	}
	mustCLI(t, "", "topic", "delete", b, "orders", "--if-exists")
}

func regexpLine(text, pattern string) bool {
	re := regexp.MustCompile(pattern)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if re.MatchString(strings.TrimRight(sc.Text(), " ")) {
			return true
		}
	}
	return false
}

type consumed struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
	Key       *string
	KeyBase64 *string `json:"key_base64"`
	Value     *string
	Headers   []struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	} `json:"headers"`
}

func parseJSONLines(t *testing.T, out string) []consumed {
	t.Helper()
	var recs []consumed
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var c consumed
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("bad json line %q: %v", sc.Text(), err)
		}
		recs = append(recs, c)
	}
	return recs
}

func TestProduceConsume(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "events", "-p", "4")

	var in strings.Builder
	const n = 40
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "user-%d:event %d: with a colon\n", i, i)
	}
	in.WriteString("no separator here\n")
	_, errOut, code := runCLI(t, in.String(), "produce", b, "events", "-K", ":", "-H", "source=cli", "-H", "k2=v=2")
	if code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, fmt.Sprintf("produced %d records", n+1)) {
		t.Fatalf("produce summary: %q", errOut)
	}

	out := mustCLI(t, "", "consume", b, "events", "-e", "-f", "json")
	recs := parseJSONLines(t, out)
	if len(recs) != n+1 {
		t.Fatalf("consumed %d records, want %d:\n%s", len(recs), n+1, out)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if len(r.Headers) != 2 || r.Headers[0].Key != "source" || *r.Headers[0].Value != "cli" || r.Headers[1].Key != "k2" || *r.Headers[1].Value != "v=2" {
			t.Fatalf("record %s/%d@%d headers = %+v", r.Topic, r.Partition, r.Offset, r.Headers)
		}
		if r.Key == nil {
			if *r.Value != "no separator here" {
				t.Fatalf("unkeyed record value %q", *r.Value)
			}
			seen["<nil>"] = true
			continue
		}
		var i int
		if _, err := fmt.Sscanf(*r.Key, "user-%d", &i); err != nil {
			t.Fatalf("bad key %q", *r.Key)
		}
		if want := fmt.Sprintf("event %d: with a colon", i); *r.Value != want {
			t.Fatalf("key %s: value %q, want %q", *r.Key, *r.Value, want)
		}
		if want := javaPartition([]byte(*r.Key), 4); r.Partition != want {
			t.Fatalf("key %s in partition %d, murmur2 says %d", *r.Key, r.Partition, want)
		}
		if seen[*r.Key] {
			t.Fatalf("key %s consumed twice", *r.Key)
		}
		seen[*r.Key] = true
	}

	// kv format round-trips with produce -K; headers follow a tab.
	out = mustCLI(t, "", "consume", b, "events", "-e", "-f", "kv", "-p", fmt.Sprint(javaPartition([]byte("user-7"), 4)))
	if !strings.Contains(out, "user-7:event 7: with a colon\tsource=cli,k2=v=2\n") {
		t.Fatalf("kv output lacks user-7:\n%s", out)
	}

	// -n stops after n records, even while following.
	out = mustCLI(t, "", "consume", b, "events", "-n", "5")
	if got := strings.Count(out, "\n"); got != 5 {
		t.Fatalf("-n 5 printed %d lines:\n%s", got, out)
	}

	// -o -1: the last record of every partition.
	out = mustCLI(t, "", "consume", b, "events", "-e", "-o=-1", "-f", "json")
	last := parseJSONLines(t, out)
	if len(last) != 4 {
		t.Fatalf("-o -1 printed %d records, want one per partition (4):\n%s", len(last), out)
	}
	// -o N: absolute offset; beyond the end prints nothing and exits with -e.
	p0 := javaPartition([]byte("user-0"), 4)
	out = mustCLI(t, "", "consume", b, "events", "-e", "-o", "1", "-p", fmt.Sprint(p0), "-f", "json")
	for _, r := range parseJSONLines(t, out) {
		if r.Offset < 1 || r.Partition != p0 {
			t.Fatalf("-o 1 -p %d returned %s/%d@%d", p0, r.Topic, r.Partition, r.Offset)
		}
	}
	if out := mustCLI(t, "", "consume", b, "events", "-e", "-o", "end"); out != "" {
		t.Fatalf("-o end -e printed %q", out)
	}

	// --timestamp: records at or after a timestamp; in the future: none.
	first := recs[0]
	out = mustCLI(t, "", "consume", b, "events", "-e", "-f", "json", "--timestamp", fmt.Sprint(first.Timestamp))
	if got := len(parseJSONLines(t, out)); got == 0 {
		t.Fatalf("--timestamp %d printed nothing", first.Timestamp)
	}
	if out := mustCLI(t, "", "consume", b, "events", "-e", "--timestamp", "2999-01-01T00:00:00Z"); out != "" {
		t.Fatalf("--timestamp in the future printed %q", out)
	}
}

func TestProduceAcksAndPartition(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "acks", "-p", "2")
	for _, acks := range []string{"all", "1", "0"} {
		mustCLI(t, fmt.Sprintf("a-%s\nb-%s\n", acks, acks), "produce", b, "acks", "--acks", acks, "-p", "1", "-q")
	}
	if _, errOut, code := runCLI(t, "x\n", "produce", b, "acks", "--acks", "2"); code == 0 || !strings.Contains(errOut, "--acks") {
		t.Fatalf("--acks 2: exit %d, stderr %q", code, errOut)
	}
	// acks=0 gives no confirmation, so read until all six arrived.
	out := mustCLI(t, "", "consume", b, "acks", "-p", "1", "-n", "6")
	for _, acks := range []string{"all", "1", "0"} {
		if !strings.Contains(out, "a-"+acks+"\nb-"+acks+"\n") {
			t.Fatalf("acks=%s records missing or out of order:\n%s", acks, out)
		}
	}
	if out := mustCLI(t, "", "consume", b, "acks", "-p", "0", "-e"); out != "" {
		t.Fatalf("partition 0 should be empty, got %q", out)
	}
}

func TestCLIErrors(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "t", "-p", "1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"consume", b, "missing", "-e"}, "UNKNOWN_TOPIC_OR_PARTITION"},
		{[]string{"consume", b, "t", "-f", "xml"}, "--format"},
		{[]string{"consume", b, "t", "-o", "middle", "-e"}, "--offset"},
		{[]string{"consume", b, "t", "-p", "3", "-e"}, "no partition 3"},
		{[]string{"consume", b, "t", "-o", "5", "--timestamp", "0"}, "mutually exclusive"},
		{[]string{"consume", b, "t", "--group", "g", "-e"}, "--exit is not supported"},
		{[]string{"consume", b, "t", "--timestamp", "yesterday", "-e"}, "--timestamp"},
		{[]string{"produce", b, "t", "-H", "novalue"}, "key=value"},
		{[]string{"produce", b, "t", "-z", "brotli"}, "--compression"},
		{[]string{"topic", "create", b, "x", "-c", "retention.ms"}, "key=value"},
		{[]string{"topic", "bogus"}, ""},
	} {
		_, errOut, code := runCLI(t, "", tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("weir %s: exit %d, stderr %q, want failure mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

func TestConsumeJSONBinaryAndNull(t *testing.T) {
	b := weirtest.Start(t, weirtest.WithTopic("bin", 1))
	recs := []*kgo.Record{
		{Topic: "bin", Key: []byte{0xff, 0x00, 0xfe}, Value: []byte("text"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{0x80}}}},
		{Topic: "bin", Key: nil, Value: nil},
	}
	if err := b.Client().ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "", "consume", "--brokers="+b.Addr(), "bin", "-e", "-f", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines:\n%s", len(lines), out)
	}
	if want := `{"topic":"bin","partition":0,"offset":0,"timestamp":`; !strings.HasPrefix(lines[0], want) {
		t.Fatalf("line 0: %s", lines[0])
	}
	if want := `"key":null,"key_base64":"/wD+","value":"text","headers":[{"key":"h","value_base64":"gA=="}]}`; !strings.HasSuffix(lines[0], want) {
		t.Fatalf("line 0: %s\nwant suffix %s", lines[0], want)
	}
	if want := `"key":null,"value":null}`; !strings.HasSuffix(lines[1], want) {
		t.Fatalf("line 1 (null key and value): %s", lines[1])
	}
}

// weir consume --group reads as a group member and commits what it printed:
// a second run of the same group continues where the first stopped.
func TestConsumeGroupResumes(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "g", "-p", "1")
	mustCLI(t, "r0\nr1\nr2\nr3\nr4\n", "produce", b, "g", "-q")
	first := mustCLI(t, "", "consume", b, "g", "--group", "cli", "-n", "2")
	if first != "r0\nr1\n" {
		t.Fatalf("first run: %q", first)
	}
	second := mustCLI(t, "", "consume", b, "g", "--group", "cli", "-n", "3")
	if second != "r2\nr3\nr4\n" {
		t.Fatalf("second run (resuming from the committed offset): %q", second)
	}
	// Another group starts from the beginning (default --offset beginning).
	if other := mustCLI(t, "", "consume", b, "g", "--group", "other", "-n", "1"); other != "r0\n" {
		t.Fatalf("new group: %q", other)
	}
	// --offset end: a new group sees only later records.
	done := make(chan string, 1)
	go func() {
		out, _, _ := runCLI(t, "", "consume", b, "g", "--group", "tail", "--offset", "end", "-n", "1")
		done <- out
	}()
	// The consumer may join after this produce; produce until it reports.
	for i := 0; ; i++ {
		mustCLI(t, fmt.Sprintf("late%d\n", i), "produce", b, "g", "-q")
		select {
		case out := <-done:
			if !strings.HasPrefix(out, "late") {
				t.Fatalf("--offset end printed %q", out)
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if i == 100 {
			t.Fatal("--group tail --offset end printed nothing")
		}
	}
}

// Many small lines are batched within the broker's default
// max.message.bytes; a record larger than --max-batch-bytes fails clearly.
func TestProduceBatchLimits(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "big", "-p", "1")
	line := strings.Repeat("y", 1000) + "\n"
	mustCLI(t, strings.Repeat(line, 5000), "produce", b, "big", "-q") // ~5 MB of input
	out := mustCLI(t, "", "consume", b, "big", "-e")
	if n := strings.Count(out, "\n"); n != 5000 {
		t.Fatalf("consumed %d records, want 5000", n)
	}
	huge := strings.Repeat("z", 2<<20) + "\n"
	if _, errOut, code := runCLI(t, huge, "produce", b, "big"); code == 0 || !strings.Contains(errOut, "failed") {
		t.Fatalf("2 MiB record: exit %d, %q", code, errOut)
	}
	// Batches larger than the topic's max.message.bytes are refused by
	// the broker: the default --max-batch-bytes is what keeps the first
	// produce above working (the linger makes the big batch certain).
	if _, errOut, code := runCLI(t, strings.Repeat(line, 3000), "produce", b, "big", "--max-batch-bytes", "16000000", "--max-line-bytes", "20000000", "--linger", "1s"); code == 0 || !strings.Contains(errOut, "MESSAGE_TOO_LARGE") {
		t.Fatalf("16 MB batches: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "x\n", "produce", b, "big", "--max-line-bytes", "0"); code == 0 || !strings.Contains(errOut, "--max-line-bytes") {
		t.Fatalf("--max-line-bytes 0: exit %d, %q", code, errOut)
	}
}

// consume -f json | produce --input json copies records with their keys
// (text, binary, null), values (including null), headers and timestamps.
func TestJSONRoundTrip(t *testing.T) {
	b := weirtest.Start(t, weirtest.WithTopic("src", 2), weirtest.WithTopic("dst", 2))
	ts := time.UnixMilli(1700000000123)
	recs := []*kgo.Record{
		{Topic: "src", Key: []byte("k1"), Value: []byte("v1"), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Topic: "src", Key: []byte{0xff, 0x01}, Value: []byte{0x80}, Timestamp: ts.Add(time.Second)},
		{Topic: "src", Key: []byte("tomb"), Value: nil, Timestamp: ts.Add(2 * time.Second)},
		{Topic: "src", Key: nil, Value: []byte(""), Timestamp: ts.Add(3 * time.Second)},
	}
	if err := b.Client().ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	br := "--brokers=" + b.Addr()
	src := mustCLI(t, "", "consume", br, "src", "-e", "-f", "json")
	mustCLI(t, src, "produce", br, "dst", "--input", "json", "-q")
	dst := mustCLI(t, "", "consume", br, "dst", "-e", "-f", "json")
	// Same records: compare without topic, partition and offset (a record
	// without a key may land in any partition), then check that keyed
	// records kept their partition (same key, same partitioner).
	norm := func(s string) (all []string, partOf map[string]float64) {
		partOf = map[string]float64{}
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("bad line %q: %v", line, err)
			}
			if k, ok := m["key"].(string); ok {
				partOf[k] = m["partition"].(float64)
			}
			delete(m, "topic")
			delete(m, "partition")
			delete(m, "offset")
			b, _ := json.Marshal(m)
			all = append(all, string(b))
		}
		sort.Strings(all)
		return all, partOf
	}
	sa, sp := norm(src)
	da, dp := norm(dst)
	if strings.Join(sa, "\n") != strings.Join(da, "\n") {
		t.Fatalf("copy differs:\nsrc:\n%s\ndst:\n%s", strings.Join(sa, "\n"), strings.Join(da, "\n"))
	}
	for k, p := range sp {
		if dp[k] != p {
			t.Errorf("key %q: partition %v in src, %v in dst", k, p, dp[k])
		}
	}
	if !strings.Contains(dst, `"timestamp":1700000000123`) || !strings.Contains(dst, `"key":"tomb","value":null`) {
		t.Fatalf("timestamps or null value not kept:\n%s", dst)
	}

	for _, bad := range []string{`{"key":"a","kye":"b"}`, `{"key":"a","key_base64":"YQ=="}`, `{"value_base64":"!!"}`, `not json`, `{"a":1} {"b":2}`} {
		_, errOut, code := runCLI(t, bad+"\n", "produce", br, "dst", "--input", "json")
		if code == 0 || !strings.Contains(errOut, "line 1") {
			t.Errorf("input %s: exit %d, %q", bad, code, errOut)
		}
	}
	if _, errOut, code := runCLI(t, "", "produce", br, "dst", "--input", "yaml"); code == 0 || !strings.Contains(errOut, "--input") {
		t.Errorf("--input yaml: exit %d, %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	out := mustCLI(t, "", "version")
	if !strings.HasPrefix(out, "weir ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version output %q", out)
	}
}

// Issue 18: consume reads several topics and topics matching a regex
// (directly and in a group), prints kcat-like format strings, and reads
// committed data only unless --isolation read_uncommitted.
func TestConsumeTopicsRegexFormatIsolation(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	for _, tp := range []string{"orders-eu", "orders-us", "payments"} {
		mustCLI(t, "", "topic", "create", b, tp, "-p", "1")
		mustCLI(t, "k:"+tp+"\n", "produce", b, tp, "-K", ":", "-H", "src=cli", "-q")
	}
	lines := func(s string) []string {
		l := strings.Split(strings.TrimSpace(s), "\n")
		sort.Strings(l)
		return l
	}
	out := mustCLI(t, "", "consume", b, "orders-eu", "payments", "-e", "-F", `%t %p %o %k %s %h %K %S`)
	if got, want := lines(out), []string{"orders-eu 0 0 k orders-eu src=cli 1 9", "payments 0 0 k payments src=cli 1 8"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("two topics with -F: %q, want %q", got, want)
	}
	out = mustCLI(t, "", "consume", b, "--regex", "orders-.*", "-e", "-F", `%t\t%s\n`)
	if got, want := lines(out), []string{"orders-eu\torders-eu", "orders-us\torders-us"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("--regex: %q, want %q", got, want)
	}
	// A regex matches whole names: "orders" alone matches nothing.
	if _, errOut, code := runCLI(t, "", "consume", b, "--regex", "orders", "-e"); code == 0 || !strings.Contains(errOut, "no topic matches") {
		t.Fatalf("--regex orders: exit %d, %q", code, errOut)
	}
	out = mustCLI(t, "", "consume", b, "--regex", "orders-.*", "-g", "rx", "-n", "2", "-F", "%t")
	if got, want := lines(out), []string{"orders-eu", "orders-us"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("--regex -g: %q, want %q", got, want)
	}
	for _, bad := range [][]string{
		{"-F", "%x"}, {"-F", "50%"}, {"-F", `\q`}, {"-F", "%s", "-f", "json"}, {"--isolation", "serializable"}, {"--regex", "("},
	} {
		if _, errOut, code := runCLI(t, "", append([]string{"consume", b, "payments", "-e"}, bad...)...); code == 0 {
			t.Errorf("consume %v: exit 0 (%s)", bad, errOut)
		}
	}

	// An aborted transaction's record and a committed one.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mustCLI(t, "", "topic", "create", b, "tx", "-p", "1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("cli-test"), kgo.DefaultProduceTopic("tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := "aborted"
		if commit {
			v = "committed"
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	// -e ends at the end even though the last offset is a commit marker.
	if out := mustCLI(t, "", "consume", b, "tx", "-e"); out != "committed\n" {
		t.Fatalf("default (read_committed): %q", out)
	}
	if out := mustCLI(t, "", "consume", b, "tx", "-e", "--isolation", "read_uncommitted"); out != "aborted\ncommitted\n" {
		t.Fatalf("read_uncommitted: %q", out)
	}
	if out := mustCLI(t, "", "consume", b, "tx", "-n", "1", "-g", "txg"); out != "committed\n" {
		t.Fatalf("group, read_committed: %q", out)
	}
}

// Issue 18: produce --input json takes values as JSON objects (written as
// JSON), headers as an object or an array, timestamps in RFC 3339 or ms, and
// says what is wrong in JSON's terms, never with a Go type name.
func TestProduceJSONInputForms(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "j", "-p", "1")
	in := `{"key":"k1","value":{"b":1,"a":[true,null]},"headers":{"h1":"x","h0":"y"},"timestamp":"2026-01-02T15:04:05.5Z"}
{"key":7,"value":"plain","headers":[{"key":"z","value":"1"},{"key":"bin","value_base64":"/wA="}],"timestamp":1700000000123}
{"value":null,"timestamp":"1700000000999"}
`
	mustCLI(t, in, "produce", b, "j", "--input", "json", "-q")
	out := mustCLI(t, "", "consume", b, "j", "-e", "-f", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("consumed:\n%s", out)
	}
	for i, want := range []string{
		`"timestamp":1767366245500,"key":"k1","value":"{\"b\":1,\"a\":[true,null]}","headers":[{"key":"h1","value":"x"},{"key":"h0","value":"y"}]}`,
		`"timestamp":1700000000123,"key":"7","value":"plain","headers":[{"key":"z","value":"1"},{"key":"bin","value_base64":"/wA="}]}`,
		`"timestamp":1700000000999,"key":null,"value":null}`,
	} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("record %d: %s\nwant suffix %s", i, lines[i], want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{`[1,2]`, "a record must be a JSON object, got an array"},
		{`{"value":"x","timestamp":true}`, "timestamp: want milliseconds since the epoch"},
		{`{"timestamp":"yesterday"}`, `timestamp "yesterday": want milliseconds`},
		{`{"headers":"h=1"}`, "headers: want an array"},
		{`{"headers":[{"key":1}]}`, `headers[0]: "key" must be a string`},
		{`{"headers":[{"key":"a","valu":"x"}]}`, `headers[0]: unknown field "valu"`},
		{`{"key_base64":5}`, "key_base64: want a base64 string, got a number"},
		{`{"value":"a","value_base64":"YQ=="}`, "value: both value and value_base64"},
		{`{"kye":"b"}`, `unknown field "kye"`},
		{`{"value":`, "not valid JSON: the line ends inside the JSON value"},
	} {
		_, errOut, code := runCLI(t, tc.in+"\n", "produce", b, "j", "--input", "json")
		if code == 0 || !strings.Contains(errOut, "line 1: "+tc.want) {
			t.Errorf("input %s: exit %d, stderr %q, want %q", tc.in, code, errOut, tc.want)
		}
		for _, goName := range []string{"Go struct", "of type", "jsonInput", "string into", "*string", "int64"} {
			if strings.Contains(errOut, goName) {
				t.Errorf("input %s: error names a Go type (%q): %s", tc.in, goName, errOut)
			}
		}
	}
}
