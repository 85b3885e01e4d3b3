package stream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// Windowed aggregation, standbys and interactive queries on the 3-broker
// kfake cluster (replication factor 3), checked against a batch computation
// of the same windows: every tumbling window's final count is the batch
// count, once per window under ExactlyOnce (read_committed).

const mbWindow = time.Second

// mbWindowTopology counts "mbw-in" per key in tumbling 1 s windows (finals
// to "mbw-out"; closed windows kept an hour for queries, store "wc") and
// per key overall (store "n", updates to "mbw-n"). Each record takes at
// least half a millisecond, so that moves land while input is processed.
func mbWindowTopology(bl *Builder) {
	in := From(bl, "mbw-in", String(), String()).
		Peek(func(Record[string, string]) { time.Sleep(500 * time.Microsecond) })
	g := GroupByKey(in)
	WindowedCount(g, Tumbling(mbWindow), WindowedStore{Name: "wc", Late: DropLate(), Emit: EmitFinal(), Retain: time.Hour}).
		ToStream().To("mbw-out", TimeWindowed(String(), mbWindow), Int64())
	Count(g, StoreConfig{Name: "n", TTL: 24 * time.Hour}).ToStream().To("mbw-n", String(), Int64())
}

// mbEvents is the input written so far, and its batch answers.
type mbEvents struct {
	keys   int
	starts map[string]int64 // window "key|start|end" -> count
	totals map[string]int64 // key -> count
	n      int
}

func newMBEvents(keys int) *mbEvents {
	return &mbEvents{keys: keys, starts: map[string]int64{}, totals: map[string]int64{}}
}

// mbTS is the event time of event i: 50 ms apart, in order per partition.
func mbTS(i int) time.Time { return t0.Add(time.Duration(i) * 50 * time.Millisecond) }

// produce writes the next n events (key i%keys) and folds them into the
// batch answers, computed from the window definition: [s, s+1s) with s the
// event time rounded down to the second.
func (e *mbEvents) produce(b *testBroker, n int) {
	recs := make([]*kgo.Record, 0, n)
	for i := e.n; i < e.n+n; i++ {
		k, ts := key(i%e.keys), mbTS(i).UnixMilli()
		s := ts - ts%mbWindow.Milliseconds()
		e.starts[wkeyOf(k, s, s+mbWindow.Milliseconds())]++
		e.totals[k]++
		recs = append(recs, &kgo.Record{Topic: "mbw-in", Key: []byte(k), Value: []byte(strconv.Itoa(i)), Timestamp: mbTS(i)})
	}
	e.n += n
	b.produce(recs...)
}

func wkeyOf(key string, start, end int64) string { return fmt.Sprintf("%s|%d|%d", key, start, end) }

// closeAll writes, to every partition of "mbw-in", a record an hour past
// every window, so that each task's watermark closes them all (its own
// window stays open; it is not among the results).
func closeAll(b *testBroker, parts int32) {
	var recs []*kgo.Record
	for p := range parts {
		recs = append(recs, &kgo.Record{Topic: "mbw-in", Key: []byte(keyIn(p, parts)), Value: []byte("close"),
			Timestamp: t0.Add(time.Hour)})
	}
	b.produce(recs...)
}

// keyIn returns a key "~<n>" of partition p of parts.
func keyIn(p, parts int32) string {
	for i := 0; ; i++ {
		if k := "~" + strconv.Itoa(i); keyPartition([]byte(k), parts) == p {
			return k
		}
	}
}

// readFinals reads "mbw-out": every result per window, in order (closing
// keys left out).
func readFinals(t *testing.T, b *testBroker, committed bool) map[string][]int64 {
	t.Helper()
	kc := TimeWindowed(String(), mbWindow)
	out := map[string][]int64{}
	for _, r := range b.read("mbw-out", committed) {
		k, err := kc.Decode(r.Key)
		if err != nil {
			t.Fatal(err)
		}
		n, err := Int64().Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if k.Key[0] == '~' {
			continue
		}
		w := wkeyOf(k.Key, k.Start.UnixMilli(), k.End.UnixMilli())
		out[w] = append(out[w], n)
	}
	return out
}

