package stream

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lateCount reads weir_stream_window_late_records_total{store, policy}.
func lateCount(t *testing.T, reg *prometheus.Registry, store, policy string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "weir_stream_window_late_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["store"] == store && l["policy"] == policy {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// lateInput: tumbling 1 s windows, grace 100 ms, no out-of-orderness. The
// record at 800 comes after the watermark reached 1500: its window [0, 1000)
// closed at 1100, 400 ms before.
var lateInput = []wrec{{key: "a", ts: 500, val: 1}, {key: "a", ts: 1500, val: 2}, {key: "a", ts: 800, val: 4}}

func lateRun(t *testing.T, p LatePolicy, retain time.Duration) (*windowRun, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	store := WindowedStore{Name: "late", Grace: 100 * time.Millisecond, Late: p, Emit: EmitFinal(), Retain: retain}
	r := newWindowRun(t, Tumbling(time.Second), store, 1, 0, aggSum, Registerer(reg))
	r.pipe(lateInput...)
	return r, reg
}

func TestWindowLateDrop(t *testing.T) {
	r, reg := lateRun(t, DropLate(), 0)
	if got := lateCount(t, reg, "late", "drop"); got != 1 {
		t.Fatalf("late drop metric %v, want 1", got)
	}
	if d := diffResults(r.finals(), map[string]int64{wkey("a", 0, 1000): 1}); d != "[]" {
		t.Fatal(d)
	}
	if desc := r.d.App().Describe(); !strings.Contains(desc, "late records so far: drop 1") ||
		!strings.Contains(desc, "windowed (tumbling 1s), grace 100ms") {
		t.Fatalf("Describe does not state the window and its late count:\n%s", desc)
	}
}

func TestWindowLateToTopic(t *testing.T) {
	b := NewBuilder()
	g := GroupByKey(From(b, "in", String(), Int64()))
	store := WindowedStore{Name: "late", Grace: 100 * time.Millisecond, Late: LateToTopic("late-rides"), Emit: EmitFinal()}
	WindowedCount(g, Tumbling(time.Second), store).ToStream().To("out", TimeWindowed(String(), time.Second), Int64())
	reg := prometheus.NewRegistry()
	d, err := NewDriver("win", b, nil, StateDir(t.TempDir()), Registerer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, r := range lateInput {
		if _, err := d.Pipe("in", []byte(r.key), int64Bytes(r.val), time.UnixMilli(r.ts), Header{Key: "trace", Value: []byte("t1")}); err != nil {
			t.Fatal(err)
		}
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	late := d.Records("late-rides")
	if len(late) != 1 {
		t.Fatalf("late topic has %d records, want 1", len(late))
	}
	l := late[0]
	if string(l.Key) != "a" || string(l.Value) != string(int64Bytes(4)) || l.Timestamp.UnixMilli() != 800 {
		t.Fatalf("late record %q=%q at %v, want the input unchanged", l.Key, l.Value, l.Timestamp)
	}
	want := map[string]string{"trace": "t1", HeaderLateStore: "late", HeaderLateWindowStart: "0",
		HeaderLateWindowEnd: "1000", HeaderLateWatermark: "1500", HeaderLateBy: "400"}
	for k, v := range want {
		if got, ok := headerOf(l.Headers, k); !ok || got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if got := lateCount(t, reg, "late", "topic"); got != 1 {
		t.Fatalf("late metric %v, want 1", got)
	}
	if !slices.ContainsFunc(d.App().Guarantees(), func(g TopicGuarantee) bool { return g.Topic == "late-rides" && g.Role == "late" }) {
		t.Fatalf("the late topic is not among the written topics: %+v", d.App().Guarantees())
	}
}

func TestWindowLateToDLQ(t *testing.T) {
	r, reg := lateRun(t, LateToDLQ(), 0)
	dlq := r.d.Records(DLQTopic("win"))
	if len(dlq) != 1 {
		t.Fatalf("dead-letter topic has %d records, want 1", len(dlq))
	}
	if reason, _ := headerOf(dlq[0].Headers, HeaderDLQReason); !strings.Contains(reason, "late: window [0, 1000)") {
		t.Fatalf("reason %q", reason)
	}
	if by, _ := headerOf(dlq[0].Headers, HeaderLateBy); by != "400" {
		t.Fatalf("late-by header %q, want 400", by)
	}
	if off, _ := headerOf(dlq[0].Headers, HeaderDLQOffset); off != "2" {
		t.Fatalf("origin offset %q, want 2", off)
	}
	if got := lateCount(t, reg, "late", "dlq"); got != 1 {
		t.Fatalf("late metric %v, want 1", got)
	}
}

// LateUpdates: within retention the late record updates its closed window
// and a correction follows the final result; past it, the record is
// counted and dropped.
func TestWindowLateUpdates(t *testing.T) {
	r, reg := lateRun(t, LateUpdates(), 2*time.Second)
	out := r.outputs()
	var got []string
	for _, o := range out {
		got = append(got, o.win+"="+strconv.FormatInt(o.val, 10))
	}
	if want := "a|0|1000=1 a|0|1000=5"; strings.Join(got, " ") != want {
		t.Fatalf("outputs %v, want %s (final, then the correction)", got, want)
	}
	// Watermark 5000: [0, 1000) is past 1000 + 100 + 2000: deleted.
	r.pipe(wrec{key: "a", ts: 5000, val: 0}, wrec{key: "a", ts: 900, val: 8})
	if got := lateCount(t, reg, "late", "updates-expired"); got != 1 {
		t.Fatalf("expired late metric %v, want 1", got)
	}
	if n := len(r.outputs()); n != 3 { // + the final of [1000, 2000)
		t.Fatalf("%d outputs, want 3: %+v", n, r.outputs())
	}
}

// A record some of whose hopping windows are closed updates the open ones;
// the closed ones are counted as partial.
func TestWindowPartiallyLate(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newWindowRun(t, Hopping(time.Second, 500*time.Millisecond), finalStore("part"), 1, 0, aggCount, Registerer(reg))
	r.pipe(wrec{key: "a", ts: 1200}, wrec{key: "a", ts: 900}) // 900: [0,1000) closed, [500,1500) open
	if got := lateCount(t, reg, "part", "partial"); got != 1 {
		t.Fatalf("partial metric %v, want 1", got)
	}
	if got := lateCount(t, reg, "part", "drop"); got != 0 {
		t.Fatalf("drop metric %v, want 0", got)
	}
	r.flush(100_000)
	want := map[string]int64{wkey("a", 500, 1500): 2, wkey("a", 1000, 2000): 1}
	if d := diffResults(r.finals(), want); d != "[]" {
		t.Fatal(d)
	}
}

func TestWindowDeclarationErrors(t *testing.T) {
	tests := []struct {
		name  string
		w     Windows
		store WindowedStore
		want  string
	}{
		{"no late policy", Tumbling(time.Second), WindowedStore{Name: "s", Emit: EmitFinal()}, "no late policy"},
		{"no emission", Tumbling(time.Second), WindowedStore{Name: "s", Late: DropLate()}, "no emission"},
		{"no windows", nil, WindowedStore{Name: "s", Late: DropLate(), Emit: EmitFinal()}, "no windows"},
		{"bad size", Tumbling(0), WindowedStore{Name: "s", Late: DropLate(), Emit: EmitFinal()}, "size"},
		{"advance > size", Hopping(time.Second, 2*time.Second), WindowedStore{Name: "s", Late: DropLate(), Emit: EmitFinal()}, "advance"},
		{"negative grace", Tumbling(time.Second), WindowedStore{Name: "s", Grace: -1, Late: DropLate(), Emit: EmitFinal()}, "grace"},
		{"updates without retain", Tumbling(time.Second), WindowedStore{Name: "s", Late: LateUpdates(), Emit: EmitFinal()}, "Retain"},
		{"updates on sessions without retain", Session(time.Second), WindowedStore{Name: "s", Late: LateUpdates(), Emit: EmitFinal()}, "Retain"},
		{"bad late topic", Tumbling(time.Second), WindowedStore{Name: "s", Late: LateToTopic("a b"), Emit: EmitFinal()}, "late topic"},
		{"bad name", Tumbling(time.Second), WindowedStore{Name: "", Late: DropLate(), Emit: EmitFinal()}, "invalid name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuilder()
			WindowedCount(GroupByKey(From(b, "in", String(), Int64())), tt.w, tt.store).ToStream().
				To("out", TimeWindowed(String(), time.Second), Int64())
			_, err := NewApp("win", b, Brokers("127.0.0.1:1"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewApp error %v, want one containing %q", err, tt.want)
			}
		})
	}
	// Sessions need a merge function for Aggregate (Count and Reduce have one).
	b := NewBuilder()
	WindowedAggregate(GroupByKey(From(b, "in", String(), Int64())), Session(time.Second),
		WindowedStore{Name: "s", Late: DropLate(), Emit: EmitFinal()}, func() int64 { return 0 },
		func(r Record[string, int64], a int64) (int64, error) { return a, nil }, nil)
	if _, err := NewApp("win", b, Brokers("127.0.0.1:1")); err == nil || !strings.Contains(err.Error(), "merge function") {
		t.Fatalf("NewApp error %v, want the missing merge function", err)
	}
}

// Early firing: every 2 records a partial result, then the final one.
func TestWindowEarlyEvery(t *testing.T) {
	store := WindowedStore{Name: "early", Late: DropLate(), Emit: EmitFinal(EarlyEvery(2))}
	r := newWindowRun(t, Tumbling(time.Second), store, 1, 0, aggCount)
	r.pipe(wrec{key: "a", ts: 100}, wrec{key: "a", ts: 200}, wrec{key: "a", ts: 300}, wrec{key: "a", ts: 1100})
	var got []string
	for _, o := range r.outputs() {
		got = append(got, o.win+"="+strconv.FormatInt(o.val, 10))
	}
	if want := "a|0|1000=2 a|0|1000=3"; strings.Join(got, " ") != want {
		t.Fatalf("outputs %v, want %s", got, want)
	}
}

// Early firing on the processing clock: windows updated since the last
// firing emit their partial result once the interval passed.
func TestWindowEarlyInterval(t *testing.T) {
	clk := &instantClock{now: time.Unix(1000, 0)}
	store := WindowedStore{Name: "early", Late: DropLate(), Emit: EmitFinal(EarlyInterval(time.Minute))}
	r := newWindowRun(t, Tumbling(time.Hour), store, 1, 0, aggCount, ProcessingClock(clk))
	r.pipe(wrec{key: "a", ts: 100}, wrec{key: "b", ts: 200})
	if n := len(r.outputs()); n != 0 {
		t.Fatalf("%d outputs before the interval passed", n)
	}
	clk.now = clk.now.Add(time.Minute)
	r.pipe(wrec{key: "a", ts: 300})
	var got []string
	for _, o := range r.outputs() {
		got = append(got, o.win+"="+strconv.FormatInt(o.val, 10))
	}
	if want := "a|0|3600000=2 b|0|3600000=1"; strings.Join(got, " ") != want {
		t.Fatalf("outputs %v, want %s", got, want)
	}
}

// Metamorphic: the same records in another order within the
// out-of-orderness bound, or over more partitions, give the same final
// results.
func TestWindowMetamorphic(t *testing.T) {
	const bound = 300
	for _, w := range []Windows{Tumbling(time.Second), Hopping(time.Second, 250*time.Millisecond),
		Session(200 * time.Millisecond), Sliding(300 * time.Millisecond)} {
		recs := genRecords(5, 600, testKeys, 1_000_000, 20, 0)
		var ref map[string]int64
		for i, c := range []struct {
			parts   int32
			shuffle bool
		}{{1, false}, {1, true}, {3, true}, {12, false}} {
			in := slices.Clone(recs)
			if c.shuffle {
				shuffleWithin(in, bound, uint64(i))
				if slices.Equal(in, recs) {
					t.Fatal("shuffle left the records in order")
				}
				hi := in[0].ts
				for _, r := range in {
					if r.ts < hi-bound {
						t.Fatalf("shuffled record at %d after %d: beyond the bound", r.ts, hi)
					}
					hi = max(hi, r.ts)
				}
			}
			r := newWindowRun(t, w, finalStore("meta"), c.parts, bound*time.Millisecond, aggSum)
			r.pipe(in...)
			r.flush(10_000_000)
			got := r.finals()
			if ref == nil {
				ref = got
				if len(ref) == 0 {
					t.Fatalf("%s: no results", w.describe())
				}
				continue
			}
			if d := diffResults(got, ref); d != "[]" {
				t.Fatalf("%s, %d partitions, shuffled %v: %s", w.describe(), c.parts, c.shuffle, d)
			}
		}
	}
}

// shuffleWithin reorders recs by their time plus a random delay of at most
// bound ms: a record then never comes after one more than bound later than
// it (if s comes first, ts(s) + delay(s) <= ts(r) + delay(r), so ts(s) <=
// ts(r) + bound).
func shuffleWithin(recs []wrec, bound int64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	arrive := make(map[*wrec]int64, len(recs))
	ptrs := make([]*wrec, len(recs))
	for i := range recs {
		r := recs[i]
		ptrs[i] = &r
		arrive[&r] = r.ts + rng.Int64N(bound+1)
	}
	slices.SortStableFunc(ptrs, func(a, b *wrec) int { return cmp.Compare(arrive[a], arrive[b]) })
	for i, p := range ptrs {
		recs[i] = *p
	}
}
