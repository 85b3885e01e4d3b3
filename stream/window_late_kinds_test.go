package stream

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Late records of sliding and session windows under LateUpdates, and the
// retraction of merged sessions, checked against the batch computations of
// window_helpers_test.go through the upsert view a consumer keyed by the
// window holds (tombstones delete).

// upsert is one output record of a windowed run: a result or a tombstone.
type upsert struct {
	win  string
	val  int64
	tomb bool
}

// upserts decodes the records written to "out" (sentinel keys left out);
// a null value is a tombstone.
func (r *windowRun) upserts() []upsert {
	r.t.Helper()
	kc := WindowedKeys(String(), r.w)
	var out []upsert
	for _, rec := range r.d.Records("out") {
		k, err := kc.Decode(rec.Key)
		if err != nil {
			r.t.Fatal(err)
		}
		if strings.HasPrefix(k.Key, "~") {
			continue
		}
		u := upsert{win: wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli()), tomb: rec.Value == nil}
		if !u.tomb {
			if u.val, err = Int64().Decode(rec.Value); err != nil {
				r.t.Fatal(err)
			}
		}
		out = append(out, u)
	}
	return out
}

// view applies the upserts in order: what a consumer keyed by the window
// (a compacted topic, a table) ends up holding.
func view(us []upsert) map[string]int64 {
	m := map[string]int64{}
	for _, u := range us {
		if u.tomb {
			delete(m, u.win)
		} else {
			m[u.win] = u.val
		}
	}
	return m
}

// lateMix returns in-order records (one every step ms over keys) with late
// ones mixed in: taken ones, later than grace but well within grace +
// retain of the newest record so far (so of the watermark, whichever
// record's round it is taken at), and expired ones, well past it. It
// returns all records in arrival order, and the expired ones.
func lateMix(seed uint64, n int, keys []string, step, grace, retain int64) (all, expired []wrec) {
	rng := rand.New(rand.NewPCG(seed, 3))
	base := int64(1_000_000)
	newest := base
	margin := 4 * step
	for i := range n {
		ts := base + int64(i)*step
		newest = max(newest, ts)
		all = append(all, wrec{key: keys[rng.IntN(len(keys))], ts: ts, val: rng.Int64N(100)})
		if i < 20 {
			continue
		}
		switch x := rng.IntN(10); {
		case x < 3: // taken: late by more than grace, less than grace + retain
			by := grace + margin + rng.Int64N(retain-2*margin)
			all = append(all, wrec{key: keys[rng.IntN(len(keys))], ts: newest - by, val: rng.Int64N(100)})
		case x == 3: // expired
			by := grace + retain + margin + rng.Int64N(retain)
			r := wrec{key: keys[rng.IntN(len(keys))], ts: newest - by, val: 1000 + rng.Int64N(100)}
			all = append(all, r)
			expired = append(expired, r)
		}
	}
	return all, expired
}

