package stream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func values(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Key) + "=" + string(r.Value)
	}
	return out
}

func TestStatelessChain(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	var peeked []string
	upper := Map(in, func(r Record[string, string]) (string, error) { return strings.ToUpper(r.Value), nil })
	words := FlatMap(upper, func(r Record[string, string]) ([]string, error) { return strings.Fields(r.Value), nil })
	long := words.Filter(func(r Record[string, string]) (bool, error) { return len(r.Value) > 2, nil }).
		Peek(func(r Record[string, string]) { peeked = append(peeked, r.Value) })
	long.To("words", String(), String())
	byWord := KeyBy(long, func(r Record[string, string]) (string, error) { return r.Value, nil })
	byWord.To("by-word", String(), String())

	h := newHarness(t, b)
	h.feed("in", 0, "k1", "the quick brown fox", t0)
	h.feed("in", 0, "k2", "a b", t0)

	if got, want := values(h.topic("words")), []string{"k1=THE", "k1=QUICK", "k1=BROWN", "k1=FOX"}; !slices.Equal(got, want) {
		t.Fatalf("words = %v, want %v", got, want)
	}
	if got, want := values(h.topic("by-word")), []string{"THE=THE", "QUICK=QUICK", "BROWN=BROWN", "FOX=FOX"}; !slices.Equal(got, want) {
		t.Fatalf("by-word = %v, want %v", got, want)
	}
	if got, want := peeked, []string{"THE", "QUICK", "BROWN", "FOX"}; !slices.Equal(got, want) {
		t.Fatalf("peeked = %v, want %v", got, want)
	}
	for _, r := range h.topic("words") {
		if !r.Timestamp.Equal(t0) {
			t.Fatalf("timestamp %v not carried from input %v", r.Timestamp, t0)
		}
	}
}

func TestBranchAndMerge(t *testing.T) {
	b := NewBuilder()
	a := From(b, "a", String(), Int64())
	c := From(b, "c", String(), Int64())
	all := a.Merge(c)
	br := all.Branch(
		func(r Record[string, int64]) (bool, error) { return r.Value < 0, nil },
		func(r Record[string, int64]) (bool, error) { return r.Value%2 == 0, nil },
	)
	if len(br) != 3 {
		t.Fatalf("branches = %d, want 3", len(br))
	}
	br[0].To("neg", String(), Int64())
	br[1].To("even", String(), Int64())
	br[2].To("other", String(), Int64())

	h := newHarness(t, b)
	enc := func(n int64) string { v, _ := Int64().Encode(n); return string(v) }
	h.feed("a", 0, "x", enc(-3), t0)
	h.feed("c", 1, "y", enc(4), t0)
	h.feed("a", 0, "z", enc(5), t0)
	h.feed("c", 1, "w", enc(-4), t0) // first matching branch wins

	keys := func(topic string) (ks []string) {
		for _, r := range h.topic(topic) {
			ks = append(ks, string(r.Key))
		}
		return ks
	}
	if got := keys("neg"); !slices.Equal(got, []string{"x", "w"}) {
		t.Fatalf("neg = %v", got)
	}
	if got := keys("even"); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("even = %v", got)
	}
	if got := keys("other"); !slices.Equal(got, []string{"z"}) {
		t.Fatalf("other = %v", got)
	}
}

func TestHeadersAndTimestampExtractor(t *testing.T) {
	type ev struct {
		At int64 `json:"at"`
	}
	b := NewBuilder()
	From(b, "in", String(), JSON[ev](), Timestamps(func(r Record[string, ev]) time.Time {
		return time.UnixMilli(r.Value.At)
	})).To("out", String(), JSON[ev]())
	h := newHarness(t, b)
	h.feed("in", 0, "k", `{"at":1700000000123}`, t0, kgo.RecordHeader{Key: "traceparent", Value: []byte("00-abc-def-01")})
	out := h.topic("out")
	if len(out) != 1 {
		t.Fatalf("out = %d records", len(out))
	}
	if got := out[0].Timestamp.UnixMilli(); got != 1700000000123 {
		t.Fatalf("event time = %d, want the extracted 1700000000123", got)
	}
	if v, ok := header(out[0], "traceparent"); !ok || v != "00-abc-def-01" {
		t.Fatalf("traceparent header not carried: %q %v", v, ok)
	}
}

