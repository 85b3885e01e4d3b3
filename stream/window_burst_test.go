package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// burstRun drives one task of a windowed count over "in" (String keys,
// Int64 values) to "out" round by round, with WindowClosesPerRound(n) and
// no out-of-orderness bound, recording what each round wrote: results,
// late records ("late") and changelog records. Transactions are explicit
// (begin, commit, abort) as the ExactlyOnce loop runs them; restart makes a
// new task restore the store from the committed changelog records only.
type burstRun struct {
	t     *testing.T
	w     Windows
	store WindowedStore
	n     int
	dir   string
	a     *App
	tk    *task

	open, done []*kgo.Record // written in the open transaction / committed
	off        int64
	txnStart   int64
	perRound   []int // results of each round
}

func newBurstRun(t *testing.T, w Windows, store WindowedStore, n int) *burstRun {
	r := &burstRun{t: t, w: w, store: store, n: n, dir: t.TempDir()}
	r.start()
	t.Cleanup(func() { r.tk.close() })
	return r
}

// start creates the task and restores its store from the committed
// changelog records.
func (r *burstRun) start() {
	r.t.Helper()
	bl := NewBuilder()
	g := GroupByKey(From(bl, "in", String(), Int64()))
	var tbl Table[Windowed[string], int64]
	if _, ok := r.w.(SessionWindows); ok {
		tbl = WindowedCount(g, r.w, r.store)
	} else {
		// A merge function: hopping windows take the pane layout.
		tbl = WindowedAggregate(g, r.w, r.store, func() int64 { return 0 },
			func(_ Record[string, int64], a int64) (int64, error) { return a + 1, nil },
			func(a, b int64) (int64, error) { return a + b, nil })
	}
	tbl.ToStream().To("out", WindowedKeys(String(), r.w), Int64())
	a, err := NewApp("burst", bl, Brokers("127.0.0.1:1"), StateDir(r.dir), captureInto(&r.open), Watermarks(0, 0),
		WindowClosesPerRound(r.n))
	if err != nil {
		r.t.Fatal(err)
	}
	if r.tk, err = a.newTask(taskID{sub: 0, partition: 0}); err != nil {
		r.t.Fatal(err)
	}
	r.a = a
	a.taskQueryable(r.tk)
	restoreFrom(r.t, r.tk, r.done)
}

// round handles one record of value 1 per wrec, then ends the round; no
// records: a tick.
func (r *burstRun) round(recs ...wrec) {
	r.t.Helper()
	before := r.results(r.open)
	for _, w := range recs {
		kr := &kgo.Record{Topic: "in", Key: []byte(w.key), Value: int64Bytes(1), Offset: r.off, Timestamp: time.UnixMilli(w.ts)}
		r.off++
		if err := r.tk.handle(context.Background(), kr); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.tk.endBatch(); err != nil {
		r.t.Fatal(err)
	}
	r.perRound = append(r.perRound, r.results(r.open)-before)
}

// drain ticks (at least once) until no close is pending, each round
// committed (at most limit rounds).
func (r *burstRun) drain(limit int) {
	r.t.Helper()
	for i := 0; i == 0 || r.tk.closesPending(); i++ {
		if i == limit {
			r.t.Fatalf("closes still pending after %d rounds", limit)
		}
		r.begin()
		r.round()
		r.commit()
	}
}

func (r *burstRun) begin() { r.tk.beginRound(); r.txnStart = r.off }

// commit commits the open transaction (or, at-least-once, the round's
// offsets): its writes become the store's, its records committed.
func (r *burstRun) commit() {
	r.t.Helper()
	if err := r.tk.flushState(); err != nil {
		r.t.Fatal(err)
	}
	r.done = append(r.done, r.open...)
	r.open = nil
}

// abort aborts the open transaction: its records and writes are gone, its
// input is read again.
func (r *burstRun) abort() {
	r.tk.abortRound()
	r.open = nil
	r.off = r.txnStart
}

// crash stops the task as a process killed after its last commit would,
// losing its local store: the results written since stay (at-least-once
// outputs are visible before their commit), its changelog records since
// are lost. Then a new task restores the store from the changelog.
func (r *burstRun) crash() {
	r.t.Helper()
	for _, kr := range r.open {
		if kr.Topic == "out" {
			r.done = append(r.done, kr)
		}
	}
	r.open = nil
	r.tk.close()
	r.start()
}

// results counts the result records of rs (sentinels left out).
func (r *burstRun) results(rs []*kgo.Record) int {
	n := 0
	for _, kr := range rs {
		if kr.Topic == "out" && kr.Key[0] != '~' && !r.sentinel(kr) {
			n++
		}
	}
	return n
}

func (r *burstRun) sentinel(kr *kgo.Record) bool {
	k, err := WindowedKeys(String(), r.w).Decode(kr.Key)
	if err != nil {
		r.t.Fatal(err)
	}
	return k.Key[0] == '~'
}

// committed returns the committed results in order, as "key|start|end"
// and value (-1: a tombstone).
func (r *burstRun) committed() ([]string, []int64) {
	r.t.Helper()
	var wins []string
	var vals []int64
	for _, kr := range r.done {
		if kr.Topic != "out" || r.sentinel(kr) {
			continue
		}
		k, _ := WindowedKeys(String(), r.w).Decode(kr.Key)
		v := int64(-1) // a tombstone (a retracted session)
		if kr.Value != nil {
			var err error
			if v, err = Int64().Decode(kr.Value); err != nil {
				r.t.Fatal(err)
			}
		}
		wins = append(wins, wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli()))
		vals = append(vals, v)
	}
	return wins, vals
}