// LateUpdates on sliding and session windows: late records within the
// retention update (sessions: extend, merge) their windows and emit
// corrections, so the upsert view equals the batch over every record but
// the expired ones, which are counted.
func TestWindowLateUpdatesSlidingSessionMatchBatch(t *testing.T) {
	const grace, retain, step = 100, 3000, 90
	keys := testKeys[:4]
	for _, w := range []Windows{Session(250 * time.Millisecond), Sliding(150 * time.Millisecond)} {
		for _, emit := range []Emission{EmitFinal(), EmitUpdates()} {
			aggs := []windowAgg{aggSum}
			if _, ok := w.(SessionWindows); ok {
				aggs = append(aggs, aggAggregate) // the user's merge function
			}
			for _, agg := range aggs {
				name := fmt.Sprintf("%s, %s, agg %d", w.describe(), emit.emission(), agg)
				recs, expired := lateMix(41+uint64(agg), 500, keys, step, grace, retain)
				if len(expired) == 0 {
					t.Fatal("no expired record generated")
				}
				reg := prometheus.NewRegistry()
				store := WindowedStore{Name: "lu", Grace: grace * time.Millisecond, Late: LateUpdates(), Emit: emit,
					Retain: retain * time.Millisecond}
				r := newWindowRun(t, w, store, 1, 0, agg, Registerer(reg))
				r.pipe(recs...)
				r.flush(100_000_000)

				var kept []wrec
				for _, x := range recs {
					if !slices.Contains(expired, x) {
						kept = append(kept, x)
					}
				}
				var want map[string]int64
				switch w := w.(type) {
				case SessionWindows:
					want = batchSessions(kept, w.w.Gap.Milliseconds(), false)
				case SlidingWindows:
					want = batchSliding(kept, w.w.TimeDifference.Milliseconds(), false)
				}
				us := r.upserts()
				if d := diffResults(view(us), want); d != "[]" {
					t.Fatalf("%s: upsert view differs from the batch: %s", name, d)
				}
				if got := lateCount(t, reg, "lu", "updates-expired"); got != float64(len(expired)) {
					t.Fatalf("%s: updates-expired metric %v, want %d", name, got, len(expired))
				}
				// Without the late records taken, the batch differs: they
				// did change results.
				var onTime []wrec
				newest := int64(0)
				for _, x := range kept {
					if x.ts >= newest-grace {
						onTime = append(onTime, x)
					}
					newest = max(newest, x.ts)
				}
				var without map[string]int64
				switch w := w.(type) {
				case SessionWindows:
					without = batchSessions(onTime, w.w.Gap.Milliseconds(), false)
				case SlidingWindows:
					without = batchSliding(onTime, w.w.TimeDifference.Milliseconds(), false)
				}
				if diffResults(without, want) == "[]" {
					t.Fatalf("%s: the taken late records change no result: the test proves nothing", name)
				}
			}
		}
	}
}

// A late session record within the retention that bridges a closed
// (retained) session and an open one: the closed session's final result is
// retracted, and the merged session is final once it closes.
func TestWindowLateUpdatesSessionBridgesClosed(t *testing.T) {
	store := WindowedStore{Name: "lb", Grace: 0, Late: LateUpdates(), Emit: EmitFinal(), Retain: 10 * time.Second}
	r := newWindowRun(t, Session(100*time.Millisecond), store, 1, 0, aggSum)
	r.pipe(wrec{key: "a", ts: 1000, val: 1}, // session [1000, 1000], closed at watermark 1101
		wrec{key: "b", ts: 1150}, // watermark 1150: a's session closed, its final emitted
		wrec{key: "a", ts: 1190, val: 2},
		wrec{key: "a", ts: 1095, val: 4}) // late (1095 + 1 <= 1190), bridges [1000] and [1190]
	got := r.upserts()
	want := []upsert{{win: "a|1000|1000", val: 1}, {win: "a|1000|1000", tomb: true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outputs %v, want %v (final of the closed session, then its retraction)", got, want)
	}
	r.flush(100_000)
	if d := diffResults(view(r.upserts()), map[string]int64{"a|1000|1190": 7, "b|1150|1150": 0}); d != "[]" {
		t.Fatal(d)
	}
}

// EmitUpdates on sessions: a record extending a session retracts its old
// key, and one bridging two sessions retracts both before the merged
// session's result (Kafka Streams forwards a null for each merged session).
func TestWindowSessionMergeRetracts(t *testing.T) {
	store := WindowedStore{Name: "rt", Late: DropLate(), Emit: EmitUpdates()}
	r := newWindowRun(t, Session(150*time.Millisecond), store, 1, time.Second, aggSum)
	r.pipe(wrec{key: "a", ts: 1000, val: 1}, wrec{key: "a", ts: 1050, val: 2}, // extends [1000, 1000]
		wrec{key: "a", ts: 1300, val: 4}, // a second session
		wrec{key: "a", ts: 1180, val: 8}) // bridges both
	want := []upsert{
		{win: "a|1000|1000", val: 1},
		{win: "a|1000|1000", tomb: true}, {win: "a|1000|1050", val: 3},
		{win: "a|1300|1300", val: 4},
		{win: "a|1000|1050", tomb: true}, {win: "a|1300|1300", tomb: true}, {win: "a|1000|1300", val: 15},
	}
	if got := r.upserts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outputs\n%v\nwant\n%v", got, want)
	}
	if d := diffResults(view(r.upserts()), map[string]int64{"a|1000|1300": 15}); d != "[]" {
		t.Fatal(d)
	}
	// The tombstones are records with a null value on the output topic.
	var nulls int
	for _, rec := range r.d.Records("out") {
		if rec.Value == nil {
			nulls++
		}
	}
	if nulls != 3 {
		t.Fatalf("%d null values on the output topic, want 3", nulls)
	}
}