// waitFinals waits until every window of want has a result, then checks
// them: each result equals the batch count, and under ExactlyOnce each
// window has exactly one; no other window has a result.
func waitFinals(t *testing.T, b *testBroker, g Guarantee, want map[string]int64) {
	t.Helper()
	committed := g == ExactlyOnce
	deadline := time.Now().Add(60 * time.Second)
	var got map[string][]int64
	for {
		got = readFinals(t, b, committed)
		missing := 0
		for w := range want {
			if len(got[w]) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d windows without a result after 60s", missing, len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
	dups := 0
	for _, w := range slices.Sorted(maps.Keys(got)) {
		vs, n := got[w], want[w]
		if _, ok := want[w]; !ok {
			t.Errorf("window %s: results %v, not a window of the input", w, vs)
			continue
		}
		if committed && len(vs) != 1 {
			t.Errorf("window %s: results %v under ExactlyOnce, want exactly [%d]", w, vs, n)
		}
		for _, v := range vs {
			if v != n {
				t.Errorf("window %s: results %v, want %d", w, vs, n)
				break
			}
		}
		dups += len(vs) - 1
	}
	t.Logf("%s: %d windows, each result the batch count; %d repeated results", g, len(want), dups)
}

// waitFinalFrom waits until a result of a window starting at or after
// from is out: the App is processing past it.
func waitFinalFrom(t *testing.T, b *testBroker, g Guarantee, from time.Time) {
	t.Helper()
	kc := TimeWindowed(String(), mbWindow)
	b.waitForIso("mbw-out", g == ExactlyOnce, 30*time.Second, func(recs []*kgo.Record) bool {
		for _, r := range recs {
			if k, err := kc.Decode(r.Key); err == nil && !k.Start.Before(from) {
				return true
			}
		}
		return false
	})
}

// TestMultiBrokerWindowedMoves: a tumbling windowed count (EmitFinal) on 3
// brokers while, in each of four rounds of input, the leaders of all
// partitions (input, changelogs, output) and then the group and
// transaction coordinators move to other brokers mid-round. Every window's
// final count equals the batch count; under ExactlyOnce each is committed
// exactly once; under AtLeastOnce (no crash, so nothing is replayed) no
// result differs from the batch count either.
func TestMultiBrokerWindowedMoves(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			c, b := startMultiBroker(t)
			const parts = 3
			b.createTopic("mbw-in", parts)
			b.createTopic("mbw-out", parts)
			b.createTopic("mbw-n", parts)
			ev := newMBEvents(12)
			a := b.run("mbwin", mbWindowTopology, multiOpts(t, g)...)
			const rounds, per = 4, 300 // 15 s of event time per round
			midStream := 0             // moves made while input was left to process
			for range rounds {
				from := mbTS(ev.n)
				ev.produce(b, per)
				waitFinalFrom(t, b, g, from.Add(2*time.Second))
				moveAllLeaders(t, c, b)
				if left := unprocessed(t, b, "mbwin", "mbw-in", ev.n); left > 0 {
					midStream++
				}
				waitFinalFrom(t, b, g, from.Add(6*time.Second))
				moveCoordinators(t, c, moveCoordinatorKeys(t, a.a, g)...)
				if left := unprocessed(t, b, "mbwin", "mbw-in", ev.n); left > 0 {
					midStream++
				}
			}
			t.Logf("%d of %d moves made with input left to process; %v transactions aborted, %v tasks opened",
				midStream, 2*rounds, counterValue(a.a.metrics.txnAborts), counterValue(a.a.metrics.tasksOpened))
			if midStream == 0 {
				t.Fatal("no move landed while the App had input to process")
			}
			closeAll(b, parts)
			waitFinals(t, b, g, ev.starts)
			b.waitCommitted("mbwin", "mbw-in", int64(ev.n+parts))
			if err := a.stop(); err != nil {
				t.Fatalf("app: %v", err)
			}
			waitFinals(t, b, g, ev.starts) // nothing more after the stop
			checkInternalReplication(t, b, "mbwin", multiBrokers)
		})
	}
}

// unprocessed returns how many of the produced records of topic group has
// not committed yet.
func unprocessed(t *testing.T, b *testBroker, group, topic string, produced int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := int64(produced)
	resp.Each(func(o kadm.OffsetResponse) { left -= max(0, o.At) })
	return left
}

