package stream

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/watermark"
)

// Watermarks across owners and through repartition topics, on real Apps
// against weir's in-process broker.

// produceAt writes one record per (partition, event time ms) to topic,
// to exactly that partition.
func produceAt(t *testing.T, b *testBroker, topic string, recs ...[2]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i, r := range recs {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(r[0]), Key: []byte(fmt.Sprint("k", i)),
			Value: []byte(fmt.Sprint(r[1])), Timestamp: time.UnixMilli(r[1])})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// watermarksOf returns the App's task watermarks by task (ms; Min: none).
func watermarksOf(a *App) map[string]int64 {
	out := map[string]int64{}
	for _, st := range a.Watermarks() {
		out[st.Task] = watermark.Min
		if !st.Watermark.IsZero() {
			out[st.Task] = st.Watermark.UnixMilli()
		}
	}
	return out
}

// waitWatermarks polls the App until cond holds on its task watermarks.
func waitWatermarks(t *testing.T, a *App, timeout time.Duration, what string, cond func(map[string]int64) bool) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w := watermarksOf(a)
		if cond(w) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; watermarks %v", what, timeout, w)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func guarantees(t *testing.T, f func(t *testing.T, g Guarantee)) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { f(t, g) })
	}
}

// passTopology forwards "ev" to "out" (stateless: the task has no local
// database, so only the committed offsets can carry its watermark).
func passTopology(b *Builder) { From(b, "ev", String(), String()).To("out", String(), String()) }

// TestWatermarkSurvivesMoveToAnotherInstance: an App processes records up
// to event time 9000 and stops; another instance (a fresh state directory,
// another group member) takes the tasks over and reads a record of event
// time 500 on the same partition: its watermark resumes at 9000 (from the
// committed offsets' metadata) instead of starting again at 500.
func TestWatermarkSurvivesMoveToAnotherInstance(t *testing.T) {
	guarantees(t, func(t *testing.T, g Guarantee) {
		for _, stateful := range []bool{false, true} {
			t.Run(fmt.Sprint("stateful=", stateful), func(t *testing.T) { watermarkMoveRun(t, g, stateful) })
		}
	})
}

