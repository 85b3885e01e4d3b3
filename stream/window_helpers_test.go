package stream

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Test helpers of the windowed operators: a count per key and window run
// on a Driver (one record per round: the watermark advances per record),
// and independent batch computations of the same counts.

// wrec is an input record: key, event time (ms), value.
type wrec struct {
	key string
	ts  int64
	val int64
}

// wkey names a window of a key in results: "key|start|end" (ms).
func wkey(key string, start, end int64) string { return fmt.Sprintf("%s|%d|%d", key, start, end) }

// wout is one windowed output record.
type wout struct {
	win  string
	val  int64
	ts   int64
	hdrs []Header
}

// windowRun is a windowed aggregation over "in" (String keys, Int64
// values) written to "out".
type windowRun struct {
	t     *testing.T
	d     *Driver
	w     Windows
	parts int32
}

// windowAgg selects the windowed operation of a run.
type windowAgg int

const (
	aggCount     windowAgg = iota
	aggSum                 // WindowedReduce with +
	aggAggregate           // WindowedAggregate summing, with a merge function
)

func newWindowRun(t *testing.T, w Windows, store WindowedStore, parts int32, bound time.Duration, agg windowAgg, opts ...Opt) *windowRun {
	t.Helper()
	b := NewBuilder()
	g := GroupByKey(From(b, "in", String(), Int64()))
	var tbl Table[Windowed[string], int64]
	switch agg {
	case aggCount:
		tbl = WindowedCount(g, w, store)
	case aggSum:
		tbl = WindowedReduce(g, w, store, func(a, v int64) (int64, error) { return a + v, nil })
	case aggAggregate:
		tbl = WindowedAggregate(g, w, store, func() int64 { return 0 },
			func(r Record[string, int64], a int64) (int64, error) { return a + r.Value, nil },
			func(a, b int64) (int64, error) { return a + b, nil })
	}
	tbl.ToStream().To("out", WindowedKeys(String(), w), Int64())
	all := append([]Opt{StateDir(t.TempDir()), Watermarks(bound, 0)}, opts...)
	d, err := NewDriver("win", b, map[string]int32{"in": parts}, all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &windowRun{t: t, d: d, w: w, parts: parts}
}

// pipe writes the records one per round.
func (r *windowRun) pipe(recs ...wrec) {
	r.t.Helper()
	for _, rec := range recs {
		if _, err := r.d.Pipe("in", []byte(rec.key), int64Bytes(rec.val), time.UnixMilli(rec.ts)); err != nil {
			r.t.Fatal(err)
		}
		if err := r.d.Process(); err != nil {
			r.t.Fatal(err)
		}
	}
}

func int64Bytes(v int64) []byte {
	b, _ := Int64().Encode(v)
	return b
}

// flush pipes, to every partition of "in", a record far past every window
// so the watermark closes them all (its own windows stay open: they are
// never in results).
func (r *windowRun) flush(at int64) {
	r.t.Helper()
	for p := int32(0); p < r.parts; p++ {
		r.pipe(wrec{key: sentinelKey(p, r.parts), ts: at, val: 0})
	}
}

// sentinelKey returns a key "~<n>" that lands in partition p of parts.
func sentinelKey(p, parts int32) string {
	for i := 0; ; i++ {
		k := "~" + strconv.Itoa(i)
		if keyPartition([]byte(k), parts) == p {
			return k
		}
	}
}

// outputs decodes the records written to "out" (sentinel keys left out).
func (r *windowRun) outputs() []wout {
	r.t.Helper()
	kc := WindowedKeys(String(), r.w)
	var out []wout
	for _, rec := range r.d.Records("out") {
		k, err := kc.Decode(rec.Key)
		if err != nil {
			r.t.Fatal(err)
		}
		if k.Key[0] == '~' {
			continue
		}
		v, err := Int64().Decode(rec.Value)
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, wout{win: wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli()), val: v,
			ts: rec.Timestamp.UnixMilli(), hdrs: rec.Headers})
	}
	return out
}

// finals returns the outputs as a map, failing on a window emitted twice.
func (r *windowRun) finals() map[string]int64 {
	r.t.Helper()
	m := map[string]int64{}
	for _, o := range r.outputs() {
		if prev, ok := m[o.win]; ok {
			r.t.Fatalf("window %s emitted twice (%d, then %d)", o.win, prev, o.val)
		}
		m[o.win] = o.val
	}
	return m
}

// latest returns the last output per window (upserts).
func (r *windowRun) latest() map[string]int64 {
	m := map[string]int64{}
	for _, o := range r.outputs() {
		m[o.win] = o.val
	}
	return m
}

