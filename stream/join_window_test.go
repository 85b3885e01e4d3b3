package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Stream-stream joins (join_window.go) against an independent batch
// computation: nested loops over all records with the time bound.

// jrec is an input record of a join test: side (0 left, 1 right), key,
// event time (ms), and a value naming it uniquely.
type jrec struct {
	side int
	key  string
	ts   int64
	val  string
}

// joinValue renders a result: "<left>+<right>", "-" for a missing side.
func joinValue(lv string, lok bool, rv string, rok bool) string {
	if !lok {
		lv = "-"
	}
	if !rok {
		rv = "-"
	}
	return lv + "+" + rv
}

// jout is a result as compared: key, value, timestamp.
func jout(key, value string, ts int64) string { return fmt.Sprintf("%s|%s|%d", key, value, ts) }

// batchJoin computes a join of recs from scratch: every (left, right) pair
// of a key with right time in [left - before, left + after] (timestamp the
// later of the two), and for a left or outer join every record of an outer
// side that pairs with nothing (its own timestamp). Sorted.
func batchJoin(recs []jrec, kind joinKind, before, after int64) []string {
	var out []string
	matched := make([]bool, len(recs))
	for i, l := range recs {
		if l.side != 0 {
			continue
		}
		for k, r := range recs {
			if r.side != 1 || r.key != l.key || r.ts < l.ts-before || r.ts > l.ts+after {
				continue
			}
			matched[i], matched[k] = true, true
			out = append(out, jout(l.key, joinValue(l.val, true, r.val, true), max(l.ts, r.ts)))
		}
	}
	for i, rec := range recs {
		if matched[i] {
			continue
		}
		switch {
		case rec.side == 0 && kind != joinInner:
			out = append(out, jout(rec.key, joinValue(rec.val, true, "", false), rec.ts))
		case rec.side == 1 && kind == joinOuter:
			out = append(out, jout(rec.key, joinValue("", false, rec.val, true), rec.ts))
		}
	}
	slices.Sort(out)
	return out
}

// ssJoinTopology declares the join of kind between "lin" and "rin" (string
// keys and values) into "out". rekey re-keys the left input first: its
// records carry the join key in their value ("<key>/<name>").
func ssJoinTopology(b *Builder, kind joinKind, w JoinWindows, store JoinStore, rekey bool) {
	l := From(b, "lin", String(), String())
	if rekey {
		l = KeyBy(l, func(r Record[string, string]) (string, error) {
			k, _, ok := strings.Cut(r.Value, "/")
			if !ok {
				return "", fmt.Errorf("no key in %q", r.Value)
			}
			return k, nil
		})
	}
	r := From(b, "rin", String(), String())
	var out Stream[string, string]
	switch kind {
	case joinInner:
		out = JoinStreams(l, r, w, store, func(_ string, lv, rv string) (string, error) {
			return joinValue(lv, true, rv, true), nil
		})
	case joinLeft:
		out = LeftJoinStreams(l, r, w, store, func(_ string, lv, rv string, rok bool) (string, error) {
			return joinValue(lv, true, rv, rok), nil
		})
	case joinOuter:
		out = OuterJoinStreams(l, r, w, store, func(_ string, lv string, lok bool, rv string, rok bool) (string, error) {
			return joinValue(lv, lok, rv, rok), nil
		})
	}
	out.To("out", String(), String())
}

// joinRun is a join topology on a Driver.
type joinRun struct {
	t     *testing.T
	d     *Driver
	rekey bool
}