// finals returns the committed results, failing on a window emitted twice.
func (r *burstRun) finals() map[string]int64 {
	r.t.Helper()
	wins, vals := r.committed()
	m := map[string]int64{}
	for i, w := range wins {
		if _, ok := m[w]; ok {
			r.t.Fatalf("window %s emitted twice", w)
		}
		m[w] = vals[i]
	}
	return m
}

// late returns the keys of the committed late records.
func (r *burstRun) late() []string {
	var ks []string
	for _, kr := range r.done {
		if kr.Topic == "late" {
			ks = append(ks, string(kr.Key))
		}
	}
	return ks
}

func burstKeys(prefix string, n int) []wrec {
	var recs []wrec
	for i := range n {
		recs = append(recs, wrec{key: fmt.Sprintf("%s%02d", prefix, i)})
	}
	return recs
}

func at(recs []wrec, ts int64) []wrec {
	out := slices.Clone(recs)
	for i := range out {
		out[i].ts = ts
	}
	return out
}

// A watermark jump past 30 tumbling windows closes at most 7 per round, in
// close order (the index's: end, key), each once; a record for a window
// the watermark passed whose close is still pending is late (LateToTopic),
// and the window's result does not count it.
func TestWindowBurstBoundsRoundCloses(t *testing.T) {
	r := newBurstRun(t, Tumbling(time.Second),
		WindowedStore{Name: "w", Late: LateToTopic("late"), Emit: EmitFinal()}, 7)
	keys := burstKeys("k", 30)
	r.begin()
	r.round(at(keys, 100)...)
	r.commit()
	r.begin()
	r.round(wrec{key: "~", ts: 5000}) // the watermark passes [0, 1000) of 30 keys
	r.commit()
	if r.perRound[1] != 7 || !r.tk.closesPending() {
		t.Fatalf("the jump's round closed %d windows (pending: %v), want 7 and more pending", r.perRound[1], r.tk.closesPending())
	}
	// k29's window [0, 1000) waits for its close; the watermark passed it.
	r.begin()
	r.round(wrec{key: "k29", ts: 500}, wrec{key: "n", ts: 600})
	r.commit()
	r.drain(10)
	if want := []int{0, 7, 7, 7, 7, 2}; !slices.Equal(r.perRound, want) {
		t.Fatalf("results per round %v, want %v", r.perRound, want)
	}
	wins, _ := r.committed()
	want := make([]string, 0, 30)
	for _, k := range keys {
		want = append(want, wkey(k.key, 0, 1000))
	}
	if !slices.Equal(wins, want) {
		t.Fatalf("results in order %v, want %v", wins, want)
	}
	for w, v := range r.finals() {
		if v != 1 {
			t.Fatalf("window %s counted %d, want 1 (the late record is not in it)", w, v)
		}
	}
	if got := r.late(); !slices.Equal(got, []string{"k29", "n"}) {
		t.Fatalf("late records %v, want k29 and n", got)
	}
}

