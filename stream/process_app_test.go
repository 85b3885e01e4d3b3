package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// keyFor returns a key the producer partitions to partition p of a topic
// of n partitions (murmur2).
func keyFor(topic string, p, n int32, prefix string) string {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for i := 0; ; i++ {
		k := fmt.Sprint(prefix, i)
		if int32(part.Partition(&kgo.Record{Key: []byte(k)}, int(n))) == p {
			return k
		}
	}
}

// advanceAll writes a "noop" record at ms to every partition of events: each
// task's watermark reaches ms.
func advanceAll(b *testBroker, parts int32, ms int64) {
	for p := range parts {
		b.produce(&kgo.Record{Topic: "events", Key: []byte(keyFor("events", p, parts, "adv")), Value: []byte("noop"),
			Timestamp: time.UnixMilli(ms)})
	}
}

func sessionTopology(b *Builder) {
	sessionProc(b, From(b, "events", String(), String())).To("out", String(), String())
}

// Under ExactlyOnce a fired timer's output appears exactly once: timers set
// by one incarnation (killed without a final commit) fire in the next one,
// restored on an empty state directory from the timer changelog; timers that
// fired before the kill do not fire again.
func TestProcessTimersExactlyOnceAcrossRestart(t *testing.T) {
	b := startBrokerFor(t, ExactlyOnce)
	const parts = 3
	b.createTopic("events", parts)
	b.createTopic("out", parts)
	opts := []Opt{testLogger(t), Delivery(ExactlyOnce), CommitInterval(30 * time.Millisecond)}
	base := int64(1_000_000)
	produceKeys := func(from, to int, ms int64) {
		for i := from; i < to; i++ {
			b.produce(&kgo.Record{Topic: "events", Key: []byte(key(i)), Value: []byte("e"), Timestamp: time.UnixMilli(ms)})
		}
	}
	outputs := func(n int) func([]*kgo.Record) bool {
		return func(rs []*kgo.Record) bool { return len(rs) >= n }
	}

	app1 := b.run("exact", sessionTopology, append(opts, StateDir(t.TempDir()))...)
	produceKeys(0, 10, base)
	advanceAll(b, parts, base+20_000) // k00..k09 fire at base+10s
	b.waitForIso("out", true, 30*time.Second, outputs(10))
	produceKeys(10, 20, base+30_000) // timers at base+40s, not yet due
	// The 10 timers set (2 entries each) committed: the changelog's live
	// entries (a key's last record not a tombstone). The 10 fired ones
	// left none (their tombstones, or nothing if the changelog's collapse
	// took them set and deleted between two flushes).
	b.waitForIso("exact-sessions-timers-changelog", true, 30*time.Second, func(rs []*kgo.Record) bool {
		live := map[string]bool{}
		for _, r := range rs {
			live[string(r.Key)] = r.Value != nil
		}
		n := 0
		for _, l := range live {
			if l {
				n++
			}
		}
		return n >= 20
	})
	if err := app1.kill(); err != nil {
		t.Fatalf("killed app: %v", err)
	}

	app2 := b.run("exact", sessionTopology, append(opts, StateDir(t.TempDir()))...)
	advanceAll(b, parts, base+50_000)
	recs := b.waitForIso("out", true, 30*time.Second, outputs(20))
	advanceAll(b, parts, base+90_000)
	// Whatever was still to fire has had its chance: the advance records
	// are handled once read_committed offsets pass them.
	time.Sleep(300 * time.Millisecond)
	if err := app2.stop(); err != nil {
		t.Fatalf("app2: %v", err)
	}
	recs = b.readCommitted("out")
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.Value)]++
	}
	for i := range 20 {
		fire := base + 10_000
		if i >= 10 {
			fire = base + 40_000
		}
		v := fmt.Sprintf("%s:1@%d", key(i), fire)
		if seen[v] != 1 {
			t.Errorf("%s: %d times in read_committed out, want exactly once", v, seen[v])
		}
	}
	if len(recs) != 20 {
		t.Errorf("%d outputs, want 20: %v", len(recs), seen)
	}
}

// A bounded run reads each input up to its end offsets at start — not the
// records appended while it runs — then fires every event-time timer, commits
// and returns; a second bounded run reads exactly what the first left.
func TestRunBoundedFiresTimersAtEndOfInput(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { runBoundedTest(t, g) })
	}
}