func newJoinRun(t *testing.T, kind joinKind, w JoinWindows, store JoinStore, parts map[string]int32, bound time.Duration,
	rekey bool, opts ...Opt,
) *joinRun {
	t.Helper()
	b := NewBuilder()
	ssJoinTopology(b, kind, w, store, rekey)
	d, err := NewDriver("ssj", b, parts, slices.Concat([]Opt{StateDir(t.TempDir()), Watermarks(bound, 0)}, opts)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &joinRun{t: t, d: d, rekey: rekey}
}

// pipe writes the records one per round (the left input keyed by a record
// name when rekey: the join key travels in the value).
func (r *joinRun) pipe(recs ...jrec) {
	r.t.Helper()
	for _, rec := range recs {
		topic, key, val := "rin", rec.key, rec.val
		if rec.side == 0 {
			topic = "lin"
			if r.rekey {
				key, val = rec.val, rec.key+"/"+rec.val
			}
		}
		if _, err := r.d.Pipe(topic, []byte(key), []byte(val), time.UnixMilli(rec.ts)); err != nil {
			r.t.Fatal(err)
		}
		if err := r.d.Process(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// results returns the records written to "out", sorted.
// handleByHand has task tk handle rec (piped to its input) directly, with
// no round around it: the caller ends the batch, flushes, commits or
// crashes as its test needs.
func (r *joinRun) handleByHand(ctx context.Context, tk *task, rec jrec) {
	r.t.Helper()
	topic := []string{"lin", "rin"}[rec.side]
	if _, err := r.d.Pipe(topic, []byte(rec.key), []byte(rec.val), time.UnixMilli(rec.ts)); err != nil {
		r.t.Fatal(err)
	}
	tp := topicPartition{topic, 0}
	kr := r.d.queues[tp][0]
	delete(r.d.queues, tp)
	if err := tk.handle(ctx, kr); err != nil {
		r.t.Fatal(err)
	}
}

func (r *joinRun) results() []string {
	var out []string
	for _, rec := range r.d.Records("out") {
		v := string(rec.Value)
		if r.rekey {
			// The left value is "<key>/<name>": compare by name.
			v = stripKeys(v)
		}
		out = append(out, jout(string(rec.Key), v, rec.Timestamp.UnixMilli()))
	}
	slices.Sort(out)
	return out
}

// stripKeys turns "<key>/<name>+<right>" into "<name>+<right>".
func stripKeys(v string) string {
	lv, rv, _ := strings.Cut(v, "+")
	if _, name, ok := strings.Cut(lv, "/"); ok {
		lv = name
	}
	return lv + "+" + rv
}

// genJoinRecords draws n records per side over keys, times in [0, span)
// ms, and returns them in an arrival order out of order by at most
// disorder ms (each record's arrival rank is its time plus a random delay
// in [0, disorder]).
func genJoinRecords(rng *rand.Rand, n int, keys []string, span, disorder int64) []jrec {
	type arrival struct {
		at  int64
		rec jrec
	}
	var as []arrival
	for side := range 2 {
		for i := range n {
			ts := rng.Int64N(span)
			rec := jrec{side: side, key: keys[rng.IntN(len(keys))], ts: ts, val: fmt.Sprintf("%c%d", "lr"[side], i)}
			as = append(as, arrival{at: ts + rng.Int64N(disorder+1), rec: rec})
		}
	}
	slices.SortStableFunc(as, func(x, y arrival) int { return int(x.at - y.at) })
	out := make([]jrec, len(as))
	for i, a := range as {
		out[i] = a.rec
	}
	return out
}

// diffJoin describes how got differs from want ("" if equal as multisets).
func diffJoin(got, want []string) string {
	if slices.Equal(got, want) {
		return ""
	}
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	for _, w := range want {
		count[w]--
	}
	var extra, missing []string
	for k, n := range count {
		for ; n > 0; n-- {
			extra = append(extra, k)
		}
		for ; n < 0; n++ {
			missing = append(missing, k)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	if len(extra) > 8 {
		extra = append(extra[:8], "...")
	}
	if len(missing) > 8 {
		missing = append(missing[:8], "...")
	}
	return fmt.Sprintf("%d results, want %d; extra %v; missing %v", len(got), len(want), extra, missing)
}

var joinKinds = []joinKind{joinInner, joinLeft, joinOuter}

// Each join kind, with random bounds (negative Before or After included)
// and records out of order within the watermark's bound, equals the batch
// join; the Driver restarts from the changelog halfway (local state lost),
// so the buffers, matched flags and close index are restored mid-stream.
func TestJoinStreamsMatchBatch(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f"}
	// Key lists naming up to 32 buckets (each lookup reads the buckets
	// named), and up to 1 (most lookups scan).
	defer func(n int) { joinSparseTimes = n }(joinSparseTimes)
	for _, sparse := range []int{32, 1} {
		joinSparseTimes = sparse
		for seed := range uint64(6) {
			for _, kind := range joinKinds {
				rng := rand.New(rand.NewPCG(seed, 15))
				before, after := 100+rng.Int64N(300), 100+rng.Int64N(300)
				switch seed % 3 {
				case 1:
					after = -rng.Int64N(before - 50) // an interval wholly before the left record
				case 2:
					before = -rng.Int64N(after - 50) // wholly after it
				}
				grace := []int64{0, 30}[seed%2]
				const disorder = 150
				recs := genJoinRecords(rng, 150, keys, 20_000, disorder)
				w := JoinWindows{Before: msDuration(before), After: msDuration(after), Grace: msDuration(grace)}
				name := fmt.Sprintf("sparse %d seed %d %s before %d after %d grace %d", sparse, seed, kind, before, after, grace)
				t.Run(name, func(t *testing.T) {
					r := newJoinRun(t, kind, w, JoinStore{Name: "j", Late: DropLate()}, nil, disorder*time.Millisecond, false)
					half := len(recs) / 2
					r.pipe(recs[:half]...)
					if err := r.d.Restart(); err != nil {
						t.Fatal(err)
					}
					r.pipe(recs[half:]...)
					if err := r.d.EndOfInput(); err != nil {
						t.Fatal(err)
					}
					want := batchJoin(recs, kind, before, after)
					if len(want) == 0 {
						t.Fatal("the batch join is empty: the test proves nothing")
					}
					if d := diffJoin(r.results(), want); d != "" {
						t.Fatal(d)
					}
					// Every window closed: buckets, index entries and key
					// lists are all deleted (the changelog folds to nothing).
					if left := tableOf(r.d.Records("ssj-j-changelog")); len(left) != 0 {
						t.Fatalf("%d store keys left after every window closed, e.g. %q", len(left), slices.Sorted(maps.Keys(left))[0])
					}
				})
			}
		}
	}
}

// An unmatched left record is emitted only when its window closes, and not
// at all when a match arrives out of order before that: the watermark
// moving past the record's time, but not past time + After + Grace, emits
// nothing for it.
func TestJoinStreamsUnmatchedOnlyAtClose(t *testing.T) {
	w := JoinWindows{Before: 100 * time.Millisecond, After: 100 * time.Millisecond, Grace: 50 * time.Millisecond}
	r := newJoinRun(t, joinOuter, w, JoinStore{Name: "j", Late: DropLate()}, nil, 0, false)
	r.pipe(jrec{0, "k", 1000, "l1"}, jrec{1, "x", 1000, "rx"})  // both inputs have a watermark: 1000
	r.pipe(jrec{0, "x", 1140, "lx"}, jrec{1, "x", 1140, "rx2"}) // watermark 1140 < 1000 + 100 + 50
	for _, o := range r.results() {
		if strings.HasPrefix(o, "k|") {
			t.Fatalf("left record emitted before its window closed: %s", o)
		}
	}
	// Out of order, within the grace: joins l1, which is then never
	// emitted unmatched.
	r.pipe(jrec{1, "k", 1100, "r1"})
	// The watermark passes 1000 + 100 + 50: l1's window closes.
	r.pipe(jrec{0, "x", 1300, "lx2"}, jrec{1, "x", 1300, "rx3"})
	var got []string
	for _, o := range r.results() {
		if strings.HasPrefix(o, "k|") {
			got = append(got, o)
		}
	}
	if want := []string{"k|l1+r1|1100"}; !slices.Equal(got, want) {
		t.Fatalf("key k: %v, want %v (joined, never unmatched)", got, want)
	}

	// A left record with no match: emitted once its window closes, not
	// before.
	r.pipe(jrec{0, "m", 1400, "l2"}, jrec{1, "x", 1400, "rx4"})
	r.pipe(jrec{0, "x", 1550, "lx3"}, jrec{1, "x", 1550, "rx5"}) // 1550 = 1400 + 100 + 50: still open
	if slices.ContainsFunc(r.results(), func(o string) bool { return strings.HasPrefix(o, "m|") }) {
		t.Fatal("l2 emitted at watermark 1550: its window closes only past 1550")
	}
	r.pipe(jrec{0, "x", 1551, "lx4"}, jrec{1, "x", 1551, "rx6"})
	if !slices.Contains(r.results(), "m|l2+-|1400") {
		t.Fatalf("l2 not emitted unmatched once its window closed: %v", r.results())
	}
}

// Records later than the grace go to the late policy: counted and dropped,
// or written as they came to the late topic with the late headers and
// their side; they join nothing and are never emitted unmatched.
func TestJoinStreamsLateRecords(t *testing.T) {
	w := JoinWindows{Before: 100 * time.Millisecond, After: 100 * time.Millisecond, Grace: 20 * time.Millisecond}
	r := newJoinRun(t, joinOuter, w, JoinStore{Name: "j", Late: LateToTopic("late")}, nil, 0, false)
	r.pipe(jrec{0, "k", 1000, "l1"}, jrec{1, "k", 1000, "r1"})
	r.pipe(jrec{0, "x", 2000, "lx"}, jrec{1, "x", 2000, "rx"}) // watermark 2000
	// 1990 + 20 >= 2000: on time (joins lx); 1979 + 20 < 2000: late.
	r.pipe(jrec{1, "x", 1990, "r2"}, jrec{1, "k", 1979, "r3"}, jrec{0, "k", 1000, "l3"})
	if err := r.d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	want := []string{"k|l1+r1|1000", "x|lx+r2|2000", "x|lx+rx|2000"}
	if got := r.results(); !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	late := r.d.Records("late")
	if len(late) != 2 {
		t.Fatalf("%d late records, want 2 (r3, l3)", len(late))
	}
	wantSides := []string{"right", "left"}
	wantVals := []string{"r3", "l3"}
	for i, rec := range late {
		hs := map[string]string{}
		for _, h := range rec.Headers {
			hs[h.Key] = string(h.Value)
		}
		if string(rec.Value) != wantVals[i] || hs[HeaderLateJoinSide] != wantSides[i] || hs[HeaderLateStore] != "j" ||
			hs[HeaderLateWatermark] != "2000" {
			t.Errorf("late record %d: %s %v, want value %s side %s", i, rec.Value, hs, wantVals[i], wantSides[i])
		}
	}
	// r3 at 1979: late by 2000 - (1979 + 20 + 1) = 0; its window (right:
	// [t - After, t + Before]) is [1879, 2080).
	hs := map[string]string{}
	for _, h := range late[0].Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs[HeaderLateBy] != "0" || hs[HeaderLateWindowStart] != "1879" || hs[HeaderLateWindowEnd] != "2080" {
		t.Errorf("r3's late headers %v", hs)
	}
}

// A left input whose key changed (KeyBy) is repartitioned to the right
// input's partitioning; the join over 3 partitions, with a restart, equals
// the batch join.
func TestJoinStreamsRepartition(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, kind := range joinKinds {
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(kind)))
			const disorder = 100
			recs := genJoinRecords(rng, 200, keys, 30_000, disorder)
			w := JoinWindows{Before: 300 * time.Millisecond, After: 200 * time.Millisecond}
			r := newJoinRun(t, kind, w, JoinStore{Name: "rj", Late: DropLate()},
				map[string]int32{"lin": 3, "rin": 3}, disorder*time.Millisecond, true)
			half := len(recs) / 2
			r.pipe(recs[:half]...)
			if err := r.d.Restart(); err != nil {
				t.Fatal(err)
			}
			r.pipe(recs[half:]...)
			if err := r.d.EndOfInput(); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(r.d.Topics(), "ssj-rj-left-repartition") {
				t.Fatalf("no repartition topic written: %v", r.d.Topics())
			}
			parts := map[int32]bool{}
			for _, rec := range r.d.Records("ssj-rj-changelog") {
				parts[rec.Origin.Partition] = true
			}
			if len(parts) != 3 {
				t.Fatalf("join state in partitions %v: want the 3 tasks to buffer records", parts)
			}
			want := batchJoin(recs, kind, 300, 200)
			if d := diffJoin(r.results(), want); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// Inputs of different partition counts are refused (ErrPartitionMismatch),
// as for a stream-table join; a bad declaration is a clear error.
func TestJoinStreamsDeclaration(t *testing.T) {
	b := NewBuilder()
	ssJoinTopology(b, joinInner, JoinWindows{After: time.Second}, JoinStore{Name: "j", Late: DropLate()}, false)
	_, err := NewDriver("ssj", b, map[string]int32{"lin": 3, "rin": 2}, StateDir(t.TempDir()))
	if !errors.Is(err, ErrPartitionMismatch) {
		t.Fatalf("3 and 2 partitions: %v, want ErrPartitionMismatch", err)
	}
	for _, tc := range []struct {
		w     JoinWindows
		store JoinStore
		want  string
	}{
		{JoinWindows{Before: time.Second, After: -2 * time.Second}, JoinStore{Name: "j", Late: DropLate()}, "bound is empty"},
		{JoinWindows{Grace: -time.Second}, JoinStore{Name: "j", Late: DropLate()}, "grace"},
		{JoinWindows{After: time.Microsecond}, JoinStore{Name: "j", Late: DropLate()}, "milliseconds"},
		{JoinWindows{}, JoinStore{Name: "j"}, "no late policy"},
		{JoinWindows{}, JoinStore{Name: "j", Late: LateUpdates()}, "LateUpdates"},
		{JoinWindows{}, JoinStore{Name: "bad name", Late: DropLate()}, "invalid name"},
	} {
		b := NewBuilder()
		ssJoinTopology(b, joinLeft, tc.w, tc.store, false)
		_, err := NewApp("ssj", b, Brokers("x:1"), StateDir(t.TempDir()))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %+v: %v, want an error naming %q", tc.w, tc.store, err, tc.want)
		}
	}
	// An invalid input (a failed declaration upstream) makes an invalid
	// result, which later operators accept without panicking; the
	// upstream error reaches NewApp.
	b = NewBuilder()
	b.errorf("upstream declaration failed")
	bad := invalid[string, string](b) // what the failed operator returned
	out := JoinStreams(bad, From(b, "rin", String(), String()), JoinWindows{}, JoinStore{Name: "j", Late: DropLate()},
		func(string, string, string) (string, error) { return "", nil })
	if out.valid() {
		t.Fatal("the join of an invalid stream is valid")
	}
	out.To("out", String(), String())
	if _, err := NewApp("ssj", b, Brokers("x:1"), StateDir(t.TempDir())); err == nil ||
		!strings.Contains(err.Error(), "upstream declaration failed") {
		t.Errorf("invalid input: %v, want the source's error", err)
	}
	// A value type with no inferred codec needs JoinCodecs.
	b = NewBuilder()
	type opaque int32
	l := From(b, "lin", String(), String())
	r := MapValues(From(b, "rin", String(), String()), func(Record[string, string]) (opaque, error) { return 0, nil })
	JoinStreams(l, r, JoinWindows{}, JoinStore{Name: "j", Late: DropLate()},
		func(string, string, opaque) (string, error) { return "", nil }).To("out", String(), String())
	if _, err := NewApp("ssj", b, Brokers("x:1"), StateDir(t.TempDir())); err == nil || !strings.Contains(err.Error(), "JoinCodecs") {
		t.Errorf("uncodable right value: %v, want an error naming JoinCodecs", err)
	}
}

// A joiner that fails sends the record to the dead-letter topic and leaves
// no trace: the record is not buffered, so it joins nothing later.
func TestJoinStreamsJoinerError(t *testing.T) {
	b := NewBuilder()
	l := From(b, "lin", String(), String())
	r := From(b, "rin", String(), String())
	JoinStreams(l, r, JoinWindows{Before: time.Second, After: time.Second}, JoinStore{Name: "j", Late: DropLate()},
		func(_ string, lv, rv string) (string, error) {
			if rv == "bad" {
				return "", Permanent(errors.New("bad right value"))
			}
			return lv + "+" + rv, nil
		}).To("out", String(), String())
	d, err := NewDriver("ssj", b, nil, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, rec := range []jrec{{0, "k", 1000, "l1"}, {1, "k", 1000, "bad"}, {0, "k", 1001, "l2"}, {1, "k", 1002, "r2"}} {
		topic := []string{"lin", "rin"}[rec.side]
		if _, err := d.Pipe(topic, []byte(rec.key), []byte(rec.val), time.UnixMilli(rec.ts)); err != nil {
			t.Fatal(err)
		}
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, rec := range d.Records("out") {
		got = append(got, string(rec.Value))
	}
	slices.Sort(got)
	if want := []string{"l1+r2", "l2+r2"}; !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v (the failed right record is not buffered)", got, want)
	}
	if n := len(d.Records(DLQTopic("ssj"))); n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
}

// Describe states the join's bound, buffering and late policy.
func TestJoinStreamsDescribe(t *testing.T) {
	b := NewBuilder()
	ssJoinTopology(b, joinOuter, JoinWindows{Before: time.Second, After: 2 * time.Second, Grace: 3 * time.Second},
		JoinStore{Name: "j", Late: DropLate()}, false)
	a, err := NewApp("ssj", b, Brokers("x:1"), StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	desc := a.Describe()
	for _, want := range []string{"stream-stream outer join", "[t - 1s, t + 2s]", "left: t + 5s, right: t + 4s",
		"late records: drop", "ssj-j-changelog", "inputs co-partitioned"} {
		if !strings.Contains(desc, want) {
			t.Errorf("Describe lacks %q:\n%s", want, desc)
		}
	}
}

// An ExactlyOnce transaction that aborts after it closed buckets (emitting
// unmatched results, deleting buckets and index entries) is undone whole:
// the records are redone from the watermark and store the task had when it
// joined the transaction, and the committed results equal the batch join.
// The Driver never aborts; the abort is made by hand on its task: records
// handled in one open transaction (no flush between rounds, as under
// ExactlyOnce), then abortRound, the transaction's records dropped from the
// logs (a read_committed reader never sees them), and the records piped
// again.
func TestJoinStreamsAbortedTransaction(t *testing.T) {
	for _, kind := range joinKinds {
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(kind)))
			const disorder = 50
			recs := genJoinRecords(rng, 150, []string{"a", "b", "c"}, 10_000, disorder)
			w := JoinWindows{Before: 200 * time.Millisecond, After: 100 * time.Millisecond, Grace: 20 * time.Millisecond}
			r := newJoinRun(t, kind, w, JoinStore{Name: "j", Late: DropLate()}, nil, disorder*time.Millisecond, false,
				Delivery(ExactlyOnce))
			d := r.d
			first, aborted := recs[:100], recs[100:200]
			r.pipe(first...)
			tk := d.tasks[taskID{0, 0}]
			outLen, clLen := len(d.log["out"]), len(d.log["ssj-j-changelog"])
			tk.beginRound()
			ctx := context.Background()
			for _, rec := range aborted {
				r.handleByHand(ctx, tk, rec)
				if err := tk.endBatch(); err != nil {
					t.Fatal(err)
				}
			}
			if len(d.log["out"]) == outLen || !slices.ContainsFunc(d.log["ssj-j-changelog"][clLen:],
				func(kr *kgo.Record) bool { return kr.Value == nil }) {
				t.Fatal("the transaction to abort emitted no result or closed no bucket: the test proves nothing")
			}
			tk.abortRound()
			d.log["out"], d.log["ssj-j-changelog"] = d.log["out"][:outLen], d.log["ssj-j-changelog"][:clLen]
			r.pipe(recs[100:]...)
			if err := d.EndOfInput(); err != nil {
				t.Fatal(err)
			}
			if diff := diffJoin(r.results(), batchJoin(recs, kind, 200, 100)); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

// An at-least-once crash after a bucket closed and before the commit that
// follows: the local store survives (a kill -9 keeps the disk), the input
// is replayed from the last committed offsets, and the outputs since that
// commit were never acknowledged. A replayed record whose partner's window
// closed before the crash still finds the partner: the pair is emitted
// again, and neither record is emitted unmatched: every result is the batch
// join's, and each of those appears. The crash is made by hand on the Driver's task (the Driver
// commits after every round): records handled without that commit, then
// the task closed and opened again on its state directory (not restored
// from the changelog), its uncommitted outputs dropped from the log, and
// the uncommitted records piped again.
func TestJoinStreamsAtLeastOnceCrashReplay(t *testing.T) {
	for _, kind := range joinKinds {
		t.Run(kind.String(), func(t *testing.T) {
			w := JoinWindows{Before: 100 * time.Millisecond, After: 100 * time.Millisecond}
			r := newJoinRun(t, kind, w, JoinStore{Name: "j", Late: DropLate()}, nil, 0, false)
			d := r.d
			// Both inputs have a watermark (1000); the left record lp is
			// handled and committed.
			committed := []jrec{{0, "x", 1000, "lx"}, {1, "x", 1000, "rx"}, {0, "k", 1100, "lp"}}
			r.pipe(committed...)
			id := taskID{0, 0}
			tk := d.tasks[id]
			outLen := len(d.log["out"])
			// Handled, not committed: rr joins lp, then the watermark
			// (1300) closes lp's window (1100 + After) and rr's.
			uncommitted := []jrec{{1, "k", 1150, "rr"}, {0, "z", 1300, "lz"}, {1, "z", 1300, "rz"}}
			ctx := context.Background()
			for _, rec := range uncommitted {
				r.handleByHand(ctx, tk, rec)
				if err := tk.endBatch(); err != nil {
					t.Fatal(err)
				}
				if err := tk.flushState(); err != nil {
					t.Fatal(err)
				}
			}
			pair := jout("k", joinValue("lp", true, "rr", true), 1150)
			var before []string
			for _, kr := range d.log["out"][outLen:] {
				before = append(before, jout(string(kr.Key), string(kr.Value), kr.Timestamp.UnixMilli()))
			}
			if !slices.Contains(before, pair) || tk.et.tracker.Watermark() <= 1100+100 {
				t.Fatalf("before the crash: results %v, watermark %d; want %s and lp's window closed: the test proves nothing",
					before, tk.et.tracker.Watermark(), pair)
			}
			// The crash: outputs since the commit lost, the store kept.
			d.log["out"] = d.log["out"][:outLen]
			d.a.taskUnqueryable(tk)
			if err := tk.close(); err != nil {
				t.Fatal(err)
			}
			tk2, err := d.a.newTask(id)
			if err != nil {
				t.Fatal(err)
			}
			d.tasks[id] = tk2
			d.a.taskQueryable(tk2)
			r.pipe(uncommitted...)
			if err := d.EndOfInput(); err != nil {
				t.Fatal(err)
			}
			all := slices.Concat(committed, uncommitted)
			got, want := r.results(), batchJoin(all, kind, 100, 100)
			if !slices.Contains(got, pair) {
				t.Fatalf("the pair %s is lost: results %v", pair, got)
			}
			// Replayed records are buffered again, so results repeat
			// (lz and rz join each other's first copy too): each result is
			// the batch join's, and each of those appears.
			if diff := diffJoin(slices.Compact(slices.Clone(got)), want); diff != "" {
				t.Fatalf("distinct results: %s", diff)
			}
			if left := tableOf(r.d.Records("ssj-j-changelog")); len(left) != 0 {
				t.Fatalf("%d store keys left after every window closed, e.g. %q", len(left), slices.Sorted(maps.Keys(left))[0])
			}
		})
	}
}

// Under AtLeastOnce a closed bucket stays in the store until a commit
// covers its close, and goes in the round after that commit; until then it
// is closed once only (its unmatched record emitted once). Driven by hand on
// the Driver's task, whose own rounds commit at once.
func TestJoinStreamsAtLeastOnceDeletesAfterCommit(t *testing.T) {
	w := JoinWindows{Before: 100 * time.Millisecond, After: 100 * time.Millisecond}
	r := newJoinRun(t, joinOuter, w, JoinStore{Name: "j", Late: DropLate()}, nil, 0, false)
	d := r.d
	r.pipe(jrec{0, "x", 1000, "lx"}, jrec{1, "x", 1000, "rx"})
	tk := d.tasks[taskID{0, 0}]
	ctx := context.Background()
	round := func(recs ...jrec) {
		t.Helper()
		for _, rec := range recs {
			r.handleByHand(ctx, tk, rec)
		}
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
		if err := tk.flushState(); err != nil {
			t.Fatal(err)
		}
	}
	bk := string(bufKey(joinSideLeft, []byte("k"), 1100))
	stored := func() bool {
		_, ok := tableOf(d.Records("ssj-j-changelog"))[bk]
		return ok
	}
	unmatched := jout("k", joinValue("lp", true, "", false), 1100)
	count := func() int {
		n := 0
		for _, o := range r.results() {
			if o == unmatched {
				n++
			}
		}
		return n
	}
	round(jrec{0, "k", 1100, "lp"})
	round(jrec{0, "z", 1300, "lz"}, jrec{1, "z", 1300, "rz"}) // closes lp (1100 + After)
	if count() != 1 || !stored() {
		t.Fatalf("after the close: %d unmatched lp, bucket stored %v; want 1, true (kept until a commit)", count(), stored())
	}
	round(jrec{0, "z", 1400, "lz2"}, jrec{1, "z", 1400, "rz2"})
	if count() != 1 || !stored() {
		t.Fatalf("a round later, no commit: %d unmatched lp, bucket stored %v; want 1, true", count(), stored())
	}
	tk.notifyCommitted()
	if !stored() {
		t.Fatal("deleted by the commit itself: want it in the round after")
	}
	round()
	if count() != 1 || stored() {
		t.Fatalf("the round after the commit: %d unmatched lp, bucket stored %v; want 1, false", count(), stored())
	}
}

// A bucket closed before the commit a task stops at (a clean hand-over or
// shutdown: no round follows to delete it) is deleted by the task's next
// instance without emitting its unmatched record again: that instance
// starts from the committed watermark, past the bucket's close, so the
// first emission was acknowledged. Driven by hand on the Driver's task; the
// commit is notifyCommitted plus the watermark's local copy (as the App's
// checkpoint writes it), and the next instance opens the same store.
func TestJoinStreamsAtLeastOnceCleanRestartNoRepeat(t *testing.T) {
	w := JoinWindows{Before: 100 * time.Millisecond, After: 100 * time.Millisecond}
	r := newJoinRun(t, joinOuter, w, JoinStore{Name: "j", Late: DropLate()}, nil, 0, false)
	d := r.d
	committed := []jrec{{0, "x", 1000, "lx"}, {1, "x", 1000, "rx"}}
	r.pipe(committed...)
	id := taskID{0, 0}
	tk := d.tasks[id]
	ctx := context.Background()
	byHand := []jrec{{0, "k", 1100, "lp"}, {0, "z", 1300, "lz"}, {1, "z", 1300, "rz"}} // lp closes unmatched
	for _, rec := range byHand {
		r.handleByHand(ctx, tk, rec)
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
		if err := tk.flushState(); err != nil {
			t.Fatal(err)
		}
	}
	unmatched := jout("k", joinValue("lp", true, "", false), 1100)
	count := func() int {
		n := 0
		for _, o := range r.results() {
			if o == unmatched {
				n++
			}
		}
		return n
	}
	if count() != 1 {
		t.Fatalf("before the hand-over: %d unmatched lp, want 1", count())
	}
	// The commit, then the task closes.
	tk.notifyCommitted()
	if _, err := tk.stageWatermark(); err != nil {
		t.Fatal(err)
	}
	d.a.taskUnqueryable(tk)
	if err := tk.close(); err != nil {
		t.Fatal(err)
	}
	tk2, err := d.a.newTask(id)
	if err != nil {
		t.Fatal(err)
	}
	d.tasks[id] = tk2
	d.a.taskQueryable(tk2)
	if tk2.et.startWM != 1300 {
		t.Fatalf("the next instance starts from watermark %d, want 1300: the test proves nothing", tk2.et.startWM)
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	if count() != 1 {
		t.Fatalf("after the hand-over: %d unmatched lp, want 1", count())
	}
	if diff := diffJoin(r.results(), batchJoin(slices.Concat(committed, byHand), joinOuter, 100, 100)); diff != "" {
		t.Fatal(diff)
	}
	if left := tableOf(r.d.Records("ssj-j-changelog")); len(left) != 0 {
		t.Fatalf("%d store keys left after every window closed, e.g. %q", len(left), slices.Sorted(maps.Keys(left))[0])
	}
}

// The store values of a stream-stream join decode without panicking
// whatever the bytes (a corrupted local store), and what decodes encodes
// back to the same bytes (one value, one encoding).
func FuzzJoinBucket(f *testing.F) {
	f.Add(encodeBucket([]bucketEntry{{flags: ssjMatched, value: []byte("l1")}, {value: nil}}))
	f.Add([]byte{0, 5, 'a'})
	f.Add([]byte{2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeBucket(b)
		if err != nil {
			return
		}
		if got := encodeBucket(es); !slices.Equal(got, b) && len(b) > 0 {
			t.Fatalf("%x decodes to %v, which encodes to %x", b, es, got)
		}
	})
}

func FuzzJoinKeyList(f *testing.F) {
	f.Add(keyList{times: []int64{-5, 3, 1 << 40}}.encode())
	f.Add(keyList{dense: true, count: 300}.encode())
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 9, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeKeyList(b)
		if err != nil {
			return
		}
		if got := l.encode(); !slices.Equal(got, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, l, got)
		}
	})
}