// Hopping windows in pane layout, in both forms (rows; per-pane entries
// beyond 32 panes a window): a record whose pane is in a window whose close
// a burst left pending (and in later, open ones) counts in the open windows
// only; the pending window's result is what the watermark closed.
func TestWindowBurstPaneLateRecord(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, adv int64
		n, rounds int
		rows      bool
	}{
		{name: "rows", size: 1000, adv: 500, n: 5, rounds: 30, rows: true},
		{name: "per-pane", size: 3300, adv: 200, n: 20, rounds: 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := Hopping(time.Duration(c.size)*time.Millisecond, time.Duration(c.adv)*time.Millisecond)
			r := newBurstRun(t, w, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}, c.n)
			if d := r.tk.timed[0].(*windowOp[string, int64, int64]).d; d.pane == 0 || d.rows != c.rows {
				t.Fatalf("the store is not in pane layout's form (rows %v)", c.rows)
			}
			keys := burstKeys("k", 20)
			var recs []wrec
			r.begin()
			for _, ts := range []int64{100, 600} {
				recs = append(recs, at(keys, ts)...)
				r.round(at(keys, ts)...)
			}
			r.round(wrec{key: "~", ts: 1200}) // closes the windows ending by 1200, pending
			r.commit()
			if !r.tk.closesPending() {
				t.Fatal("no close pending after the jump")
			}
			// In a pending window of k19 (rows: [0, 1000); per-pane:
			// [-2200, 1100)) and in open ones, sharing its pane.
			late := wrec{key: "k19", ts: 900}
			r.begin()
			r.round(late)
			r.commit()
			r.begin()
			r.round(wrec{key: "~", ts: 100_000})
			r.commit()
			r.drain(c.rounds)
			want := batchTime(recs, c.size, c.adv, 0, true)
			for s := late.ts - late.ts%c.adv; s > late.ts-c.size; s -= c.adv {
				if s+c.size > 1200 {
					want[wkey("k19", s, s+c.size)]++
				}
			}
			if d := diffResults(r.finals(), want); d != "[]" {
				t.Fatal(d)
			}
		})
	}
}

// Under ExactlyOnce a burst smaller than its windows, with transactions
// aborted in its middle (one of the burst's rounds alone; one with the
// jump and the burst's first rounds), commits every result exactly once:
// tumbling, hopping (pane layout) and session windows.
func TestWindowBurstExactlyOnceAbort(t *testing.T) {
	cases := []struct {
		name  string
		w     Windows
		batch func([]wrec) map[string]int64
		// most: results a round may have: 6 index entries' (a row's
		// entry closes its key's due windows, here 4 at most).
		most, rounds int
	}{
		{"tumbling", Tumbling(time.Second), func(recs []wrec) map[string]int64 { return batchTime(recs, 1000, 1000, 0, true) }, 6, 100},
		{"hopping", Hopping(time.Second, 500*time.Millisecond), func(recs []wrec) map[string]int64 { return batchTime(recs, 1000, 500, 0, true) }, 24, 100},
		{"hopping-per-pane", Hopping(3300*time.Millisecond, 200*time.Millisecond), func(recs []wrec) map[string]int64 { return batchTime(recs, 3300, 200, 0, true) }, 6, 200},
		{"session", Session(300 * time.Millisecond), func(recs []wrec) map[string]int64 { return batchSessions(recs, 300, true) }, 6, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newBurstRun(t, c.w, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}, 6)
			keys := burstKeys("k", 25)
			var recs []wrec
			r.begin()
			for _, ts := range []int64{100, 350, 700, 1100} {
				recs = append(recs, at(keys, ts)...)
				r.round(at(keys, ts)...)
			}
			r.commit()
			// The jump and two of its burst's rounds, aborted, then
			// redone and committed.
			for _, abort := range []bool{true, false} {
				r.begin()
				r.round(wrec{key: "~", ts: 1_000_000})
				r.round()
				r.round()
				if abort {
					r.abort()
				} else {
					r.commit()
				}
			}
			// One round of the burst alone, aborted, then the rest.
			r.begin()
			r.round()
			r.abort()
			r.drain(c.rounds)
			for i, n := range r.perRound {
				if n > c.most {
					t.Fatalf("round %d closed %d windows, want at most %d", i, n, c.most)
				}
			}
			if d := diffResults(r.finals(), c.batch(recs)); d != "[]" {
				t.Fatal(d)
			}
		})
	}
}

