package stream

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// tableRig is an App of shopTopology that is not running, wired to a broker
// with one partition per topic, so that a test can run a standby of the
// table's task and restore it directly, moving the group's committed offset
// of the table topic itself.
type tableRig struct {
	t  testing.TB
	b  *testBroker
	a  *App
	id taskID

	mu sync.Mutex
	// bound is the committed offset of customers-0 a standby checkpoint may
	// not pass; set before the test commits an offset.
	bound       int64
	checkpoints []int64 // the standbys' checkpoints of customers, in order
}

func newTableRig(t *testing.T, g Guarantee) *tableRig {
	t.Helper()
	b := startBrokerFor(t, g)
	b.createTopic("orders", 1)
	b.createTopic("customers", 1) // not compacted: it takes the record without a key
	return newTableRigOn(t, b, t.TempDir(), g)
}

// newTableRigOn is a rig on broker b (topics created) and state directory
// dir.
func newTableRigOn(t testing.TB, b *testBroker, dir string, g Guarantee) *tableRig {
	t.Helper()
	bl := NewBuilder()
	shopTopology(bl)
	r := &tableRig{t: t, b: b}
	onCheckpoint := withStandbyCheckpoints(func(id taskID, cp state.Checkpoint) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.checkpoints = append(r.checkpoints, cp["customers"])
		if cp["customers"] > r.bound {
			t.Errorf("standby %s checkpointed customers at %d, past the group's committed offset %d", id, cp["customers"], r.bound)
		}
	})
	a, err := NewApp("tbl", bl, Brokers(b.seeds...), StateDir(dir), CommitInterval(20*time.Millisecond),
		WithGuarantee(g), onCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	a.adm = b.adm
	r.a, r.id = a, a.storeTask(a.stores["customers"], 0)
	return r
}

// commit sets the group's committed offset of customers-0 (as the active
// task would).
func (r *tableRig) commit(off int64) {
	r.t.Helper()
	r.mu.Lock()
	r.bound = max(r.bound, off)
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "customers", Partition: 0, At: off, LeaderEpoch: -1})
	resp, err := r.b.adm.CommitOffsets(ctx, "tbl", offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		r.t.Fatalf("commit customers-0 at %d: %v", off, err)
	}
}

// lowerBound lets the test move the committed offset backwards.
func (r *tableRig) lowerBound(off int64) {
	r.mu.Lock()
	r.bound = off
	r.mu.Unlock()
}

// runningStandby is a standby of the rig's task run by the test.
type runningStandby struct {
	st   *standbyTask
	errc chan error
}

func (r *tableRig) startStandby() *runningStandby {
	ctx, cancel := context.WithCancel(context.Background())
	spec := r.a.stores["customers"]
	st := &standbyTask{id: r.id, stores: []*storeSpec{spec}, cancel: cancel, done: make(chan struct{}), pos: map[string]int64{}}
	errc := make(chan error, 1)
	go func() {
		defer close(st.done)
		errc <- r.a.standbys.tail(ctx, st)
	}()
	return &runningStandby{st: st, errc: errc}
}