func runBoundedTest(t *testing.T, g Guarantee) {
	b := startBrokerFor(t, g)
	const parts = 3
	b.createTopic("events", parts)
	b.createTopic("out", parts)
	base := int64(5_000_000)
	var recs []*kgo.Record
	for i := range 60 { // 30 keys, 2 records each, all within 10 s: no timer fires before the end
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(key(i % 30)), Value: []byte("e"),
			Timestamp: time.UnixMilli(base + int64(i))})
	}
	b.produce(recs...)
	startEnds, err := b.adm.ListEndOffsets(context.Background(), "events")
	if err != nil {
		t.Fatal(err)
	}
	// Records appended while the run is on (after it listed its ends):
	// written from the first record's processing.
	var once sync.Once
	var appendErr atomic.Value
	build := func(bl *Builder) {
		src := From(bl, "events", String(), String()).Peek(func(Record[string, string]) {
			once.Do(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var extra []*kgo.Record
				for i := range 5 {
					extra = append(extra, &kgo.Record{Topic: "events", Key: []byte(fmt.Sprint("extra", i)),
						Value: []byte("e"), Timestamp: time.UnixMilli(base + 100)})
				}
				if err := b.cl.ProduceSync(ctx, extra...).FirstErr(); err != nil {
					appendErr.Store(err)
				}
			})
		})
		sessionProc(bl, src).To("out", String(), String())
	}
	run := func() *App {
		t.Helper()
		bl := NewBuilder()
		build(bl)
		a, err := NewApp("bounded", bl, testLogger(t), Brokers(b.seeds...), Delivery(g), StateDir(t.TempDir()),
			CommitInterval(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := a.RunBounded(ctx); err != nil {
			t.Fatalf("RunBounded: %v", err)
		}
		return a
	}

	a1 := run()
	if err, _ := appendErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(a1.metrics.recordsIn); got != 60 {
		t.Errorf("first run handled %v records, want the 60 below the end offsets at start", got)
	}
	out := b.readCommitted("out")
	var got []string
	for _, r := range out {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	var want []string
	for k := range 30 {
		// Each key's timer sits 10 s after its second record (k + 30).
		want = append(want, fmt.Sprintf("%s:2@%d", key(k), base+int64(k+30)+10_000))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("first run's outputs:\n%v\nwant every key's timer once:\n%v", got, want)
	}
	committed, err := b.adm.FetchOffsetsForTopics(context.Background(), "bounded", "events")
	if err != nil {
		t.Fatal(err)
	}
	startEnds.Each(func(o kadm.ListedOffset) {
		c, _ := committed.Lookup("events", o.Partition)
		if c.At != o.Offset {
			t.Errorf("partition %d: committed %d, want the end at start %d", o.Partition, c.At, o.Offset)
		}
	})

	a2 := run()
	if got := counterValue(a2.metrics.recordsIn); got != 5 {
		t.Errorf("second run handled %v records, want the 5 appended during the first", got)
	}
	var extra []string
	for _, r := range b.readCommitted("out")[0:] {
		if v := string(r.Value); strings.HasPrefix(v, "extra") {
			extra = append(extra, v)
		}
	}
	slices.Sort(extra)
	var wantExtra []string
	for i := range 5 {
		wantExtra = append(wantExtra, fmt.Sprintf("extra%d:1@%d", i, base+100+10_000))
	}
	if !slices.Equal(extra, wantExtra) {
		t.Errorf("second run's outputs %v, want %v", extra, wantExtra)
	}
}

// groupedSessions chains two session processors through a repartition: the
// first ends each key's session (its timer), the second counts the ended
// sessions per group "g<n % 3>" of key "k<n>" and ends the group's session
// 10 s after the last one. At the end of a bounded input the first
// sub-topology's timers fire first, and only then, once their outputs went
// through the repartition, the second's: each group's session ends once,
// with every key.
func groupedSessions(b *Builder) {
	ended := sessionProcNamed(From(b, "events", String(), String()), "keys", "key-counts")
	byGroup := KeyBy(ended, func(r Record[string, string]) (string, error) {
		var n int
		if _, err := fmt.Sscanf(r.Key, "k%d", &n); err != nil {
			return "", err
		}
		return fmt.Sprint("g", n%3), nil
	})
	sessionProcNamed(MapValues(byGroup, func(Record[string, string]) (string, error) { return "e", nil }),
		"groups", "group-counts").To("out", String(), String())
}

func TestRunBoundedEndsSubTopologiesInOrder(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerFor(t, g)
			b.createTopic("events", 3)
			b.createTopic("out", 3)
			base := int64(7_000_000)
			var recs []*kgo.Record
			for i := range 60 {
				recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(key(i % 30)), Value: []byte("e"),
					Timestamp: time.UnixMilli(base + int64(i))})
			}
			b.produce(recs...)
			bl := NewBuilder()
			groupedSessions(bl)
			a, err := NewApp("grouped", bl, testLogger(t), Brokers(b.seeds...), Delivery(g), StateDir(t.TempDir()),
				CommitInterval(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := a.RunBounded(ctx); err != nil {
				t.Fatalf("RunBounded: %v", err)
			}
			var got []string
			for _, r := range b.readCommitted("out") {
				got = append(got, string(r.Value))
			}
			checkGroupSessions(t, got, base)
		})
	}
}