// burstCrashLayouts are the layouts the crash tests run: one entry per
// window, pane rows, and per-pane entries (33 panes a window).
var burstCrashLayouts = []struct {
	name      string
	w         Windows
	size, adv int64
	rounds    int
}{
	{"tumbling", Tumbling(time.Second), 1000, 1000, 100},
	{"hopping", Hopping(time.Second, 500*time.Millisecond), 1000, 500, 100},
	{"hopping-per-pane", Hopping(3300*time.Millisecond, 200*time.Millisecond), 3300, 200, 200},
}

// burstCrashFeed commits a round of a record per key at each of 100, 600
// and 1100 (the watermark passes windows at 600 and 1100, each round
// leaving closes pending: a row's close takes its windows up to the
// round's bound, past the cursor), then one whose record far ahead starts
// a burst, and returns the records the results count.
func burstCrashFeed(r *burstRun) []wrec {
	keys := burstKeys("k", 25)
	var recs []wrec
	for _, ts := range []int64{100, 600, 1100} {
		r.begin()
		recs = append(recs, at(keys, ts)...)
		r.round(at(keys, ts)...)
		r.commit()
	}
	r.begin()
	r.round(wrec{key: "~", ts: 1_000_000})
	r.commit()
	return recs
}

// At-least-once: a process killed in the middle of a burst, whose store is
// restored from the changelog (the close index derived from the windows,
// or in pane layout from the panes, and the mark with the burst's cursor),
// closes the rest after the restart: no window's result is missing or
// wrong (results written before the crash may come again).
func TestWindowBurstCrashRestore(t *testing.T) {
	for _, c := range burstCrashLayouts {
		t.Run(c.name, func(t *testing.T) {
			r := newBurstRun(t, c.w, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}, 6)
			if !r.tk.stores[0].spec.derivesCloseIndex() {
				t.Fatal("the store's close index is not derived")
			}
			recs := burstCrashFeed(r)
			r.begin()
			r.round()
			r.commit()
			r.begin()
			r.round() // its changelog records are lost
			r.crash()
			r.drain(c.rounds)
			got := map[string]int64{}
			wins, vals := r.committed()
			for i, w := range wins {
				got[w] = vals[i]
			}
			if d := diffResults(got, batchTime(recs, c.size, c.adv, 0, true)); d != "[]" {
				t.Fatal(d)
			}
		})
	}
}

// ExactlyOnce: a process killed in the middle of a burst restores its
// store from the changelog of the committed transactions (the rows a
// burst's closes wrote back, the mark with the burst's cursor) and closes
// the rest: every window's result exactly once — none of the windows
// closed before the cursor's position, nor of a row's windows its close
// took past the cursor (the row's later windows up to the scan's bound),
// comes again.
func TestWindowBurstCrashRestoreExactlyOnce(t *testing.T) {
	for _, c := range burstCrashLayouts {
		t.Run(c.name, func(t *testing.T) {
			r := newBurstRun(t, c.w, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}, 6)
			recs := burstCrashFeed(r)
			// Rows: the second round takes k24's entry at 500 and the
			// entries at 1000 of k00 to k04: k24's window [0, 1000) is
			// after its cursor, left to a later round.
			for range 2 {
				r.begin()
				r.round()
				r.commit()
			}
			r.begin()
			r.round()
			r.abort() // the crash: its transaction aborts
			r.crash()
			r.drain(c.rounds)
			if d := diffResults(r.finals(), batchTime(recs, c.size, c.adv, 0, true)); d != "[]" {
				t.Fatal(d)
			}
		})
	}
}

// A bounded run's end closes every window, over as many rounds as the bound
// needs (the Driver's EndOfInput, as RunBounded).
func TestWindowBurstBoundedEnd(t *testing.T) {
	r := newWindowRun(t, Hopping(time.Second, 500*time.Millisecond), finalStore("w"), 2, 0, aggAggregate,
		WindowClosesPerRound(3))
	var recs []wrec
	for i := range 40 {
		recs = append(recs, wrec{key: fmt.Sprintf("k%02d", i), ts: int64(100 + 37*i), val: 1})
	}
	r.pipe(recs...)
	if err := r.d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	if d := diffResults(r.finals(), batchTime(recs, 1000, 500, 0, true)); d != "[]" {
		t.Fatal(d)
	}
}