// EmitUpdates with out-of-order records forming and merging sessions: the
// upsert view holds exactly the batch's sessions (no stale one).
func TestWindowSessionUpdatesViewMatchesBatch(t *testing.T) {
	recs := genRecords(17, 500, testKeys[:4], 1_000_000, 90, 400)
	store := WindowedStore{Name: "uv", Late: DropLate(), Emit: EmitUpdates()}
	for _, agg := range []windowAgg{aggCount, aggAggregate} {
		r := newWindowRun(t, Session(250*time.Millisecond), store, 1, 400*time.Millisecond, agg)
		r.pipe(recs...)
		want := batchSessions(recs, 250, agg == aggCount)
		if d := diffResults(view(r.upserts()), want); d != "[]" {
			t.Fatalf("agg %d: %s", agg, d)
		}
	}
}

// LateUpdates across a restart that loses the local stores: the retained
// windows (and their 'r' index) come back from the changelog, so late
// records after the restart still update, extend and merge them, and the
// upsert view equals the batch.
func TestWindowLateUpdatesSurvivesRestore(t *testing.T) {
	const grace, retain, step = 100, 3000, 90
	for _, w := range []Windows{Session(250 * time.Millisecond), Sliding(150 * time.Millisecond)} {
		recs, expired := lateMix(43, 400, testKeys[:4], step, grace, retain)
		store := WindowedStore{Name: "lr", Grace: grace * time.Millisecond, Late: LateUpdates(), Emit: EmitFinal(),
			Retain: retain * time.Millisecond}
		r := newWindowRun(t, w, store, 1, 0, aggSum)
		half := len(recs) / 2
		r.pipe(recs[:half]...)
		if err := r.d.Restart(); err != nil {
			t.Fatal(err)
		}
		r.pipe(recs[half:]...)
		r.flush(100_000_000)
		var kept []wrec
		for _, x := range recs {
			if !slices.Contains(expired, x) {
				kept = append(kept, x)
			}
		}
		var want map[string]int64
		switch w := w.(type) {
		case SessionWindows:
			want = batchSessions(kept, w.w.Gap.Milliseconds(), false)
		case SlidingWindows:
			want = batchSliding(kept, w.w.TimeDifference.Milliseconds(), false)
		}
		if d := diffResults(view(r.upserts()), want); d != "[]" {
			t.Fatalf("%s: %s", w.describe(), d)
		}
	}
}

// EmitFinal with early firing: a session emitted early and then extended
// is retracted; its final result comes under the new key when it closes.
func TestWindowSessionEarlyFiringRetracts(t *testing.T) {
	store := WindowedStore{Name: "er", Late: DropLate(), Emit: EmitFinal(EarlyEvery(1))}
	r := newWindowRun(t, Session(100*time.Millisecond), store, 1, 0, aggSum)
	r.pipe(wrec{key: "a", ts: 1000, val: 1}, wrec{key: "a", ts: 1080, val: 2})
	want := []upsert{{win: "a|1000|1000", val: 1}, {win: "a|1000|1000", tomb: true}, {win: "a|1000|1080", val: 3}}
	if got := r.upserts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	r.flush(100_000)
	if d := diffResults(view(r.upserts()), map[string]int64{"a|1000|1080": 3}); d != "[]" {
		t.Fatal(d)
	}
}