func TestCountAndChangelog(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "counts", TTL: time.Hour}).
		ToStream().To("counts-out", String(), Int64())
	h := newHarness(t, b)
	for i, k := range []string{"a", "b", "a", "a", "b"} {
		h.feed("in", 2, k, "v", t0.Add(time.Duration(i)*time.Second))
	}
	dec := func(r *kgo.Record) int64 {
		n, err := Int64().Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var got []string
	for _, r := range h.topic("counts-out") {
		got = append(got, fmt.Sprintf("%s=%d", r.Key, dec(r)))
	}
	if want := []string{"a=1", "b=1", "a=2", "a=3", "b=2"}; !slices.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	cl := h.topic("app-counts-changelog")
	if len(cl) != 5 {
		t.Fatalf("changelog has %d records, want 5", len(cl))
	}
	for _, r := range cl {
		if r.Partition != 2 {
			t.Fatalf("changelog record in partition %d, want the task's partition 2", r.Partition)
		}
	}
	if len(h.topic("app-counts-repartition")) != 0 {
		t.Fatal("count on the source key must not repartition")
	}
}

func TestRepartitionAfterKeyBy(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	byVal := KeyBy(in, func(r Record[string, string]) (string, error) { return r.Value, nil })
	Count(GroupByKey(byVal, Codecs(String(), String())), StoreConfig{Name: "per-value", TTL: time.Hour}).
		ToStream().To("out", String(), Int64())
	h := newHarness(t, b)
	h.feed("in", 0, "k1", "red", t0)
	h.feed("in", 0, "k2", "red", t0)
	rep := h.topic("app-per-value-repartition")
	if got := values(rep); !slices.Equal(got, []string{"red=red", "red=red"}) {
		t.Fatalf("repartition topic = %v", got)
	}
	if len(h.topic("out")) != 0 {
		t.Fatal("count ran before the repartition hop")
	}
	// The downstream task reads the repartition topic.
	for _, r := range rep {
		h.feed(r.Topic, r.Partition, string(r.Key), string(r.Value), r.Timestamp)
	}
	out := h.topic("out")
	if len(out) != 2 || string(out[1].Key) != "red" {
		t.Fatalf("out = %v", values(out))
	}
	if n, _ := Int64().Decode(out[1].Value); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
}

func TestMergedSourcesRepartitionBeforeState(t *testing.T) {
	b := NewBuilder()
	x := From(b, "x", String(), String())
	y := From(b, "y", String(), String())
	Count(GroupByKey(x.Merge(y), Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Hour})
	h := newHarness(t, b)
	h.feed("x", 0, "k", "v", t0)
	if len(h.topic("app-c-repartition")) != 1 {
		t.Fatal("a store fed by two sources must sit behind a repartition topic (one task per store partition)")
	}
}