// The windows a query shows (App.Range's and App.Get's local reads) while
// a burst's closes are pending: open windows only, not those the watermark
// closed and the bound has not reached yet (tumbling: windows; hopping:
// panes combined, from rows or per-pane entries). Describe states the
// bound.
func TestWindowBurstQueriesHidePending(t *testing.T) {
	for _, c := range []struct {
		name string
		w    Windows
		open int // windows of the keys open before the jump
	}{
		{"tumbling", Tumbling(time.Second), 30},
		{"hopping", Hopping(time.Second, 500*time.Millisecond), 60},
		{"hopping-per-pane", Hopping(3300*time.Millisecond, 200*time.Millisecond), 30 * 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newBurstRun(t, c.w, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}, 7)
			spec := r.tk.stores[0].spec
			var keys [][]byte // the windows shown
			shown := func() (n int) {
				t.Helper()
				if err := r.tk.db.Flush(); err != nil {
					t.Fatal(err)
				}
				es, err := r.a.rangeLocal(spec, 0, nil, nil, 1000, false)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					if e.Key[1] != '~' {
						n++
						keys = append(keys, e.Key)
					}
				}
				return n
			}
			// got: how many of the windows shown before the jump a Get
			// (App.Get's local read) finds.
			got := func() (n int) {
				t.Helper()
				if err := r.tk.db.Flush(); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					_, found, err := r.a.getLocal(spec, 0, k, false)
					if err != nil {
						t.Fatal(err)
					}
					if found {
						n++
					}
				}
				return n
			}
			r.begin()
			r.round(at(burstKeys("k", 30), 100)...)
			r.commit()
			if n := shown(); n != c.open {
				t.Fatalf("%d windows shown before the jump, want %d", n, c.open)
			}
			if n := got(); n != c.open {
				t.Fatalf("Get finds %d windows before the jump, want %d", n, c.open)
			}
			r.begin()
			r.round(wrec{key: "~", ts: 5000})
			r.commit()
			if !r.tk.closesPending() {
				t.Fatal("no close pending after the jump")
			}
			if n := got(); n != 0 {
				t.Fatalf("Get finds %d windows while their closes are pending, want none", n)
			}
			if n := shown(); n != 0 {
				t.Fatalf("%d windows shown while their closes are pending, want none", n)
			}
			if d := r.a.Describe(); !strings.Contains(d, "closes at most 7 windows per round") {
				t.Fatalf("Describe does not state the bound:\n%s", d)
			}
		})
	}
}