// The Driver's EndOfInput ends the sub-topologies in the same order.
func TestDriverEndOfInputEndsSubTopologiesInOrder(t *testing.T) {
	bl := NewBuilder()
	groupedSessions(bl)
	d, err := NewDriver("grouped", bl, map[string]int32{"events": 3}, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	base := int64(7_000_000)
	for i := range 60 {
		if _, err := d.Pipe("events", []byte(key(i%30)), []byte("e"), time.UnixMilli(base+int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	checkGroupSessions(t, outValues(d, "out"), base)
}

// checkGroupSessions checks groupedSessions' outputs: each group's session
// once, with its 10 keys, ending 10 s after one of its keys' sessions (key
// k's ends at base+k+30+10s; which key's time depends on the order the
// repartition delivered them in).
func checkGroupSessions(t *testing.T, got []string, base int64) {
	t.Helper()
	slices.Sort(got)
	if len(got) != 3 {
		t.Fatalf("outputs %v, want one per group", got)
	}
	for g, v := range got {
		var gi, n int
		var at int64
		if _, err := fmt.Sscanf(v, "g%d:%d@%d", &gi, &n, &at); err != nil || gi != g || n != 10 {
			t.Errorf("output %q, want g%d:10@...", v, g)
			continue
		}
		if k := at - base - 20_000 - 30; k < 0 || k >= 30 || int(k)%3 != g {
			t.Errorf("output %q: the session ends 10 s after no key of group %d", v, g)
		}
	}
}

// UpTo bounds a run by time: each partition is read up to its first record
// at or after the timestamp; a later unbounded-by-time run reads the rest.
func TestRunBoundedUpTo(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 3)
	b.createTopic("out", 3)
	base := int64(9_000_000)
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(key(i % 10)), Value: []byte("e"),
			Timestamp: time.UnixMilli(base + int64(i)*1000)})
	}
	b.produce(recs...)
	run := func(opts ...BoundedOpt) *App {
		t.Helper()
		bl := NewBuilder()
		sessionTopology(bl)
		a, err := NewApp("upto", bl, testLogger(t), Brokers(b.seeds...), StateDir(t.TempDir()),
			CommitInterval(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := a.RunBounded(ctx, opts...); err != nil {
			t.Fatalf("RunBounded: %v", err)
		}
		return a
	}
	values := func() []string {
		var out []string
		for _, r := range b.readAll("out") {
			out = append(out, string(r.Value))
		}
		slices.Sort(out)
		return out
	}
	a1 := run(UpTo(time.UnixMilli(base + 20_000)))
	if got := counterValue(a1.metrics.recordsIn); got != 20 {
		t.Errorf("first run handled %v records, want the 20 before the time", got)
	}
	var want []string
	for k := range 10 {
		want = append(want, fmt.Sprintf("%s:2@%d", key(k), base+int64(k+10)*1000+10_000))
	}
	if got := values(); !slices.Equal(got, want) {
		t.Fatalf("first run: %v, want %v", got, want)
	}
	a2 := run()
	if got := counterValue(a2.metrics.recordsIn); got != 20 {
		t.Errorf("second run handled %v records, want the other 20", got)
	}
	for k := range 10 {
		want = append(want, fmt.Sprintf("%s:2@%d", key(k), base+int64(k+30)*1000+10_000))
	}
	slices.Sort(want)
	if got := values(); !slices.Equal(got, want) {
		t.Fatalf("after the second run: %v, want %v", got, want)
	}
}

// Processing-time timers of a running App fire when its ProcessingClock
// passes them, in rounds that poll nothing (ticks).
func TestProcessProcessingTimerOnApp(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 2)
	b.createTopic("out", 2)
	clk := newFakeClock()
	app := b.run("ticks", sessionTopology, testLogger(t), StateDir(t.TempDir()), ProcessingClock(clk),
		CommitInterval(20*time.Millisecond))
	defer app.stop()
	b.produce(&kgo.Record{Topic: "events", Key: []byte("p1"), Value: []byte("ping"), Timestamp: time.UnixMilli(1)},
		&kgo.Record{Topic: "events", Key: []byte("p2"), Value: []byte("ping"), Timestamp: time.UnixMilli(1)})
	deadline := time.Now().Add(30 * time.Second)
	for counterValue(app.a.metrics.recordsIn) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the pings were not processed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // tick rounds run; the clock has not moved
	if got := b.readAll("out"); len(got) != 0 {
		t.Fatalf("%d outputs before the clock reached the timers", len(got))
	}
	clk.Sleep(context.Background(), time.Minute)
	recs := b.waitFor("out", 30*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	if want := []string{"p1:ping", "p2:ping"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
}

// A bounded run over empty inputs returns at once with nothing written; one
// whose context ends first says so.
func TestRunBoundedEmptyAndInterrupted(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 2)
	b.createTopic("out", 2)
	newApp := func() *App {
		bl := NewBuilder()
		sessionTopology(bl)
		a, err := NewApp("empty", bl, testLogger(t), Brokers(b.seeds...), StateDir(t.TempDir()),
			CommitInterval(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := newApp().RunBounded(ctx); err != nil {
		t.Fatalf("RunBounded over empty inputs: %v", err)
	}
	if got := b.readAll("out"); len(got) != 0 {
		t.Fatalf("%d outputs from empty inputs", len(got))
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := newApp().RunBounded(done); err != ErrBoundedInterrupted {
		t.Fatalf("RunBounded with its context done: %v, want ErrBoundedInterrupted", err)
	}
}