func TestRetryThenDLQ(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	calls := 0
	Map(in, func(r Record[string, string]) (string, error) {
		calls++
		if r.Value == "bad" {
			return "", Retriable(errors.New("cannot handle bad"))
		}
		if r.Value == "boom" {
			panic("user code exploded")
		}
		return r.Value, nil
	}).To("out", String(), String())
	h := newHarness(t, b, MaxAttempts(3), RetryBackoff(time.Second, 10*time.Second))
	start := h.clock.Now()
	h.feed("in", 1, "k", "bad", t0, kgo.RecordHeader{Key: "h1", Value: []byte("x")})
	h.feed("in", 1, "k", "boom", t0)
	h.feed("in", 1, "k", "good", t0)

	if calls != 5 {
		t.Fatalf("user function called %d times, want 3+1+1 (a retriable error is retried, a panic is not)", calls)
	}
	if got := values(h.topic("out")); !slices.Equal(got, []string{"k=good"}) {
		t.Fatalf("out = %v: the partition must go on after poison records", got)
	}
	dlq := h.topic("app.dlq")
	if len(dlq) != 2 {
		t.Fatalf("dlq has %d records, want 2", len(dlq))
	}
	want := map[string]string{
		HeaderDLQAttempts: "3", HeaderDLQApp: "app", HeaderDLQTopic: "in", HeaderDLQPartition: "1",
		HeaderDLQOffset: "0", HeaderDLQKind: "error", "h1": "x", HeaderDLQOperator: "map-values-1",
		HeaderDLQFirstFailure: start.Format(time.RFC3339Nano),
		// backoff 1s then 2s between the three attempts
		HeaderDLQLastFailure: start.Add(3 * time.Second).Format(time.RFC3339Nano),
	}
	for k, v := range want {
		if got, ok := header(dlq[0], k); !ok || got != v {
			t.Errorf("dlq[0] header %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if reason, _ := header(dlq[0], HeaderDLQReason); !strings.Contains(reason, "cannot handle bad") {
		t.Errorf("reason = %q", reason)
	}
	if string(dlq[0].Value) != "bad" || string(dlq[0].Key) != "k" {
		t.Errorf("dlq record key/value = %q/%q, want the original bytes", dlq[0].Key, dlq[0].Value)
	}
	if kind, _ := header(dlq[1], HeaderDLQKind); kind != "panic" {
		t.Errorf("dlq[1] kind = %q, want panic", kind)
	}
	if off, _ := header(dlq[1], HeaderDLQOffset); off != "1" {
		t.Errorf("dlq[1] offset = %q, want 1", off)
	}
	if tk := h.task("in", 1); tk.next["in"].Offset != 3 {
		t.Fatalf("next offset to commit = %d, want 3 (poison records count as handled)", tk.next["in"].Offset)
	}
}

func TestDecodeErrorGoesToDLQAtOnce(t *testing.T) {
	b := NewBuilder()
	calls := 0
	in := From(b, "in", String(), JSON[map[string]int]())
	in.Peek(func(Record[string, map[string]int]) { calls++ }).To("out", String(), JSON[map[string]int]())
	h := newHarness(t, b, MaxAttempts(5))
	h.feed("in", 0, "k", "{not json", t0)
	h.feed("in", 0, "k", `{"a":1}`, t0)
	dlq := h.topic("app.dlq")
	if len(dlq) != 1 {
		t.Fatalf("dlq = %d records", len(dlq))
	}
	if n, _ := header(dlq[0], HeaderDLQAttempts); n != "1" {
		t.Fatalf("attempts = %s, want 1 (decode errors are not retried)", n)
	}
	if k, _ := header(dlq[0], HeaderDLQKind); k != "decode" {
		t.Fatalf("kind = %s", k)
	}
	if calls != 1 || len(h.topic("out")) != 1 {
		t.Fatalf("calls %d, out %d", calls, len(h.topic("out")))
	}
}

// A failed attempt must leave no trace: neither its store writes nor its
// outputs, so a retried record is counted once.
func TestFailedAttemptIsAtomic(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	fails := 2
	Count(GroupByKey(in), StoreConfig{Name: "c", TTL: time.Hour}).ToStream().To("counts", String(), Int64())
	// Declared after the count: it fails after the count updated its store.
	Map(in, func(r Record[string, string]) (string, error) {
		if fails > 0 {
			fails--
			return "", Retriable(errors.New("transient"))
		}
		return r.Value, nil
	}).To("out", String(), String())
	h := newHarness(t, b, MaxAttempts(5), RetryBackoff(0, 0))
	h.feed("in", 0, "k", "v", t0)
	h.feed("in", 0, "k", "v", t0)
	if out := h.topic("out"); len(out) != 2 {
		t.Fatalf("out = %d records", len(out))
	}
	got := h.topic("counts")
	if n, _ := Int64().Decode(got[len(got)-1].Value); n != 2 || len(got) != 2 {
		t.Fatalf("counts after retries = %d records, last %d, want 2 and 2", len(got), n)
	}
	if got := len(h.topic("app-c-changelog")); got != 2 {
		t.Fatalf("changelog records = %d, want 2 (failed attempts write nothing)", got)
	}
}

func TestTTLExpiry(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Minute}).ToStream().To("out", String(), Int64())
	h := newHarness(t, b)
	h.feed("in", 0, "old", "v", t0)
	h.feed("in", 0, "fresh", "v", t0.Add(30*time.Second))
	tk := h.task("in", 0)
	if err := tk.expire(100); err != nil {
		t.Fatal(err)
	}
	if n := len(h.topic("app-c-changelog")); n != 2 {
		t.Fatalf("nothing is a minute old yet, changelog = %d records", n)
	}
	h.feed("in", 0, "fresh", "v", t0.Add(70*time.Second)) // stream time moves past old's TTL
	if err := tk.expire(100); err != nil {
		t.Fatal(err)
	}
	cl := h.topic("app-c-changelog")
	last := cl[len(cl)-1]
	if string(last.Key) != "old" || last.Value != nil {
		t.Fatalf("last changelog record = %s=%v, want a tombstone for old", last.Key, last.Value)
	}
	// old starts again from zero.
	h.feed("in", 0, "old", "v", t0.Add(71*time.Second))
	out := h.topic("out")
	if n, _ := Int64().Decode(out[len(out)-1].Value); n != 1 {
		t.Fatalf("count of expired key = %d, want 1", n)
	}
}