// diffResults reports the differences of got from want, sorted.
func diffResults(got, want map[string]int64) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("missing %s=%d", k, want[k]))
		} else if g != want[k] {
			out = append(out, fmt.Sprintf("%s=%d, want %d", k, g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("unexpected %s=%d", k, got[k]))
		}
	}
	if len(out) > 12 {
		out = append(out[:12], fmt.Sprintf("... %d more", len(out)-12))
	}
	return fmt.Sprint(out)
}

// Batch computations, independent of the operator and of
// stream/internal/window: windows enumerated from their definitions.

// batchTime sums (or counts) per plain tumbling/hopping window: the windows
// [s, s+size) with s = off + k*adv holding ts.
func batchTime(recs []wrec, size, adv, off int64, count bool) map[string]int64 {
	m := map[string]int64{}
	for _, r := range recs {
		// The largest start <= ts, then earlier ones while they hold ts.
		k := (r.ts - off) / adv
		if (r.ts-off)%adv < 0 {
			k--
		}
		for s := off + k*adv; s > r.ts-size; s -= adv {
			m[wkey(r.key, s, s+size)] += value(r, count)
		}
	}
	return m
}

func value(r wrec, count bool) int64 {
	if count {
		return 1
	}
	return r.val
}

// batchDaily counts per calendar day of loc: [local midnight, next local
// midnight).
func batchDaily(recs []wrec, loc *time.Location) map[string]int64 {
	m := map[string]int64{}
	for _, r := range recs {
		t := time.UnixMilli(r.ts).In(loc)
		start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		end := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		m[wkey(r.key, start.UnixMilli(), end.UnixMilli())]++
	}
	return m
}

// batchSessions sums per session: a key's records sorted by time, split
// where two consecutive records are more than gap apart. Sessions are
// [first, last] (inclusive).
func batchSessions(recs []wrec, gap int64, count bool) map[string]int64 {
	byKey := map[string][]wrec{}
	for _, r := range recs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	m := map[string]int64{}
	for k, rs := range byKey {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].ts < rs[j].ts })
		start, last, sum := rs[0].ts, rs[0].ts, value(rs[0], count)
		for _, r := range rs[1:] {
			if r.ts-last > gap {
				m[wkey(k, start, last)] = sum
				start, sum = r.ts, 0
			}
			last = r.ts
			sum += value(r, count)
		}
		m[wkey(k, start, last)] = sum
	}
	return m
}

// batchSliding sums per sliding window of time difference d (Kafka
// Streams' definition): for every record time x, [x-d, x]; for every x
// with a record in (x, x+1+d], [x+1, x+1+d]; each holding the records in
// it (both ends inclusive).
func batchSliding(recs []wrec, d int64, count bool) map[string]int64 {
	byKey := map[string][]wrec{}
	for _, r := range recs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	m := map[string]int64{}
	for k, rs := range byKey {
		wins := map[[2]int64]bool{}
		for _, x := range rs {
			wins[[2]int64{x.ts - d, x.ts}] = true
			for _, y := range rs {
				if y.ts > x.ts && y.ts <= x.ts+1+d {
					wins[[2]int64{x.ts + 1, x.ts + 1 + d}] = true
				}
			}
		}
		for w := range wins {
			var sum int64
			for _, r := range rs {
				if r.ts >= w[0] && r.ts <= w[1] {
					sum += value(r, count)
				}
			}
			m[wkey(k, w[0], w[1])] = sum
		}
	}
	return m
}

// header returns a header's value (ok false if absent).
func headerOf(hs []Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// captureInto is a producer (withProducer) that acknowledges every record
// and appends a copy of it, key and value cloned, to *dst.
func captureInto(dst *[]*kgo.Record) Opt {
	return withProducer(func(kr *kgo.Record, promise func(*kgo.Record, error)) {
		c := *kr
		c.Key, c.Value = slices.Clone(kr.Key), slices.Clone(kr.Value)
		*dst = append(*dst, &c)
		promise(kr, nil)
	}, false)
}

// restoreFrom wipes tk's database and writes into it the records of recs
// that belong to its stores' changelogs, in order, straight to the
// database as a task's restore does (restore.go): the close scans read it.
func restoreFrom(t testing.TB, tk *task, recs []*kgo.Record) {
	t.Helper()
	if err := tk.db.Wipe(); err != nil {
		t.Fatal(err)
	}
	txn := tk.db.Begin()
	defer txn.Discard()
	for _, st := range tk.stores {
		for _, kr := range recs {
			if kr.Topic == st.changelog {
				if err := applyStoreChangelog(txn, st.spec, kr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := txn.CommitThrough(); err != nil {
		t.Fatal(err)
	}
}