func watermarkMoveRun(t *testing.T, g Guarantee, stateful bool) {
	b := startBrokerFor(t, g)
	b.createTopic("ev", 2)
	b.createTopic("out", 2)
	topo := passTopology
	if stateful {
		topo = func(bl *Builder) {
			Count(GroupByKey(From(bl, "ev", String(), String()), Codecs(String(), String())),
				StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To("out", String(), Int64())
		}
	}
	opts := []Opt{testLogger(t), Delivery(g), CommitInterval(50 * time.Millisecond), Watermarks(0, 0)}
	app1 := b.run("wm-move", topo, append(opts, StateDir(t.TempDir()))...)
	produceAt(t, b, "ev", [2]int64{0, 3000}, [2]int64{0, 9000}, [2]int64{1, 4000})
	waitWatermarks(t, app1.a, 30*time.Second, "first instance", func(w map[string]int64) bool {
		return w["0_0"] == 9000 && w["0_1"] == 4000
	})
	if err := app1.stop(); err != nil {
		t.Fatal(err)
	}

	app2 := b.run("wm-move", topo, append(opts, StateDir(t.TempDir()))...)
	produceAt(t, b, "ev", [2]int64{0, 500}, [2]int64{1, 600})
	// The new owner handled the late records (4 + 2 outputs) ...
	b.waitForIso("out", g == ExactlyOnce, 30*time.Second, func(r []*kgo.Record) bool { return len(r) >= 5 })
	w := waitWatermarks(t, app2.a, 30*time.Second, "second instance", func(w map[string]int64) bool {
		return w["0_0"] != watermark.Min && w["0_1"] != watermark.Min
	})
	// ... and its watermarks did not go back to them.
	if w["0_0"] != 9000 || w["0_1"] != 4000 {
		t.Fatalf("watermarks on the new instance %v, want 0_0=9000 0_1=4000 (resumed, not 500/600)", w)
	}
	st := app2.a.Watermarks()
	if len(st) != 2 || st[0].Inputs[0].MaxEvent.UnixMilli() != 9000 {
		t.Fatalf("status %+v, want input ev-0 with max event 9000", st)
	}
	if err := app2.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestWatermarkOfAbortedTransactionNotResumed: under ExactlyOnce a
// transaction that aborts carries its watermark away with it. Records up
// to 2000 are committed; then a record of event time 50000 is processed in
// a transaction that aborts (its output is too large for the cluster, a
// fatal error). The next owner (fresh state) resumes 2000.
func TestWatermarkOfAbortedTransactionNotResumed(t *testing.T) {
	b := startBrokerFor(t, ExactlyOnce)
	b.createTopic("ev", 1)
	b.createTopic("out", 1)
	topo := func(bl *Builder) {
		MapValues(From(bl, "ev", String(), String()), func(r Record[string, string]) (string, error) {
			if r.Value == "50000" {
				return strings.Repeat("x", 2<<20), nil // over the producer's max batch size: the produce fails
			}
			return r.Value, nil
		}).To("out", String(), String())
	}
	opts := []Opt{testLogger(t), Delivery(ExactlyOnce), CommitInterval(50 * time.Millisecond)}
	app1 := b.run("wm-abort", topo, append(opts, StateDir(t.TempDir()))...)
	produceAt(t, b, "ev", [2]int64{0, 1000}, [2]int64{0, 2000})
	b.waitForIso("out", true, 30*time.Second, func(r []*kgo.Record) bool { return len(r) == 2 })
	waitWatermarks(t, app1.a, 30*time.Second, "committed", func(w map[string]int64) bool { return w["0_0"] == 2000 })
	produceAt(t, b, "ev", [2]int64{0, 50000})
	select {
	case err := <-app1.done:
		app1.once.Do(func() { app1.err = err })
		if err == nil {
			t.Fatal("the App stopped without the produce error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the oversized output did not stop the App")
	}
	if n := counterValue(app1.a.metrics.txnAborts); n < 1 {
		t.Fatalf("%v transactions aborted, want the one of event time 50000", n)
	}

	// The group's committed offset carries the last committed watermark.
	if got := committedWatermark(t, b, "wm-abort", "ev", 0); got != 2000 {
		t.Fatalf("committed watermark %d, want 2000 (not the aborted 50000)", got)
	}
	// The next owner (fresh state) resumes it: seen before its first
	// round ends (the round waits on release).
	release := make(chan struct{})
	app2 := b.run("wm-abort", func(bl *Builder) {
		From(bl, "ev", String(), String()).Peek(func(Record[string, string]) { <-release }).
			Filter(func(r Record[string, string]) (bool, error) { return r.Value != "50000", nil }).
			To("out", String(), String())
	}, append(opts, StateDir(t.TempDir()))...)
	tasks := waitWatermarks(t, app2.a, 30*time.Second, "next owner", func(w map[string]int64) bool { _, ok := w["0_0"]; return ok })
	close(release)
	if tasks["0_0"] != 2000 {
		t.Fatalf("next owner's watermark %d, want the committed 2000", tasks["0_0"])
	}
	waitWatermarks(t, app2.a, 30*time.Second, "after the redone record", func(w map[string]int64) bool { return w["0_0"] == 50000 })
	if err := app2.stop(); err != nil {
		t.Fatal(err)
	}
}

// committedWatermark returns the task watermark in the commit metadata of
// the group's offset of topic/partition (Min: none).
func committedWatermark(t *testing.T, b *testBroker, group, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := resp.Lookup(topic, partition)
	if !ok {
		return watermark.Min
	}
	enc, ok := strings.CutPrefix(o.Metadata, commitMetaPrefix)
	if !ok {
		t.Fatalf("commit metadata %q is no watermark state", o.Metadata)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := watermark.New(watermark.Config{})
	tr.AddSource(topic, partition, time.Time{})
	if err := tr.Restore(raw, time.Time{}); err != nil {
		t.Fatal(err)
	}
	return tr.Watermark()
}

// keyByCount re-keys "ev" by value and counts: sub-topology 0 (as many
// tasks as "ev" has partitions) writes "<app>-n-repartition", sub-topology
// 1 reads it.
func keyByCount(b *Builder) {
	Count(GroupBy(From(b, "ev", String(), String()), func(r Record[string, string]) (string, error) { return r.Value, nil },
		Codecs(String(), String())), StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To("out", String(), Int64())
}

// TestWatermarkThroughRepartitionIsMinOverWriters: three upstream tasks
// with watermarks 10000, 5000 and 7000 write a repartition topic; every
// downstream task's watermark is their minimum, 5000, and follows it when
// the slowest writer advances. Markers are no data: the counts are the
// records', nothing reaches the dead-letter topic. Under ExactlyOnce the
// markers are part of the transactions (read_committed readers see them).
func TestWatermarkThroughRepartitionIsMinOverWriters(t *testing.T) {
	guarantees(t, func(t *testing.T, g Guarantee) {
		b := startBrokerFor(t, g)
		b.createTopic("ev", 3)
		b.createTopic("out", 3)
		app := b.run("wm-rep", keyByCount, testLogger(t), Delivery(g), StateDir(t.TempDir()),
			CommitInterval(50*time.Millisecond), WatermarkMarkers(10*time.Millisecond))
		produceAt(t, b, "ev", [2]int64{0, 10000}, [2]int64{1, 5000}, [2]int64{2, 7000}, [2]int64{0, 9000})
		w := waitWatermarks(t, app.a, 30*time.Second, "downstream = min", func(w map[string]int64) bool {
			return w["1_0"] == 5000 && w["1_1"] == 5000 && w["1_2"] == 5000
		})
		if w["0_0"] != 10000 || w["0_1"] != 5000 || w["0_2"] != 7000 {
			t.Fatalf("upstream watermarks %v, want 10000, 5000, 7000", w)
		}
		for _, st := range app.a.Watermarks() {
			if strings.HasPrefix(st.Task, "1_") && (len(st.Inputs) != 1 || st.Inputs[0].Writers != 3) {
				t.Fatalf("downstream %s inputs %+v, want one repartition input with 3 writers", st.Task, st.Inputs)
			}
		}
		produceAt(t, b, "ev", [2]int64{1, 8000})
		waitWatermarks(t, app.a, 30*time.Second, "slowest writer advanced", func(w map[string]int64) bool {
			return w["1_0"] == 7000 && w["1_1"] == 7000 && w["1_2"] == 7000
		})
		out := b.waitForIso("out", g == ExactlyOnce, 30*time.Second, func(r []*kgo.Record) bool { return len(r) >= 5 })
		counts := latest(t, out)
		for _, v := range []string{"10000", "5000", "7000", "9000", "8000"} {
			if counts[v] != 1 {
				t.Fatalf("counts %v, want 1 per value (markers are not data)", counts)
			}
		}
		if len(counts) != 5 {
			t.Fatalf("counts %v: keys beyond the 5 records", counts)
		}
		rep := b.read("wm-rep-n-repartition", g == ExactlyOnce)
		markers := 0
		for _, r := range rep {
			if _, ok, err := ParseWatermarkMarker(r.Headers); ok {
				if err != nil || r.Key != nil || r.Value != nil {
					t.Fatalf("marker %+v: %v", r, err)
				}
				markers++
			}
		}
		if markers < 9 {
			t.Fatalf("%d markers in the repartition topic, want at least one per writer and partition", markers)
		}
		if dlq := b.readAll("wm-rep.dlq"); len(dlq) != 0 {
			t.Fatalf("%d dead letters, want none", len(dlq))
		}
		if counterValue(app.a.metrics.markersIn) == 0 || counterValue(app.a.metrics.markersOut) == 0 {
			t.Fatal("marker metrics not counted")
		}
		if d := app.a.Describe(); !strings.Contains(d, "writers 3 (0 idle)") || !strings.Contains(d, "task 1_2 watermark 1970-01-01T00:00:07Z") {
			t.Fatalf("Describe lacks the watermarks:\n%s", d)
		}
		if err := app.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// manualClock is a processing clock only the test moves (Sleep returns at
// once without moving it: retries are not part of these tests).
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestIdleInputReleasesWatermarkThroughRepartition: of two upstream tasks
// only one gets records; the other's input holds everything downstream at
// "no watermark" — however long in real time — until the App's processing
// clock passes the idle timeout: then that writer's marker says idle and
// the downstream watermark is the active writer's.
func TestIdleInputReleasesWatermarkThroughRepartition(t *testing.T) {
	b := startBroker(t)
	b.createTopic("ev", 2)
	b.createTopic("out", 2)
	clk := &manualClock{now: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)}
	app := b.run("wm-idle", keyByCount, testLogger(t), StateDir(t.TempDir()), ProcessingClock(clk),
		Watermarks(0, 10*time.Second), CommitInterval(50*time.Millisecond))
	produceAt(t, b, "ev", [2]int64{0, 4000}, [2]int64{0, 5000})
	// Both records went through both sub-topologies, writer 0's markers
	// reached both downstream partitions (outputs wait for a commit, which
	// the frozen clock does not time).
	deadline := time.Now().Add(30 * time.Second)
	for counterValue(app.a.metrics.recordsIn) < 4 || counterValue(app.a.metrics.markersIn) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("handled %v records and %v markers, want 4 and 2", counterValue(app.a.metrics.recordsIn),
				counterValue(app.a.metrics.markersIn))
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitWatermarks(t, app.a, 30*time.Second, "upstream", func(w map[string]int64) bool { return w["0_0"] == 5000 })
	time.Sleep(1500 * time.Millisecond) // rounds go on; the processing clock does not
	w := watermarksOf(app.a)
	if w["0_1"] != watermark.Min || w["1_0"] != watermark.Min || w["1_1"] != watermark.Min {
		t.Fatalf("watermarks %v: the empty partition ev-1 must hold 0_1 and, through its markers, 1_0 and 1_1", w)
	}
	clk.add(10 * time.Second)
	waitWatermarks(t, app.a, 30*time.Second, "idle released", func(w map[string]int64) bool {
		return w["1_0"] == 5000 && w["1_1"] == 5000
	})
	for _, st := range app.a.Watermarks() {
		if st.Task == "0_1" && (len(st.Inputs) != 1 || !st.Inputs[0].Idle) {
			t.Fatalf("0_1 inputs %+v, want ev-1 idle", st.Inputs)
		}
		// ev-0 went quiet as long: both writers are idle by now, and the
		// watermark is the largest they reached (everything was seen).
		if st.Task == "1_0" && (st.Inputs[0].IdleWriters < 1 || st.Lag != clk.Now().Sub(time.UnixMilli(5000))) {
			t.Fatalf("1_0 %+v, want idle writers and lag = clock - 5000ms", st)
		}
	}
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestWatermarkSurvivesRebalance: a second instance joins and takes one
// of the first instance's tasks (cooperative rebalance: the task is
// committed on revocation, or at its last transaction); the moved task
// resumes its watermark on the new instance, late records do not take it
// back.
func TestWatermarkSurvivesRebalance(t *testing.T) {
	guarantees(t, func(t *testing.T, g Guarantee) {
		b := startBrokerFor(t, g)
		b.createTopic("ev", 2)
		b.createTopic("out", 2)
		opts := []Opt{testLogger(t), Delivery(g), CommitInterval(50 * time.Millisecond)}
		app1 := b.run("wm-reb", passTopology, append(opts, StateDir(t.TempDir()))...)
		produceAt(t, b, "ev", [2]int64{0, 9000}, [2]int64{1, 4000})
		waitWatermarks(t, app1.a, 30*time.Second, "first instance", func(w map[string]int64) bool {
			return w["0_0"] == 9000 && w["0_1"] == 4000
		})
		app2 := b.run("wm-reb", passTopology, append(opts, StateDir(t.TempDir()))...)
		moved := waitWatermarks(t, app2.a, 60*time.Second, "a task moved", func(w map[string]int64) bool { return len(w) == 1 })
		waitWatermarks(t, app1.a, 60*time.Second, "first instance kept one", func(w map[string]int64) bool { return len(w) == 1 })
		produceAt(t, b, "ev", [2]int64{0, 500}, [2]int64{1, 600})
		b.waitForIso("out", g == ExactlyOnce, 30*time.Second, func(r []*kgo.Record) bool { return len(r) == 4 })
		time.Sleep(200 * time.Millisecond) // the round that handled them ended
		all := watermarksOf(app1.a)
		for id, wm := range watermarksOf(app2.a) {
			all[id] = wm
		}
		if all["0_0"] != 9000 || all["0_1"] != 4000 {
			t.Fatalf("watermarks after the rebalance %v (moved: %v), want 0_0=9000 0_1=4000", all, moved)
		}
		for _, r := range []*runningApp{app2, app1} {
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestMalformedCommitMetadataIgnored: commit metadata that claims to be a
// watermark state but does not decode (another tool wrote it, or it was
// cut) is logged and ignored: the task starts from its records.
func TestMalformedCommitMetadataIgnored(t *testing.T) {
	b := startBroker(t)
	b.createTopic("ev", 2)
	b.createTopic("out", 2)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "ev", Partition: 0, At: 0, LeaderEpoch: -1, Metadata: commitMetaPrefix + "!!not base64"})
	offs.Add(kadm.Offset{Topic: "ev", Partition: 1, At: 0, LeaderEpoch: -1, Metadata: commitMetaPrefix + "AQID"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := b.adm.CommitOffsets(ctx, "wm-bad", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	app := b.run("wm-bad", passTopology, testLogger(t), StateDir(t.TempDir()), CommitInterval(50*time.Millisecond))
	produceAt(t, b, "ev", [2]int64{0, 700}, [2]int64{1, 800})
	waitWatermarks(t, app.a, 30*time.Second, "from the records", func(w map[string]int64) bool {
		return w["0_0"] == 700 && w["0_1"] == 800
	})
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	if got := committedWatermark(t, b, "wm-bad", "ev", 1); got != 800 {
		t.Fatalf("committed watermark %d, want 800 (replaced)", got)
	}
}

// TestWatermarkCommittedWithoutRecords: a task whose watermark moves in a
// round that polled nothing for it (its idle input timed out on a tick)
// commits the new watermark at its unchanged offsets — under ExactlyOnce
// in a transaction that polled nothing at all.
func TestWatermarkCommittedWithoutRecords(t *testing.T) {
	guarantees(t, func(t *testing.T, g Guarantee) {
		b := startBrokerFor(t, g)
		b.createTopic("a", 1)
		b.createTopic("b", 1)
		b.createTopic("out", 1)
		clk := &manualClock{now: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)}
		topo := func(bl *Builder) { // sub-topology 0 reads a and b and writes a repartition topic (ticks)
			in := From(bl, "a", String(), String()).Merge(From(bl, "b", String(), String()))
			Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "n", TTL: time.Hour}).
				ToStream().To("out", String(), Int64())
		}
		app := b.run("wm-tick", topo, testLogger(t), Delivery(g), StateDir(t.TempDir()), ProcessingClock(clk),
			Watermarks(0, 10*time.Second), CommitInterval(50*time.Millisecond))
		produceAt(t, b, "a", [2]int64{0, 5000})
		// The clock times commits and transactions: move it (by less than
		// the idle timeout) until the record went through.
		deadline := time.Now().Add(30 * time.Second)
		for moved := time.Duration(0); moved < 2*time.Second || len(b.readAll("out")) == 0; moved += 100 * time.Millisecond {
			if time.Now().After(deadline) || moved > 8*time.Second {
				t.Fatalf("the record of a did not go through (clock moved %v)", moved)
			}
			clk.add(100 * time.Millisecond)
			time.Sleep(50 * time.Millisecond)
		}
		if got := committedWatermark(t, b, "wm-tick", "a", 0); got != watermark.Min {
			t.Fatalf("committed watermark before b idles %d, want none (b holds it)", got)
		}
		clk.add(10 * time.Second) // b idle: 0_0's watermark moves on a tick
		deadline = time.Now().Add(30 * time.Second)
		for committedWatermark(t, b, "wm-tick", "b", 0) != 5000 {
			if time.Now().After(deadline) {
				t.Fatalf("b-0's committed watermark %d, want 5000 (b has no records: committed at its offset)",
					committedWatermark(t, b, "wm-tick", "b", 0))
			}
			clk.add(100 * time.Millisecond)
			time.Sleep(50 * time.Millisecond)
		}
		if err := app.stop(); err != nil {
			t.Fatal(err)
		}
	})
}
