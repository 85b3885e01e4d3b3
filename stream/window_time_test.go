package stream

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// genRecords makes n records over keys, in time order with jitter of up to
// bound back (so they stay within the out-of-orderness bound), from base,
// one every step ms on average.
func genRecords(seed uint64, n int, keys []string, base, step, bound int64) []wrec {
	rng := rand.New(rand.NewPCG(seed, 1))
	recs := make([]wrec, n)
	var maxTS int64 = base
	for i := range recs {
		ts := base + int64(i)*step
		if bound > 0 {
			ts -= rng.Int64N(bound + 1)
		}
		// Never below the watermark so far: not late.
		ts = max(ts, maxTS-bound)
		maxTS = max(maxTS, ts)
		recs[i] = wrec{key: keys[rng.IntN(len(keys))], ts: ts, val: rng.Int64N(100)}
	}
	return recs
}

var testKeys = []string{"a", "b", "c", "d", "e", "f", "g"}

func finalStore(name string) WindowedStore {
	return WindowedStore{Name: name, Late: DropLate(), Emit: EmitFinal()}
}

func TestWindowTumblingFinalMatchesBatch(t *testing.T) {
	recs := genRecords(1, 400, testKeys, 1_000_000, 37, 0)
	r := newWindowRun(t, Tumbling(time.Second), finalStore("tumble"), 1, 0, aggCount)
	r.pipe(recs...)
	if n := len(r.outputs()); n == 0 {
		t.Fatal("no window closed before the flush")
	}
	r.flush(10_000_000)
	if d := diffResults(r.finals(), batchTime(recs, 1000, 1000, 0, true)); d != "[]" {
		t.Fatal(d)
	}
}

func TestWindowHoppingSumMatchesBatch(t *testing.T) {
	recs := genRecords(2, 400, testKeys, 1_000_000, 29, 300)
	r := newWindowRun(t, Hopping(1000*time.Millisecond, 200*time.Millisecond, WindowOffset(50*time.Millisecond)),
		finalStore("hop"), 1, 300*time.Millisecond, aggSum)
	r.pipe(recs...)
	r.flush(10_000_000)
	if d := diffResults(r.finals(), batchTime(recs, 1000, 200, 50, false)); d != "[]" {
		t.Fatal(d)
	}
}

func TestWindowFinalTimestampIsWindowEnd(t *testing.T) {
	r := newWindowRun(t, Tumbling(time.Second), finalStore("ts"), 1, 0, aggCount)
	r.pipe(wrec{key: "a", ts: 1500}, wrec{key: "a", ts: 2500})
	out := r.outputs()
	if len(out) != 1 || out[0].win != wkey("a", 1000, 2000) || out[0].val != 1 || out[0].ts != 1999 {
		t.Fatalf("outputs %+v, want a|1000|2000 = 1 at 1999", out)
	}
}

// Daily windows in Europe/Berlin across both DST changes of 2026 (29 March:
// a 23-hour day; 25 October: a 25-hour day).
func TestWindowCalendarDailyAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	var recs []wrec
	for _, day := range []time.Time{
		time.Date(2026, 3, 27, 0, 0, 0, 0, berlin), time.Date(2026, 10, 23, 0, 0, 0, 0, berlin),
	} {
		// Every 47 minutes over four days, keys alternating.
		for i := 0; i < 4*24*60/47; i++ {
			ts := day.Add(time.Duration(i) * 47 * time.Minute).UnixMilli()
			recs = append(recs, wrec{key: testKeys[i%3], ts: ts, val: 1})
		}
	}
	w := Tumbling(24*time.Hour, WindowIn(berlin))
	r := newWindowRun(t, w, finalStore("daily"), 1, 0, aggCount)
	r.pipe(recs...)
	r.flush(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	want := batchDaily(recs, berlin)
	got := r.finals()
	if d := diffResults(got, want); d != "[]" {
		t.Fatal(d)
	}
	// The batch has the short and the long day: the operator produced them.
	spring := time.Date(2026, 3, 29, 0, 0, 0, 0, berlin)
	fall := time.Date(2026, 10, 25, 0, 0, 0, 0, berlin)
	for _, c := range []struct {
		start time.Time
		hours int64
	}{{spring, 23}, {fall, 25}} {
		k := wkey("a", c.start.UnixMilli(), c.start.UnixMilli()+c.hours*3600_000)
		if _, ok := got[k]; !ok {
			t.Errorf("no %d-hour day %s in %v", c.hours, k, got)
		}
	}
}

func TestWindowEmitUpdatesEveryChange(t *testing.T) {
	store := WindowedStore{Name: "upd", Late: DropLate(), Emit: EmitUpdates()}
	r := newWindowRun(t, Tumbling(time.Second), store, 1, 0, aggCount)
	r.pipe(wrec{key: "a", ts: 100}, wrec{key: "a", ts: 200}, wrec{key: "b", ts: 300}, wrec{key: "a", ts: 1100})
	var got []string
	for _, o := range r.outputs() {
		got = append(got, o.win+"="+strconv.FormatInt(o.val, 10))
	}
	want := "a|0|1000=1 a|0|1000=2 b|0|1000=1 a|1000|2000=1"
	if strings.Join(got, " ") != want {
		t.Fatalf("updates %v, want %s", got, want)
	}
}