// queryRetry runs fn until it succeeds or fails with an error that is not
// retriable (a rebalance, a task still restoring), within 30 s.
func queryRetry[T any](what string, fn func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err := fn(ctx)
		cancel()
		if err == nil {
			return v, nil
		}
		if !QueryRetriable(err) || time.Now().After(deadline) {
			return v, fmt.Errorf("%s: %w", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkQueries looks every key up on instance a, all keys at once: its
// windows (QueryWindows) and its total (App.Get on store "n") equal the
// batch answers, whichever instance owns the key. It returns how many keys
// were answered by the other instance.
func checkQueries(t *testing.T, a *App, ev *mbEvents, parts int32) (remote int) {
	t.Helper()
	wq, err := QueryWindows[string, int64](a, "wc")
	if err != nil {
		t.Fatal(err)
	}
	local := localPartitions(a)
	errs := make(chan error, len(ev.totals))
	for k, total := range ev.totals {
		if !slices.Contains(local, keyPartition([]byte(k), parts)) {
			remote++
		}
		go func() { errs <- checkKey(a, wq, ev, k, total) }()
	}
	for range ev.totals {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	return remote
}

// checkKey queries key k's windows and total on a and compares them with
// the batch answers.
func checkKey(a *App, wq *WindowQuery[string, int64], ev *mbEvents, k string, total int64) error {
	es, err := queryRetry("windows of "+k, func(ctx context.Context) ([]Entry[Windowed[string], int64], error) {
		return wq.Fetch(ctx, k, t0.Add(-time.Hour), t0.Add(time.Hour))
	})
	if err != nil {
		return err
	}
	got := map[string]int64{}
	for _, e := range es {
		got[wkeyOf(e.Key.Key, e.Key.Start.UnixMilli(), e.Key.End.UnixMilli())] = e.Value
	}
	want := map[string]int64{}
	for w, n := range ev.starts {
		if w[:len(k)+1] == k+"|" {
			want[w] = n
		}
	}
	if d := diffResults(got, want); d != "[]" {
		return fmt.Errorf("windows of %s queried on an instance: %s", k, d)
	}
	e, err := queryRetry("get "+k, func(ctx context.Context) (StoreEntry, error) {
		e, found, err := a.Get(ctx, "n", []byte(k))
		if err == nil && !found {
			err = fmt.Errorf("key %s not found", k)
		}
		return e, err
	})
	if err != nil {
		return err
	}
	if n, err := Int64().Decode(e.Value); err != nil || n != total {
		return fmt.Errorf("get %s on an instance: %d (%v), want %d", k, n, err, total)
	}
	return nil
}

// TestMultiBrokerWindowedStandbyQueries: two instances of the windowed
// count with one standby replica each, on 3 brokers. Queries on either
// instance (windows and totals) answer every key with the batch answer,
// routed to the owner over the query API; each instance's standbys hold
// the other's state (stale reads equal the batch answers). Then, while
// more input is processed, one instance stops — killed under ExactlyOnce,
// stopped gracefully under AtLeastOnce — and the other takes its tasks over
// from its standbys, replaying only part of their changelogs; more input
// follows while all leaders and the coordinators move. Every window's final
// count equals the batch count (once each under ExactlyOnce), and the
// survivor answers every query with the batch answers.
func TestMultiBrokerWindowedStandbyQueries(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			c, b := startMultiBroker(t)
			const parts = 4
			b.createTopic("mbw-in", parts)
			b.createTopic("mbw-out", parts)
			b.createTopic("mbw-n", parts)
			opts := func() []Opt {
				return append(multiOpts(t, g), StandbyReplicas(1), QueryServer("127.0.0.1:0"))
			}
			a1 := b.run("mbsb", mbWindowTopology, opts()...)
			a2 := b.run("mbsb", mbWindowTopology, opts()...)
			ev := newMBEvents(16)
			ev.produce(b, 600) // 30 s of event time
			b.waitCommitted("mbsb", "mbw-in", int64(ev.n))
			waitSplit(t, parts, a1.a, a2.a)

			remote := checkQueries(t, a1.a, ev, parts) + checkQueries(t, a2.a, ev, parts)
			if remote == 0 {
				t.Fatal("no query was answered by the other instance")
			}
			for _, k := range []string{key(0), key(1), key(2), key(3)} {
				md, err := a1.a.KeyMetadata("n", []byte(k))
				if err != nil {
					t.Fatal(err)
				}
				owner, other := a1.a, a2.a
				if !md.Local {
					owner, other = a2.a, a1.a
				}
				if md.Active != owner.queryEndpoint() || !slices.Equal(md.Standbys, []string{other.queryEndpoint()}) {
					t.Errorf("metadata of %s: %+v; owner %s, standby %s", k, md, owner.queryEndpoint(), other.queryEndpoint())
				}
			}

			// a2's standbys of a1's partitions converge on the batch
			// answers (stale reads, both stores).
			moved := localPartitions(a1.a)
			checkStandbyReads(t, a2.a, moved, ev, parts)

			// More input; the instance stops while it is processing it.
			from := mbTS(ev.n)
			ev.produce(b, 200)
			waitFinalFrom(t, b, g, from.Add(2*time.Second))
			restored := counterValue(a2.a.metrics.restored)
			var err error
			if g == ExactlyOnce {
				err = a1.kill()
			} else {
				err = a1.stop()
			}
			if err != nil {
				t.Fatal(err)
			}
			waitSplit(t, parts, a2.a)
			full := changelogRecords(t, b, []string{a1.a.changelogTopic("wc"), a1.a.changelogTopic("n")}, moved)
			replayed := int64(counterValue(a2.a.metrics.restored) - restored)
			t.Logf("takeover replayed %d of the moved tasks' %d changelog records", replayed, full)
			if replayed >= full {
				t.Errorf("takeover replayed %d changelog records, the moved tasks' whole changelogs (%d): the standbys were not used", replayed, full)
			}

			// The survivor goes on while leaders and coordinators move.
			from = mbTS(ev.n)
			ev.produce(b, 400)
			waitFinalFrom(t, b, g, from.Add(2*time.Second))
			moveAllLeaders(t, c, b)
			moveCoordinators(t, c, moveCoordinatorKeys(t, a2.a, g)...)
			closeAll(b, parts)
			waitFinals(t, b, g, ev.starts)
			b.waitCommitted("mbsb", "mbw-in", int64(ev.n+parts))
			if remote := checkQueries(t, a2.a, ev, parts); remote != 0 {
				t.Errorf("%d keys answered remotely by the only instance left", remote)
			}
			if err := a2.stop(); err != nil {
				t.Fatalf("app: %v", err)
			}
		})
	}
}

// checkStandbyReads waits until a's stale reads of the keys of partitions
// standby (which another instance owns) come from its standby copies and
// equal the batch answers: totals by App.Get, windows by App.Range over
// the windowed store.
func checkStandbyReads(t *testing.T, a *App, standby []int32, ev *mbEvents, parts int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bad := standbyReadDiff(t, a, standby, ev, parts)
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby reads not the batch answers after 30s: %s", bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// standbyReadDiff returns the first difference of a's stale reads of the
// standby partitions from the batch answers, "" if none.
func standbyReadDiff(t *testing.T, a *App, standby []int32, ev *mbEvents, parts int32) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := 0
	for k, total := range ev.totals {
		if !slices.Contains(standby, keyPartition([]byte(k), parts)) {
			continue
		}
		keys++
		e, found, err := a.Get(ctx, "n", []byte(k), AllowStale())
		if err != nil || !found || !e.Stale {
			return fmt.Sprintf("get %s: found %v stale %v err %v", k, found, e.Stale, err)
		}
		if n, _ := Int64().Decode(e.Value); n != total {
			return fmt.Sprintf("get %s: %d, want %d", k, n, total)
		}
	}
	if keys == 0 {
		t.Fatalf("no key in the standby partitions %v", standby)
	}
	// The window entries ('w' | key | end | start; window_agg.go), not the
	// operator's indexes.
	es, err := a.Range(ctx, "wc", []byte("w"), []byte("x"), 100_000, AllowStale())
	if err != nil {
		return fmt.Sprintf("range: %v", err)
	}
	got, want := map[string]int64{}, map[string]int64{}
	for _, e := range es {
		if !slices.Contains(standby, e.Partition) {
			continue
		}
		if !e.Stale {
			return fmt.Sprintf("window entry of partition %d not from a standby", e.Partition)
		}
		k, start, end, err := timekey.ParseWindowKey(e.Key)
		if err != nil {
			t.Fatal(err)
		}
		n, err := decodeWindowAgg(Int64(), false, e.Value)
		if err != nil {
			t.Fatal(err)
		}
		got[wkeyOf(string(k), start, end)] = n
	}
	for w, n := range ev.starts {
		k := w[:len(key(0))]
		if slices.Contains(standby, keyPartition([]byte(k), parts)) {
			want[w] = n
		}
	}
	if d := diffResults(got, want); d != "[]" {
		return "windows: " + d
	}
	return ""
}

// changelogRecords sums the end offsets of the changelogs' partitions ps.
func changelogRecords(t *testing.T, b *testBroker, changelogs []string, ps []int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := b.adm.ListEndOffsets(ctx, changelogs...)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, cl := range changelogs {
		for _, p := range ps {
			o, ok := ends.Lookup(cl, p)
			if !ok {
				t.Fatalf("no end offset of %s/%d", cl, p)
			}
			n += o.Offset
		}
	}
	return n
}
