package stream

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// restoreRig is an App that is not running, wired to a broker so that a
// test can restore a task of countTopology and run a standby of it
// directly, with the changelog written by the test.
type restoreRig struct {
	t         testing.TB
	b         *testBroker
	a         *App
	changelog string
	model     map[string]int64 // latest value per key written to the changelog
	written   int64
}

func newRestoreRig(t testing.TB, b *testBroker, stateDir string, opts ...Opt) *restoreRig {
	t.Helper()
	bl := NewBuilder()
	countTopology(bl)
	a, err := NewApp("rig", bl, append([]Opt{Brokers(b.seeds...), StateDir(stateDir), CommitInterval(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	a.adm = b.adm
	return &restoreRig{t: t, b: b, a: a, changelog: a.changelogTopic("counts"), model: map[string]int64{}}
}

// write appends n changelog records to partition 0: keys cycle over keys,
// each record the key's next count.
func (r *restoreRig) write(n, keys int) {
	r.t.Helper()
	const batch = 5000
	for done := 0; done < n; {
		m := min(batch, n-done)
		recs := make([]*kgo.Record, 0, m)
		for i := range m {
			k := fmt.Sprintf("key-%06d", (int(r.written)+i)%keys)
			r.model[k]++
			v, _ := Int64().Encode(r.model[k])
			recs = append(recs, &kgo.Record{Topic: r.changelog, Partition: 0, Key: []byte(k), Value: v,
				Timestamp: t0.Add(time.Duration(r.written+int64(i)) * time.Millisecond)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cl, err := kgo.NewClient(kgo.SeedBrokers(r.b.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(1<<20))
		if err != nil {
			r.t.Fatal(err)
		}
		err = cl.ProduceSync(ctx, recs...).FirstErr()
		cl.Close()
		cancel()
		if err != nil {
			r.t.Fatal(err)
		}
		r.written += int64(m)
		done += m
	}
}

func (r *restoreRig) spec() *storeSpec { return r.a.stores["counts"] }

func (r *restoreRig) id() taskID { return r.a.storeTask(r.spec(), 0) }

// standbyCatchUp runs a standby of the task until it applied the whole
// changelog, then stops it (it checkpoints as it stops).
func (r *restoreRig) standbyCatchUp() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := &standbyTask{id: r.id(), stores: []*storeSpec{r.spec()}, cancel: cancel, done: make(chan struct{}), pos: map[string]int64{}}
	errc := make(chan error, 1)
	go func() {
		defer close(st.done)
		errc <- r.a.standbys.tail(ctx, st)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for st.positions()[r.changelog] < r.written {
		if time.Now().After(deadline) {
			cancel()
			r.t.Fatalf("standby at %v, changelog end %d", st.positions(), r.written)
		}
		select {
		case err := <-errc:
			r.t.Fatalf("standby stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-st.done
	if err := <-errc; err != nil {
		r.t.Fatal(err)
	}
}

// restore creates the task (as ensureTask would on a takeover), restores it
// and returns how many changelog records it replayed and how long it took.
// The restored store must equal the model.
func (r *restoreRig) restore() (int, time.Duration) {
	r.t.Helper()
	before := counterValue(r.a.metrics.restored)
	tk, err := r.a.newTask(r.id())
	if err != nil {
		r.t.Fatal(err)
	}
	defer tk.close()
	start := time.Now()
	if err := tk.restore(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	d := time.Since(start)
	got := 0
	err = tk.db.Scan("counts", nil, nil, func(k, v []byte, _ int64) error {
		n, err := Int64().Decode(v)
		if err != nil {
			return err
		}
		if n != r.model[string(k)] {
			return fmt.Errorf("key %s = %d, want %d", k, n, r.model[string(k)])
		}
		got++
		return nil
	})
	if err == nil && got != len(r.model) {
		err = fmt.Errorf("restored %d keys, want %d", got, len(r.model))
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return int(counterValue(r.a.metrics.restored) - before), d
}

// TestStandbyCheckpointRestoresOnlyTail: a standby that tailed the changelog
// leaves a checkpoint the task restore trusts, so a takeover replays exactly
// the records written after the standby stopped; without the standby the
// same takeover replays the whole changelog. Both restored stores equal the
// model.
func TestStandbyCheckpointRestoresOnlyTail(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 1)
	const keys, head, tail = 500, 3000, 137
	warm := newRestoreRig(t, b, t.TempDir())
	b.createTopic(warm.changelog, 1)
	warm.write(head, keys)
	warm.standbyCatchUp()
	warm.write(tail, keys)
	if n, _ := warm.restore(); n != tail {
		t.Errorf("takeover with a standby replayed %d records, want the tail %d", n, tail)
	}

	cold := newRestoreRig(t, b, t.TempDir())
	cold.model, cold.written = warm.model, warm.written
	if n, _ := cold.restore(); n != head+tail {
		t.Errorf("takeover without a standby replayed %d records, want all %d", n, head+tail)
	}

	// A standby resuming from its checkpoint catches up from there too.
	warm.write(tail, keys)
	applied := counterValue(warm.a.standbys.applied)
	warm.standbyCatchUp()
	if n := counterValue(warm.a.standbys.applied) - applied; n != tail {
		t.Errorf("standby resuming from the checkpoint applied %v records, want %d", n, tail)
	}
	if n, _ := warm.restore(); n != 0 {
		t.Errorf("restore right after a caught-up standby replayed %d records, want 0", n)
	}
}

// clone returns a rig on a copy of r's state directory (r's stores must be
// closed), sharing r's changelog and model.
func (r *restoreRig) clone(dir string) *restoreRig {
	r.t.Helper()
	src := filepath.Join(r.a.cfg.stateDir, r.a.id)
	if err := os.CopyFS(filepath.Join(dir, r.a.id), os.DirFS(src)); err != nil {
		r.t.Fatal(err)
	}
	c := newRestoreRig(r.t, r.b, dir)
	c.model, c.written = r.model, r.written
	return c
}

// BenchmarkStandbyTakeover measures a moved task's restore with and without
// a standby copy in the same run: a changelog of 200k records over 200k keys,
// plus a 2k-record tail written after the standby's checkpoint. Reported:
// records replayed and seconds per restore for each, and their ratio.
func BenchmarkStandbyTakeover(bm *testing.B) {
	b := startBrokerB(bm)
	b.createTopic("events", 1)
	const keys, head, tail = 200_000, 200_000, 2_000
	warm := newRestoreRig(bm, b, bm.TempDir())
	b.createTopic(warm.changelog, 1)
	warm.write(head, keys)
	warm.standbyCatchUp()
	warm.write(tail, keys)
	var coldN, warmN int
	var coldD, warmD time.Duration
	bm.ResetTimer()
	for range bm.N {
		bm.StopTimer()
		cold := newRestoreRig(bm, b, bm.TempDir())
		cold.model, cold.written = warm.model, warm.written
		w := warm.clone(bm.TempDir())
		bm.StartTimer()
		n, d := cold.restore()
		coldN, coldD = n, coldD+d
		n, d = w.restore()
		warmN, warmD = n, warmD+d
	}
	bm.StopTimer()
	reportTakeoverRestore(bm, coldN, warmN, coldD, warmD)
}

// TestStandbyTakeoverExactlyOnce runs the keyed count on two instances
// under ExactlyOnce with one standby replica each: each instance keeps warm
// copies of the other's tasks. Once the copies caught up, more input
// arrives and the first instance is killed; the second takes its tasks over,
// replaying only the changelog written since its copies' last positions
// (not the whole changelog), and the counts stay exact.
func TestStandbyTakeoverExactlyOnce(t *testing.T) {
	b := startBrokerFor(t, ExactlyOnce)
	const parts, keys = 4, 200
	b.createTopic("events", parts)
	b.createTopic("counts", parts)
	opts := func() []Opt {
		return []Opt{testLogger(t), WithGuarantee(ExactlyOnce), StateDir(t.TempDir()),
			CommitInterval(20 * time.Millisecond), StandbyReplicas(1), QueryServer("127.0.0.1:0")}
	}
	a1 := b.run("sb", countTopology, opts()...)
	a2 := b.run("sb", countTopology, opts()...)
	truth := map[string]int64{}
	produceEvents(b, 0, 2000, keys, truth)
	b.waitForIso("counts", true, 60*time.Second, atLeast(t, truth))
	waitSplit(t, parts, a1.a, a2.a)
	changelog := a1.a.changelogTopic("counts")

	// Wait for each instance's standbys: exactly the other's partitions,
	// caught up with the changelog's last stable offset.
	var caughtUp map[int32]int64 // a2's standby positions for a1's partitions
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lso, err := b.adm.ListCommittedOffsets(ctx, changelog)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		for _, pair := range [][2]*App{{a1.a, a2.a}, {a2.a, a1.a}} {
			owner, standby := pair[0], pair[1]
			pos := standby.standbys.positions()
			own := localPartitions(owner)
			if len(pos) != len(own) {
				ok = false
				continue
			}
			for _, p := range own {
				end, _ := lso.Lookup(changelog, p)
				if pos[taskID{sub: 0, partition: p}][changelog] < end.Offset ||
					gaugeValue(standby.standbys.lag.WithLabelValues(taskID{sub: 0, partition: p}.String())) != 0 {
					ok = false
				}
			}
		}
		if ok {
			caughtUp = map[int32]int64{}
			for id, pos := range a2.a.standbys.positions() {
				caughtUp[id.partition] = pos[changelog]
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standbys did not catch up: a1 %v (owns %v), a2 %v (owns %v), lso %v",
				a1.a.standbys.positions(), localPartitions(a1.a), a2.a.standbys.positions(), localPartitions(a2.a), lso)
		}
		time.Sleep(20 * time.Millisecond)
	}
	moved := localPartitions(a1.a)
	checkStaleReads(t, a2.a, moved, truth)
	var full int64 // the moved partitions' whole changelog
	for _, p := range moved {
		full += caughtUp[p]
	}

	restoredBefore := counterValue(a2.a.metrics.restored)
	produceEvents(b, 2000, 300, keys, truth)
	time.Sleep(100 * time.Millisecond) // let the kill land mid-stream
	if err := a1.kill(); err != nil {
		t.Fatal(err)
	}
	waitSplit(t, parts, a2.a)
	produceEvents(b, 2300, 300, keys, truth)
	recs := b.waitForIso("counts", true, 60*time.Second, atLeast(t, truth))
	got := latest(t, recs)
	for k, n := range truth {
		if got[k] != n {
			t.Errorf("key %s: count %d, want exactly %d under ExactlyOnce", k, got[k], n)
		}
	}
	checkPerKeyMonotonic(t, recs)

	// The takeover replayed at most what was written to the moved
	// partitions' changelog after the standbys' caught-up positions.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := b.adm.ListEndOffsets(ctx, changelog)
	if err != nil {
		t.Fatal(err)
	}
	var tail int64
	for _, p := range moved {
		end, _ := ends.Lookup(changelog, p)
		tail += end.Offset - caughtUp[p]
	}
	replayed := int64(counterValue(a2.a.metrics.restored) - restoredBefore)
	t.Logf("takeover replayed %d changelog records; tail bound %d; whole changelog of the moved tasks %d", replayed, tail, full)
	if replayed > tail || replayed >= full {
		t.Errorf("takeover replayed %d records: want at most the tail written since the standby caught up (%d), "+
			"less than the moved tasks' changelog (%d)", replayed, tail, full)
	}

	// The survivor answers queries for every key with the model's count.
	q, err := QueryStore[string, int64](a2.a, "counts")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range truth {
		n, err := retryQuery(t, "get "+k, func(ctx context.Context) (int64, error) {
			n, _, err := q.Get(ctx, k)
			return n, err
		})
		if err != nil || n != want {
			t.Errorf("query %s after takeover: %d, %v; want %d", k, n, err, want)
		}
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}

// checkStaleReads: with AllowStale, an instance answers keys of the
// partitions another instance owns from its own caught-up standby copies
// (marked Stale), for Get, Range and HTTP; without it, from the owner.
func checkStaleReads(t *testing.T, a *App, standbyParts []int32, truth map[string]int64) {
	t.Helper()
	ctx := context.Background()
	stale := 0
	for k, want := range truth {
		p := keyPartition([]byte(k), 4)
		for _, allow := range []bool{false, true} {
			var opts []QueryOpt
			if allow {
				opts = append(opts, AllowStale())
			}
			e, err := retryQuery(t, "get "+k, func(ctx context.Context) (StoreEntry, error) {
				e, _, err := a.Get(ctx, "counts", []byte(k), opts...)
				return e, err
			})
			n, _ := Int64().Decode(e.Value)
			if err != nil || n != want {
				t.Fatalf("get %s (stale allowed %v): %d, %v; want %d", k, allow, n, err, want)
			}
			if wantStale := allow && slices.Contains(standbyParts, p); e.Stale != wantStale {
				t.Errorf("get %s (stale allowed %v): stale %v, want %v", k, allow, e.Stale, wantStale)
			}
			if e.Stale {
				stale++
			}
		}
	}
	if stale == 0 {
		t.Fatal("no answer came from a standby copy")
	}
	es, err := a.Range(ctx, "counts", nil, nil, 10_000, AllowStale())
	if err != nil || len(es) != len(truth) {
		t.Fatalf("stale range: %d entries, %v; want %d", len(es), err, len(truth))
	}
	for _, e := range es {
		n, _ := Int64().Decode(e.Value)
		if n != truth[string(e.Key)] || e.Stale != slices.Contains(standbyParts, e.Partition) {
			t.Errorf("stale range entry %s: %d stale %v (partition %d)", e.Key, n, e.Stale, e.Partition)
		}
	}
	for k := range truth {
		if !slices.Contains(standbyParts, keyPartition([]byte(k), 4)) {
			continue
		}
		var resp httpGetResponse
		if code := httpGetJSON(t, "http://"+a.queryEndpoint()+"/v1/stores/counts/get?stale=1&key="+k, &resp); code != http.StatusOK || !resp.Entry.Stale {
			t.Errorf("HTTP stale get %s: %d %+v", k, code, resp.Entry)
		}
		break
	}
}

// TestClaimStopsStandby: when the task a standby copies becomes active on
// the same instance, ensureTask stops the standby before opening the
// directory (no "unusable" store deleted, no full restore) and restores only
// the tail; once the task closes, a standby may start again, and while the
// task is active none does.
func TestClaimStopsStandby(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 1)
	r := newRestoreRig(t, b, t.TempDir())
	unusable := &countingHandler{match: "unusable"}
	r.a.cfg.logger = slog.New(unusable)
	b.createTopic(r.changelog, 1)
	r.write(2000, 300)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := r.a.standbys
	m.start(ctx)
	m.mu.Lock()
	m.startLocked(r.id(), []*storeSpec{r.spec()})
	m.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for m.positions()[r.id()][r.changelog] < r.written {
		if time.Now().After(deadline) {
			t.Fatalf("standby at %v", m.positions())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.write(50, 300)

	before := counterValue(r.a.metrics.restored)
	tk, err := r.a.ensureTask(ctx, r.id())
	if err != nil {
		t.Fatal(err)
	}
	if _, running := m.positions()[r.id()]; running {
		t.Error("standby still running after its task became active")
	}
	if n := counterValue(r.a.metrics.restored) - before; n > 50 {
		t.Errorf("takeover replayed %v records, want at most the 50 written after the standby caught up", n)
	}
	if v, _, found, err := tk.db.Get("counts", []byte("key-000007")); err != nil || !found {
		t.Errorf("restored store lacks key-000007: %v %v", found, err)
	} else if n, _ := Int64().Decode(v); n != r.model["key-000007"] {
		t.Errorf("key-000007 = %d, want %d", n, r.model["key-000007"])
	}
	m.mu.Lock()
	m.startLocked(r.id(), []*storeSpec{r.spec()}) // a stale view asks for it: claimed, so no
	m.mu.Unlock()
	if _, running := m.positions()[r.id()]; running {
		t.Error("standby started for an active task")
	}
	if closed := r.a.takeTasks(map[string][]int32{"events": {r.id().partition}}); len(closed) != 1 || closed[0] != tk {
		t.Fatalf("took %v, want the task", closed)
	}
	r.a.closeTasks([]*task{tk})
	m.mu.Lock()
	m.startLocked(r.id(), []*storeSpec{r.spec()})
	m.mu.Unlock()
	if _, running := m.positions()[r.id()]; !running {
		t.Error("no standby after the task closed")
	}
	m.stopAll()
	if n := unusable.n.Load(); n > 0 {
		t.Errorf("%d local stores found unusable", n)
	}
}

// TestClaimWaitsForStoppingStandby: a standby stopped by a placement change
// (update cancels it and waits outside the lock) may still hold the task
// directory when the task becomes active here: claim waits for it, so the
// task opens its store (no "unusable" store deleted) and restores only the
// tail; a standby of the task started meanwhile waits for it too.
func TestClaimWaitsForStoppingStandby(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 1)
	// The stopping standby's last checkpoint (still holding the directory)
	// waits for the test.
	var hold atomic.Bool
	holding, release := make(chan struct{}), make(chan struct{})
	onCheckpoint := withStandbyCheckpoints(func(taskID, state.Checkpoint) {
		if hold.CompareAndSwap(true, false) {
			close(holding)
			<-release
		}
	})
	unusable := &countingHandler{match: "unusable"}
	r := newRestoreRig(t, b, t.TempDir(), onCheckpoint, Logger(slog.New(unusable)))
	b.createTopic(r.changelog, 1)
	r.write(2000, 300)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := r.a.standbys
	m.start(ctx)
	m.mu.Lock()
	m.startLocked(r.id(), []*storeSpec{r.spec()})
	st := m.running[r.id()]
	m.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for st.positions()[r.changelog] < r.written {
		if time.Now().After(deadline) {
			t.Fatalf("standby at %v", st.positions())
		}
		time.Sleep(5 * time.Millisecond)
	}

	hold.Store(true)
	m.mu.Lock()
	m.stopLocked(st) // as update does for a standby no longer placed here
	m.startLocked(r.id(), []*storeSpec{r.spec()})
	next := m.running[r.id()] // placed here again: waits for st
	m.stopLocked(next)
	m.mu.Unlock()
	<-holding
	r.write(50, 300) // not fetched by the stopping standby

	before := counterValue(r.a.metrics.restored)
	claimed := make(chan *task, 1)
	go func() {
		tk, err := r.a.ensureTask(ctx, r.id())
		if err != nil {
			t.Error(err)
		}
		claimed <- tk
	}()
	var tk *task
	opened := false
	select {
	case tk = <-claimed:
		opened = true
		t.Error("the task was opened while a stopping standby held its directory")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if !opened {
		select {
		case tk = <-claimed:
		case <-time.After(time.Minute):
			t.Fatal("the task was not opened once the standby stopped")
		}
	}
	if tk == nil {
		return
	}
	if n := counterValue(r.a.metrics.restored) - before; n != 50 {
		t.Errorf("takeover replayed %v records, want the 50 written after the standby caught up", n)
	}
	if n := unusable.n.Load(); n > 0 {
		t.Errorf("%d local stores found unusable (opened while a standby held them)", n)
	}
	if closed := r.a.takeTasks(map[string][]int32{"events": {r.id().partition}}); len(closed) != 1 || closed[0] != tk {
		t.Fatalf("took %v, want the task", closed)
	}
	r.a.closeTasks([]*task{tk})
	m.stopAll()
}

// reportTakeoverRestore reports a takeover benchmark's restores without and
// with a standby copy: records replayed by the last of each, mean time per
// iteration, and their ratio.
func reportTakeoverRestore(bm *testing.B, coldN, warmN int, coldD, warmD time.Duration) {
	bm.ReportMetric(float64(coldN), "records-cold")
	bm.ReportMetric(float64(warmN), "records-standby")
	bm.ReportMetric(coldD.Seconds()/float64(bm.N), "s-cold")
	bm.ReportMetric(warmD.Seconds()/float64(bm.N), "s-standby")
	bm.ReportMetric(float64(coldD)/float64(warmD), "cold/standby")
}