// waitFor waits until the standby applied customers up to pos and fetched
// it up to seen.
func (s *runningStandby) waitFor(t testing.TB, pos, seen int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.st.positions()["customers"] != pos || s.st.fetched()["customers"] < seen {
		if time.Now().After(deadline) {
			s.st.cancel()
			t.Fatalf("standby applied %v, fetched %v; want applied %d, fetched %d", s.st.positions(), s.st.fetched(), pos, seen)
		}
		select {
		case err := <-s.errc:
			t.Fatalf("standby stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *runningStandby) stop(t testing.TB) {
	t.Helper()
	s.st.cancel()
	<-s.st.done
	if err := <-s.errc; err != nil {
		t.Fatal(err)
	}
}

// table returns the rig's local table (no task or standby may have it open).
func (r *tableRig) table() map[string]string {
	r.t.Helper()
	db, err := state.Open(r.a.taskDir(r.id), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	return scanTable(r.t, db)
}

func scanTable(t testing.TB, db *state.DB) map[string]string {
	t.Helper()
	got := map[string]string{}
	if err := db.Scan("customers", nil, nil, func(k, v []byte, _ int64) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// produceTable writes the customers updates of the table tests: offsets 0-4.
func produceTable(b *testBroker) {
	b.produce(
		&kgo.Record{Topic: "customers", Key: []byte("c1"), Value: []byte("ann")},
		&kgo.Record{Topic: "customers", Value: []byte("no key")},
		&kgo.Record{Topic: "customers", Key: []byte("c2"), Value: []byte("bob")},
		&kgo.Record{Topic: "customers", Key: []byte("c1"), Value: []byte("ann2")},
		&kgo.Record{Topic: "customers", Key: []byte("c3"), Value: []byte("cat")},
	)
}

// TestStandbyOfTableStopsAtCommittedOffset: a standby of a task with a table
// applies the table's source topic only below the group's committed offset
// of the partition, holding back what it fetched past it, and follows the
// offset as it moves (refreshed each commit interval); it skips what
// processing skips (a record without a key). Its checkpoints never pass the
// committed offset, and a restart resumes from its checkpoint.
func TestStandbyOfTableStopsAtCommittedOffset(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			r := newTableRig(t, g)
			produceTable(r.b)
			r.commit(2)
			s := r.startStandby()
			s.waitFor(t, 2, 5)
			if lag := gaugeValue(r.a.standbys.lag.WithLabelValues(r.id.String())); lag != 0 {
				t.Errorf("standby lag %v at the committed offset, want 0 (what is past it is not to be applied yet)", lag)
			}
			s.stop(t)
			if got := r.table(); !maps.Equal(got, map[string]string{"c1": "ann"}) {
				t.Fatalf("standby copy at committed offset 2: %v, want only c1=ann", got)
			}

			s = r.startStandby() // resumes from its checkpoint
			s.waitFor(t, 2, 5)
			r.commit(4)
			s.waitFor(t, 4, 5)
			r.commit(5)
			s.waitFor(t, 5, 5)
			// New records past the limit are fetched again once it moves.
			r.b.produce(&kgo.Record{Topic: "customers", Key: []byte("c2"), Value: []byte("bob2")})
			s.waitFor(t, 5, 6)
			r.commit(6)
			s.waitFor(t, 6, 6)
			s.stop(t)
			if got := r.table(); !maps.Equal(got, map[string]string{"c1": "ann2", "c2": "bob2", "c3": "cat"}) {
				t.Fatalf("standby copy at committed offset 6: %v", got)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.checkpoints) == 0 || r.checkpoints[len(r.checkpoints)-1] != 6 {
				t.Fatalf("standby checkpoints %v, want the last at 6", r.checkpoints)
			}
		})
	}
}

// writeAheadCopy leaves in the rig's task directory what a standby of an
// older version left: the table as of offset 5 (past the committed offset)
// and a checkpoint saying so.
func (r *tableRig) writeAheadCopy() {
	r.t.Helper()
	db, err := state.Open(r.a.taskDir(r.id), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	txn := db.Begin()
	for k, v := range map[string]string{"c1": "ann2", "c2": "bob", "c3": "cat"} {
		if _, err := txn.Put("customers", []byte(k), []byte(v), 0); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := txn.CommitThrough(); err != nil {
		r.t.Fatal(err)
	}
	txn.Discard()
	if err := db.WriteCheckpoint(state.Checkpoint{"customers": 5}); err != nil {
		r.t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		r.t.Fatal(err)
	}
}

// TestTableCopyAheadOfCommittedOffset: a local table ahead of the group's
// committed offset (a standby of an older version tailed the source topic to
// its end) is never used past that offset: a takeover's restore wipes it and
// restores the table up to the committed offset; a standby starting on it
// wipes it and tails from the start up to the committed offset, also when
// the copy was its own and the group's offsets were reset backwards since.
func TestTableCopyAheadOfCommittedOffset(t *testing.T) {
	r := newTableRig(t, AtLeastOnce)
	produceTable(r.b)
	r.commit(2)

	r.writeAheadCopy()
	before := counterValue(r.a.metrics.restored)
	tk, err := r.a.newTask(r.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := scanTable(t, tk.db)
	cp, cerr := tk.db.Checkpoint()
	tk.close()
	if !maps.Equal(got, map[string]string{"c1": "ann"}) {
		t.Errorf("restored table over a copy ahead of the committed offset: %v, want only c1=ann", got)
	}
	if n := counterValue(r.a.metrics.restored) - before; n != 1 {
		t.Errorf("restore applied %v records, want 1 (offsets 0-1, one without a key)", n)
	}
	if cerr != nil || cp["customers"] != 2 {
		t.Errorf("checkpoint after the restore %v (%v), want customers at 2", cp, cerr)
	}

	r.writeAheadCopy()
	s := r.startStandby()
	s.waitFor(t, 2, 5)
	s.stop(t)
	if got := r.table(); !maps.Equal(got, map[string]string{"c1": "ann"}) {
		t.Errorf("standby over a copy ahead of the committed offset: %v, want only c1=ann", got)
	}

	r.commit(5)
	s = r.startStandby()
	s.waitFor(t, 5, 5)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		last := r.checkpoints[len(r.checkpoints)-1]
		r.mu.Unlock()
		if last == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby checkpoints %v, want one at 5", r.checkpoints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.stop(t)
	r.lowerBound(3)
	r.commit(3) // the offsets reset backwards (while the group had no member)
	s = r.startStandby()
	s.waitFor(t, 3, 5)
	s.stop(t)
	if got := r.table(); !maps.Equal(got, map[string]string{"c1": "ann", "c2": "bob"}) {
		t.Errorf("standby after the committed offset moved back to 3: %v, want c1=ann c2=bob", got)
	}
}

// TestRestoreTableEndsAfterTxnMarker: a table whose source topic is written
// in transactions has committed offsets just past a commit marker, which the
// restore must reach under at-least-once too (it reads read_uncommitted).
func TestRestoreTableEndsAfterTxnMarker(t *testing.T) {
	r := newTableRig(t, AtLeastOnce)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(r.b.seeds...), kgo.TransactionalID("tbl-writer"))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := pcl.ProduceSync(ctx,
		&kgo.Record{Topic: "customers", Key: []byte("c1"), Value: []byte("ann")},
		&kgo.Record{Topic: "customers", Key: []byte("c2"), Value: []byte("bob")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := pcl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	r.commit(3) // past the marker at offset 2, as the App commits
	tk, err := r.a.newTask(r.id)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.close()
	if err := tk.restore(ctx); err != nil {
		t.Fatalf("restore up to an offset just past a marker: %v", err)
	}
	if got := scanTable(t, tk.db); !maps.Equal(got, map[string]string{"c1": "ann", "c2": "bob"}) {
		t.Fatalf("restored %v", got)
	}
}

// writeTable appends n updates to customers-0, the i-th of key i % keys.
func (r *tableRig) writeTable(from, n, keys int) {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.b.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	const batch = 5000
	for done := 0; done < n; done += batch {
		recs := make([]*kgo.Record, 0, batch)
		for i := from + done; i < from+min(n, done+batch); i++ {
			recs = append(recs, &kgo.Record{Topic: "customers", Key: fmt.Appendf(nil, "c%06d", i%keys),
				Value: fmt.Appendf(nil, "customer %d", i), Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			r.t.Fatal(err)
		}
	}
}

// restoreTable restores the rig's task as a takeover does and returns the
// records replayed and the time it took.
func (r *tableRig) restoreTable() (int, time.Duration) {
	r.t.Helper()
	before := counterValue(r.a.metrics.restored)
	tk, err := r.a.newTask(r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	defer tk.close()
	start := time.Now()
	if err := tk.restore(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return int(counterValue(r.a.metrics.restored) - before), time.Since(start)
}

// BenchmarkStandbyTableTakeover measures a moved task's table restore with
// and without a standby copy in the same run: a table topic of 100k updates
// over 100k keys, committed, that the standby caught up with, plus a
// 2k-update tail committed after it stopped. Reported: records replayed and
// seconds per restore for each, and their ratio.
func BenchmarkStandbyTableTakeover(bm *testing.B) {
	b := startBrokerB(bm)
	b.createTopic("orders", 1)
	b.createTopic("customers", 1)
	const keys, head, tail = 100_000, 100_000, 2_000
	warm := newTableRigOn(bm, b, bm.TempDir(), AtLeastOnce)
	warm.writeTable(0, head, keys)
	warm.commit(head)
	s := warm.startStandby()
	s.waitFor(bm, head, head)
	s.stop(bm)
	warm.writeTable(head, tail, keys)
	warm.commit(head + tail)
	var coldN, warmN int
	var coldD, warmD time.Duration
	bm.ResetTimer()
	for range bm.N {
		bm.StopTimer()
		cold := newTableRigOn(bm, b, bm.TempDir(), AtLeastOnce)
		dir := bm.TempDir()
		if err := os.CopyFS(filepath.Join(dir, "tbl"), os.DirFS(filepath.Join(warm.a.cfg.stateDir, "tbl"))); err != nil {
			bm.Fatal(err)
		}
		w := newTableRigOn(bm, b, dir, AtLeastOnce)
		bm.StartTimer()
		n, d := cold.restoreTable()
		coldN, coldD = n, coldD+d
		n, d = w.restoreTable()
		warmN, warmD = n, warmD+d
	}
	bm.StopTimer()
	reportTakeoverRestore(bm, coldN, warmN, coldD, warmD)
}

// TestLimiterHoldsAtCommittedOffset drives a standby's limiter on one table
// partition by hand: records below the limit are applied, those at or past
// it held (each once, also when fetched again) until a higher limit (a
// lower one is ignored), and the position jumps gaps (compacted or aborted
// offsets) up to the limit, never past it.
func TestLimiterHoldsAtCommittedOffset(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1")) // not consuming: pausing is a no-op
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "customers"
	l := &limiter{cl: cl, partition: 0, limits: map[string]*sourceLimit{topic: {limit: 3}},
		pos: map[string]int64{topic: 0}, seen: map[string]int64{}}
	rec := func(off int64) *kgo.Record { return &kgo.Record{Topic: topic, Partition: 0, Offset: off} }
	var applied []int64
	apply := func(r *kgo.Record) {
		applied = append(applied, r.Offset)
		l.pos[topic] = max(l.pos[topic], r.Offset+1)
	}
	feed := func(offs ...int64) {
		for _, off := range offs {
			if r := rec(off); l.admit(r) {
				apply(r)
			}
		}
	}
	check := func(what string, pos int64, appliedWant ...int64) {
		t.Helper()
		if l.pos[topic] != pos || !slices.Equal(applied, appliedWant) {
			t.Fatalf("%s: position %d applied %v, want %d %v", what, l.pos[topic], applied, pos, appliedWant)
		}
	}

	feed(0, 2, 5, 6) // 1 is gone; 5 and 6 are past the limit
	check("first fetch", 3, 0, 2)
	l.pauseHeld()
	feed(5, 6, 7) // fetched before the pause took effect
	check("fetched again", 3, 0, 2)
	if sl := l.limits[topic]; !sl.paused || sl.resume != 7 || len(sl.held) != 2 {
		t.Fatalf("held %v paused %v resume %d, want 5 and 6 held, resume at 7", len(sl.held), sl.paused, sl.resume)
	}

	for _, r := range l.setLimits(map[string]int64{topic: 6}) {
		apply(r)
	}
	l.settle()
	l.resumeDrained()
	check("limit 6", 6, 0, 2, 5)
	if len(l.setLimits(map[string]int64{topic: 4})) != 0 || l.limits[topic].limit != 6 {
		t.Fatalf("a lower limit was taken: %d", l.limits[topic].limit)
	}
	for _, r := range l.setLimits(map[string]int64{topic: 10}) {
		apply(r)
	}
	l.settle()
	l.resumeDrained()
	check("limit 10", 7, 0, 2, 5, 6)
	if l.limits[topic].paused {
		t.Fatal("still paused with nothing held")
	}
	feed(7, 12) // 8-11 are gone
	check("gap up to the limit", 10, 0, 2, 5, 6, 7)
	if l.seen[topic] != 13 {
		t.Fatalf("fetched up to %d, want 13", l.seen[topic])
	}
}