func TestBuilderValidation(t *testing.T) {
	cases := map[string]func(b *Builder){
		"no TTL": func(b *Builder) {
			Count(GroupByKey(From(b, "in", String(), String()), Codecs(String(), String())), StoreConfig{Name: "c"})
		},
		"duplicate store": func(b *Builder) {
			g := GroupByKey(From(b, "in", String(), String()), Codecs(String(), String()))
			Count(g, StoreConfig{Name: "c", TTL: time.Hour})
			Count(g, StoreConfig{Name: "c", TTL: time.Hour})
		},
		"duplicate source": func(b *Builder) {
			From(b, "in", String(), String())
			From(b, "in", String(), String())
		},
		"bad topic": func(b *Builder) { From(b, "in/x", String(), String()) },
		"nil codec": func(b *Builder) { From[string, string](b, "in", nil, String()) },
		"no source": func(b *Builder) {},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			b := NewBuilder()
			build(b)
			if _, err := NewApp("app", b, Brokers("127.0.0.1:1")); err == nil {
				t.Fatal("NewApp accepted an invalid topology")
			}
		})
	}
	b := NewBuilder()
	From(b, "in", String(), String())
	for name, opt := range map[string]Opt{
		"no brokers": Brokers(), "workers": Workers(0), "attempts": MaxAttempts(0),
		"backoff": RetryBackoff(time.Second, time.Millisecond), "replication": ReplicationFactor(0),
		"commit": CommitInterval(0),
	} {
		if _, err := NewApp("app", b, Brokers("127.0.0.1:1"), opt); err == nil {
			t.Errorf("%s: NewApp accepted an invalid option", name)
		}
	}
	if _, err := NewApp("app", b, Brokers("127.0.0.1:1"), Delivery(Guarantee(9))); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown guarantee: err = %v, want ErrUnsupported", err)
	}
	if _, err := NewApp("bad app", b, Brokers("127.0.0.1:1")); err == nil {
		t.Error("NewApp accepted an invalid app id")
	}
}

func TestDescribeStatesGuarantees(t *testing.T) {
	b := NewBuilder()
	in := From(b, "rides", String(), String())
	byZone := KeyBy(in, func(r Record[string, string]) (string, error) { return r.Value, nil })
	Count(GroupByKey(byZone, Codecs(String(), String())), StoreConfig{Name: "zone-counts", TTL: 24 * time.Hour}).
		ToStream().To("zone-counts", String(), Int64())
	a, err := NewApp("surge", b, Brokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, g := range a.Guarantees() {
		roles[g.Topic] = g.Role
		if g.Delivery != AtLeastOnce || !strings.Contains(g.Mechanism, "duplicates visible after a crash") {
			t.Errorf("%s: %v %q", g.Topic, g.Delivery, g.Mechanism)
		}
	}
	want := map[string]string{
		"zone-counts": "output", "surge-zone-counts-repartition": "repartition",
		"surge-zone-counts-changelog": "changelog", "surge.dlq": "dead-letter",
	}
	for topic, role := range want {
		if roles[topic] != role {
			t.Errorf("%s: role %q, want %q (all: %v)", topic, roles[topic], role, roles)
		}
	}
	d := a.Describe()
	for _, s := range []string{"at-least-once", "store zone-counts: TTL 24h0m0s",
		"sub-topology 0 (one task per partition): rides", "sub-topology 1 (one task per partition): surge-zone-counts-repartition"} {
		if !strings.Contains(d, s) {
			t.Errorf("Describe lacks %q:\n%s", s, d)
		}
	}
}

func TestCodecs(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 1 << 40} {
		b, _ := Int64().Encode(n)
		if got, err := Int64().Decode(b); err != nil || got != n {
			t.Fatalf("int64 %d: %d %v", n, got, err)
		}
	}
	if _, err := Int64().Decode([]byte{1, 2}); err == nil {
		t.Fatal("int64 decoded 2 bytes")
	}
	type v struct{ A string }
	b, _ := JSON[v]().Encode(v{"x"})
	if got, err := JSON[v]().Decode(b); err != nil || got.A != "x" {
		t.Fatalf("json: %v %v", got, err)
	}
	if got, err := JSON[v]().Decode(nil); err != nil || got.A != "" {
		t.Fatalf("json null: %v %v", got, err)
	}
	if _, err := JSON[v]().Decode([]byte("{")); err == nil {
		t.Fatal("json decoded garbage")
	}
	raw := []byte("abc")
	got, _ := Bytes().Decode(raw)
	raw[0] = 'X'
	if string(got) != "abc" {
		t.Fatal("Bytes().Decode must copy")
	}
	_ = strconv.Itoa
}

func FuzzJSONDecode(f *testing.F) {
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte(`[`))
	f.Add([]byte(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = JSON[map[string]any]().Decode(b)
		_, _ = Int64().Decode(b)
	})
}

// A local store that cannot be opened is deleted and rebuilt (it is a cache
// of the changelog).
func TestUnopenableStoreIsRebuilt(t *testing.T) {
	b := NewBuilder()
	Count(GroupByKey(From(b, "in", String(), String()), Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Hour})
	h := newHarness(t, b)
	dir := h.a.taskDir(h.taskID("in", 0))
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.feed("in", 0, "k", "v", t0)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("store directory not rebuilt: %v", err)
	}
}