// An App over a watermark jump past 60 windows with 4 closes per round and
// a one-minute commit interval: the burst's rounds run without waiting for
// input or the interval (under ExactlyOnce each that leaves closes pending
// ends its transaction, so their results are readable at once), every window's result comes exactly
// once (ExactlyOnce; at least once otherwise); RunBounded returns only
// after the end of time closed every window, with the same bound.
func TestWindowBurstApp(t *testing.T) {
	w := Tumbling(time.Second)
	build := func(out string) func(*Builder) {
		return func(bl *Builder) {
			WindowedCount(GroupByKey(From(bl, "in", String(), Int64())), w, finalStore("w")).
				ToStream().To(out, WindowedKeys(String(), w), Int64())
		}
	}
	check := func(t *testing.T, out []*kgo.Record, exact bool) {
		t.Helper()
		seen := map[string]int{}
		for _, kr := range out {
			k, err := WindowedKeys(String(), w).Decode(kr.Key)
			if err != nil {
				t.Fatal(err)
			}
			if k.Key[0] != '~' {
				seen[k.Key]++
			}
		}
		if len(seen) != 60 {
			t.Fatalf("%d windows with results, want 60", len(seen))
		}
		for k, n := range seen {
			if exact && n != 1 {
				t.Fatalf("window of %s: %d results, want 1", k, n)
			}
		}
	}
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerFor(t, g)
			b.createTopic("in", 1)
			b.createTopic("out", 1)
			var recs []*kgo.Record
			for i := range 60 {
				recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(key(i)), Value: int64Bytes(1), Timestamp: t0})
			}
			b.produce(recs...)
			opts := []Opt{testLogger(t), Delivery(g), StateDir(t.TempDir()), CommitInterval(time.Minute),
				Watermarks(0, 0), WindowClosesPerRound(4)}
			ra := b.run("burst-run", build("out"), opts...)
			b.produce(&kgo.Record{Topic: "in", Key: []byte("~"), Value: int64Bytes(1), Timestamp: t0.Add(time.Hour)})
			// ExactlyOnce: the last round's 4 wait for the interval (or
			// the stop) in the open transaction, as any round's results.
			want := 60
			if g == ExactlyOnce {
				want = 56
			}
			b.waitForIso("out", g == ExactlyOnce, 20*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= want })
			// The last round (a stop before it would leave its closes to
			// the next run).
			b.waitForIso("out", false, 20*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= 60 })
			if err := ra.stop(); err != nil {
				t.Fatal(err)
			}
			check(t, b.read("out", g == ExactlyOnce), g == ExactlyOnce)

			// A bounded run (another app) over the same input, whose end
			// of time closes the 60 windows (and the sentinel's).
			bl := NewBuilder()
			build("out2")(bl)
			b.createTopic("out2", 1)
			a, err := NewApp("burst-bounded", bl, append(opts, Brokers(b.seeds...), StateDir(t.TempDir()))...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := a.RunBounded(ctx); err != nil {
				t.Fatalf("RunBounded: %v", err)
			}
			check(t, b.read("out2", g == ExactlyOnce), g == ExactlyOnce)
		})
	}
}

// LateUpdates: a late record for a window whose close a burst left pending
// closes it first (its final result without the record), then updates it
// as a retained window (a correction): the results are the final, then the
// correction, as without a bound.
func TestWindowBurstLateUpdatesClosesFirst(t *testing.T) {
	r := newBurstRun(t, Tumbling(time.Second),
		WindowedStore{Name: "w", Late: LateUpdates(), Retain: time.Hour, Emit: EmitFinal()}, 5)
	r.begin()
	r.round(at(burstKeys("k", 20), 100)...)
	r.round(wrec{key: "~", ts: 5000})
	r.commit()
	if !r.tk.closesPending() {
		t.Fatal("no close pending after the jump")
	}
	r.begin()
	r.round(wrec{key: "k19", ts: 500})
	r.commit()
	r.drain(10)
	wins, vals := r.committed()
	var k19 []int64
	for i, w := range wins {
		if w == wkey("k19", 0, 1000) {
			k19 = append(k19, vals[i])
		} else if vals[i] != 1 {
			t.Fatalf("window %s: %d, want 1", w, vals[i])
		}
	}
	if !slices.Equal(k19, []int64{1, 2}) {
		t.Fatalf("results of k19's window %v, want its final 1, then the correction 2", k19)
	}
	if len(wins) != 21 {
		t.Fatalf("%d results, want 21", len(wins))
	}
}

// Sessions under LateUpdates: a late record joining a session whose close
// a burst left pending closes it first (its final result), then merges
// into it as a retained session (the old one retracted, the new one a
// correction).
func TestWindowBurstLateUpdatesSession(t *testing.T) {
	r := newBurstRun(t, Session(300*time.Millisecond),
		WindowedStore{Name: "w", Late: LateUpdates(), Retain: time.Hour, Emit: EmitFinal()}, 5)
	r.begin()
	r.round(at(burstKeys("k", 20), 100)...)
	r.round(wrec{key: "~", ts: 5000})
	r.commit()
	r.begin()
	r.round(wrec{key: "k19", ts: 200})
	r.commit()
	r.drain(10)
	wins, vals := r.committed()
	var k19 []string
	for i, w := range wins {
		if strings.HasPrefix(w, "k19|") {
			k19 = append(k19, fmt.Sprintf("%s=%d", w, vals[i]))
		}
	}
	if want := []string{"k19|100|100=1", "k19|100|100=-1", "k19|100|200=2"}; !slices.Equal(k19, want) {
		t.Fatalf("results of k19 %v, want %v", k19, want)
	}
}
