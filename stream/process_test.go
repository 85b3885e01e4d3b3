package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sessionProc counts a key's events in a store and, 10 s of event time
// after each, emits "<key>:<count>@<fire ms>" and forgets the key (an
// event-time timer "flush", moved by every event). A "cancel" event deletes
// the key's timer; a "ping" event sets a processing-time timer one minute
// ahead that emits "<key>:ping". OnTimer fails for key "bad".
func sessionProc(b *Builder, src Stream[string, string], opts ...CodecOpt[string, string]) Stream[string, string] {
	return sessionProcNamed(src, "sessions", "counts", opts...)
}

// sessionProcNamed is sessionProc as the operator name, with its count
// store store.
func sessionProcNamed(src Stream[string, string], name, store string, opts ...CodecOpt[string, string]) Stream[string, string] {
	counts := KeyValueStore[string, int64](StoreConfig{Name: store, TTL: time.Hour})
	return Process(src, ProcessConfig{Name: name, Stores: []ProcessStore{counts}},
		Processor[string, string, string, string]{
			OnRecord: func(c *ProcessContext[string, string, string], r Record[string, string]) error {
				switch r.Value {
				case "noop":
					return nil
				case "cancel":
					return c.DeleteEventTimer(r.Key, "flush")
				case "ping":
					return c.SetProcessingTimer(r.Key, "ping", c.Now().Add(time.Minute))
				}
				n, _, err := counts.Get(c, r.Key)
				if err != nil {
					return err
				}
				if err := counts.Put(c, r.Key, n+1); err != nil {
					return err
				}
				return c.SetEventTimer(r.Key, "flush", r.Timestamp.Add(10*time.Second))
			},
			OnTimer: func(c *ProcessContext[string, string, string], tm Timer[string]) error {
				if tm.Key == "bad" {
					return errors.New("bad key")
				}
				if tm.Domain == ProcessingTimer {
					return c.Forward(Record[string, string]{Key: tm.Key, Value: tm.Key + ":ping"})
				}
				n, found, err := counts.Get(c, tm.Key)
				if err != nil || !found {
					return fmt.Errorf("timer of %s: count found %v: %v", tm.Key, found, err)
				}
				if err := counts.Delete(c, tm.Key); err != nil {
					return err
				}
				if !c.Meta().Timestamp.Equal(tm.Time) {
					return fmt.Errorf("meta timestamp %v, want the timer's %v", c.Meta().Timestamp, tm.Time)
				}
				return c.Forward(Record[string, string]{Key: tm.Key,
					Value: fmt.Sprintf("%s:%d@%d", tm.Key, n, tm.Time.UnixMilli())})
			},
		}, opts...)
}

func newSessionDriver(t *testing.T, parts map[string]int32, opts ...Opt) *Driver {
	t.Helper()
	b := NewBuilder()
	sessionProc(b, From(b, "events", String(), String())).To("out", String(), String())
	d, err := NewDriver("proc", b, parts, append([]Opt{StateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func pipeKV(t *testing.T, d *Driver, topic, key, value string, ms int64) {
	t.Helper()
	if _, err := d.Pipe(topic, []byte(key), []byte(value), time.UnixMilli(ms)); err != nil {
		t.Fatal(err)
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
}

func outValues(d *Driver, topic string) []string {
	var out []string
	for _, r := range d.Records(topic) {
		out = append(out, string(r.Value))
	}
	return out
}

func TestProcessEventTimersFireInOrderOnWatermark(t *testing.T) {
	d := newSessionDriver(t, nil)
	pipeKV(t, d, "events", "b", "e", 1000) // timer b@11000
	pipeKV(t, d, "events", "a", "e", 0)    // timer a@10000 (the watermark stays at 1000)
	pipeKV(t, d, "events", "c", "e", 2000) // timer c@12000
	pipeKV(t, d, "events", "x", "e", 2500) // timer x@12500 ...
	pipeKV(t, d, "events", "x", "cancel", 2600)
	pipeKV(t, d, "events", "a", "e", 3000) // a moves to 13000, count 2
	if got := outValues(d, "out"); len(got) != 0 {
		t.Fatalf("fired before the watermark reached a timer: %v", got)
	}
	pipeKV(t, d, "events", "z", "e", 11000) // the watermark reaches 11000: b only
	if got, want := outValues(d, "out"), []string{"b:1@11000"}; !slices.Equal(got, want) {
		t.Fatalf("at watermark 11000: %v, want %v", got, want)
	}
	pipeKV(t, d, "events", "z", "cancel", 30000) // c, a; x was deleted; z cancelled
	want := []string{"b:1@11000", "c:1@12000", "a:2@13000"}
	if got := outValues(d, "out"); !slices.Equal(got, want) {
		t.Fatalf("at watermark 30000: %v, want %v", got, want)
	}
	for i, r := range d.Records("out")[1:] {
		if ms := []int64{12000, 13000}[i]; r.Timestamp.UnixMilli() != ms {
			t.Errorf("output %d timestamp %d, want the timer's %d", i+1, r.Timestamp.UnixMilli(), ms)
		}
	}
	// The fired timers and the forgotten counts are gone from the stores
	// and their changelogs end with tombstones.
	tk, err := d.task(taskID{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{"sessions-timers", "counts"} {
		n := 0
		if err := tk.db.Scan(store, nil, nil, func(k, _ []byte, _ int64) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if store == "counts" && n != 2 { // x's and z's counts stay (their timers were deleted)
			t.Errorf("store %s holds %d keys, want 2 (x, z)", store, n)
		}
		if store == "sessions-timers" && n != 0 {
			t.Errorf("store %s holds %d keys after every timer fired or was deleted", store, n)
		}
	}
	if len(d.Records("proc-sessions-timers-changelog")) == 0 {
		t.Error("no changelog records for the timer store")
	}
	if got := d.Records(DLQTopic("proc")); len(got) != 0 {
		t.Errorf("dead letters: %v", got)
	}
}

func TestProcessProcessingTimers(t *testing.T) {
	d := newSessionDriver(t, nil)
	pipeKV(t, d, "events", "p1", "ping", 0) // fires at epoch + 1 min
	if err := d.AdvanceProcessingTime(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	pipeKV(t, d, "events", "p2", "ping", 0) // fires at epoch + 1.5 min
	if err := d.AdvanceProcessingTime(29 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := outValues(d, "out"); len(got) != 0 {
		t.Fatalf("fired before the clock reached a timer: %v", got)
	}
	if err := d.AdvanceProcessingTime(time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := outValues(d, "out"), []string{"p1:ping"}; !slices.Equal(got, want) {
		t.Fatalf("at 1 min: %v, want %v", got, want)
	}
	if err := d.AdvanceProcessingTime(time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, want := outValues(d, "out"), []string{"p1:ping", "p2:ping"}; !slices.Equal(got, want) {
		t.Fatalf("after an hour: %v, want %v", got, want)
	}
	if err := d.AdvanceProcessingTime(time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := outValues(d, "out"); len(got) != 2 {
		t.Fatalf("a timer fired twice: %v", got)
	}
}

// Timers are keyed state: a restart that loses the local stores restores
// them from the changelog, and they fire then; deleted and fired timers do
// not come back.
func TestProcessTimersSurviveRestart(t *testing.T) {
	d := newSessionDriver(t, map[string]int32{"events": 2})
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for i, k := range keys {
		pipeKV(t, d, "events", k, "e", int64(i*100))
		pipeKV(t, d, "events", k, "ping", int64(i*100))
	}
	pipeKV(t, d, "events", "b", "cancel", 700)
	// a's timer (10000) fires before the restart: its partition's
	// watermark passes it, no other timer's.
	pipeKV(t, d, "events", "a", "noop", 10050)
	if got, want := outValues(d, "out"), []string{"a:1@10000"}; !slices.Equal(got, want) {
		t.Fatalf("before the restart: %v, want %v", got, want)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := d.AdvanceProcessingTime(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	pings := outValues(d, "out")[1:]
	slices.Sort(pings)
	want := []string{"a:ping", "b:ping", "c:ping", "d:ping", "e:ping", "f:ping"}
	if !slices.Equal(pings, want) {
		t.Fatalf("processing-time timers after the restart: %v, want %v", pings, want)
	}
	// Event time (the watermark starts again from the records: the local
	// state is gone): every partition passes every timer.
	seen := map[int32]bool{}
	for i := 0; len(seen) < 2 && i < 100; i++ {
		o, err := d.Pipe("events", []byte(fmt.Sprint("n", i)), []byte("noop"), time.UnixMilli(60000))
		if err != nil {
			t.Fatal(err)
		}
		seen[o.Partition] = true
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	var fired []string
	for _, v := range outValues(d, "out") {
		if !strings.HasSuffix(v, "ping") {
			fired = append(fired, v)
		}
	}
	slices.Sort(fired)
	wantFired := []string{"a:1@10000", "c:1@10200", "d:1@10300", "e:1@10400", "f:1@10500"}
	if !slices.Equal(fired, wantFired) {
		t.Fatalf("event-time timers fired: %v, want %v (b deleted, a once)", fired, wantFired)
	}
}

// A callback that fails sends the timer to the dead-letter topic once; the
// timer is deleted and the others still fire.
func TestProcessFailingTimerDeadLettered(t *testing.T) {
	d := newSessionDriver(t, nil)
	pipeKV(t, d, "events", "bad", "e", 0)
	pipeKV(t, d, "events", "ok", "e", 1)
	pipeKV(t, d, "events", "z", "cancel", 20000)
	pipeKV(t, d, "events", "z", "cancel", 40000)
	if got, want := outValues(d, "out"), []string{"ok:1@10001"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	dl := d.Records(DLQTopic("proc"))
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1: %v", len(dl), dl)
	}
	h := map[string]string{}
	for _, x := range dl[0].Headers {
		h[x.Key] = string(x.Value)
	}
	if string(dl[0].Key) != "bad" || string(dl[0].Value) != "flush" || h[HeaderDLQOffset] != "-1" ||
		h[HeaderDLQOperator] != "process-sessions" || !strings.Contains(h[HeaderDLQReason], "bad key") {
		t.Errorf("dead letter key %q value %q headers %v", dl[0].Key, dl[0].Value, h)
	}
}

// After KeyBy the processor repartitions by the new key: each key's state
// and timers live in one task, whatever partition its records came from.
func TestProcessRepartitions(t *testing.T) {
	b := NewBuilder()
	src := From(b, "clicks", String(), String())
	// "user" is an event of user, "user/noop" a record that only moves time.
	byUser := KeyBy(src, func(r Record[string, string]) (string, error) {
		u, _, _ := strings.Cut(r.Value, "/")
		return u, nil
	})
	byUser = MapValues(byUser, func(r Record[string, string]) (string, error) {
		if _, v, ok := strings.Cut(r.Value, "/"); ok {
			return v, nil
		}
		return "e", nil
	})
	sessionProc(b, byUser).To("out", String(), String())
	d, err := NewDriver("proc", b, map[string]int32{"clicks": 3}, StateDir(t.TempDir()), Watermarks(0, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range 12 {
		// Page keys spread the users' records over the input partitions.
		pipeKV(t, d, "clicks", fmt.Sprintf("page%d", i), []string{"u1", "u2", "u3"}[i%3], int64(i*100))
	}
	// Every user's task passes the timers (inputs that stay behind time
	// out as idle).
	for i, u := range []string{"u1", "u2", "u3"} {
		pipeKV(t, d, "clicks", fmt.Sprintf("late%d", i), u+"/noop", 60000)
	}
	if err := d.AdvanceProcessingTime(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"u1", "u2", "u3"} {
		pipeKV(t, d, "clicks", fmt.Sprintf("late%d", i), u+"/noop", 60001)
	}
	got := outValues(d, "out")
	slices.Sort(got)
	want := []string{"u1:4@10900", "u2:4@11000", "u3:4@11100"}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if len(d.Records("proc-sessions-repartition")) == 0 {
		t.Error("nothing went through proc-sessions-repartition")
	}
}

func TestProcessDeclarationErrors(t *testing.T) {
	ok := Processor[string, string, string, string]{
		OnRecord: func(*ProcessContext[string, string, string], Record[string, string]) error { return nil },
	}
	tests := []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"no name", func(b *Builder) {
			Process(From(b, "in", String(), String()), ProcessConfig{}, ok)
		}, "process: name"},
		{"no handler", func(b *Builder) {
			Process(From(b, "in", String(), String()), ProcessConfig{Name: "p"}, Processor[string, string, string, string]{})
		}, "OnRecord is nil"},
		{"store without bound", func(b *Builder) {
			Process(From(b, "in", String(), String()), ProcessConfig{Name: "p",
				Stores: []ProcessStore{KeyValueStore[string, int64](StoreConfig{Name: "s"})}}, ok)
		}, "no bound"},
		{"store listed twice", func(b *Builder) {
			s := KeyValueStore[string, int64](StoreConfig{Name: "s", TTL: time.Hour})
			Process(From(b, "in", String(), String()), ProcessConfig{Name: "p", Stores: []ProcessStore{s, s}}, ok)
		}, "listed twice"},
		{"store codec", func(b *Builder) {
			Process(From(b, "in", String(), String()), ProcessConfig{Name: "p",
				Stores: []ProcessStore{KeyValueStore[string, chan int](StoreConfig{Name: "s", TTL: time.Hour})}}, ok)
		}, "value"},
		{"duplicate store across operators", func(b *Builder) {
			s := From(b, "in", String(), String())
			Count(GroupByKey(s), StoreConfig{Name: "s", TTL: time.Hour})
			Process(s, ProcessConfig{Name: "p",
				Stores: []ProcessStore{KeyValueStore[string, int64](StoreConfig{Name: "s", TTL: time.Hour})}}, ok)
		}, "declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuilder()
			tt.build(b)
			_, err := NewApp("app", b, Brokers("127.0.0.1:1"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewApp: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// A store not listed in the processor's config, and timers without OnTimer,
// are errors of the record (dead-lettered), not panics.
func TestProcessUndeclaredUse(t *testing.T) {
	other := KeyValueStore[string, int64](StoreConfig{Name: "other", TTL: time.Hour})
	b := NewBuilder()
	Process(From(b, "in", String(), String()), ProcessConfig{Name: "p"},
		Processor[string, string, string, string]{
			OnRecord: func(c *ProcessContext[string, string, string], r Record[string, string]) error {
				if r.Value == "timer" {
					return c.SetEventTimer(r.Key, "", r.Timestamp)
				}
				return other.Put(c, r.Key, 1)
			},
		}).To("out", String(), String())
	d, err := NewDriver("app", b, nil, StateDir(t.TempDir()), MaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipeKV(t, d, "in", "k", "store", 0)
	pipeKV(t, d, "in", "k", "timer", 0)
	dl := d.Records(DLQTopic("app"))
	if len(dl) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dl))
	}
	for i, want := range []string{"not declared", "OnTimer"} {
		reason := ""
		for _, h := range dl[i].Headers {
			if h.Key == HeaderDLQReason {
				reason = string(h.Value)
			}
		}
		if !strings.Contains(reason, want) {
			t.Errorf("dead letter %d: reason %q, want it to contain %q", i, reason, want)
		}
	}
}

// A timer set for a time the watermark already passed fires at the end of
// the round that set it, also after later timers fired (the scans start past
// those).
func TestProcessTimerInThePastFiresAtOnce(t *testing.T) {
	d := newSessionDriver(t, nil)
	pipeKV(t, d, "events", "a", "e", 0)     // a@10000
	pipeKV(t, d, "events", "b", "e", 30000) // fires a; b@40000
	pipeKV(t, d, "events", "c", "e", 5000)  // late: c@15000, already passed
	pipeKV(t, d, "events", "d", "e", 1000)  // late: d@11000
	want := []string{"a:1@10000", "c:1@15000", "d:1@11000"}
	if got := outValues(d, "out"); !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	pipeKV(t, d, "events", "z", "noop", 50000)
	if got, want := outValues(d, "out"), append(want, "b:1@40000"); !slices.Equal(got, want) {
		t.Fatalf("after the restart %v, want %v", got, want)
	}
}

// Forward carries the current record's headers and origin unless given.
func TestProcessForwardCarriesHeaders(t *testing.T) {
	b := NewBuilder()
	Process(From(b, "in", String(), String()), ProcessConfig{Name: "p"},
		Processor[string, string, string, string]{
			OnRecord: func(c *ProcessContext[string, string, string], r Record[string, string]) error {
				if err := c.Forward(Record[string, string]{Key: r.Key, Value: "carried"}); err != nil {
					return err
				}
				return c.Forward(Record[string, string]{Key: r.Key, Value: "own", Headers: []Header{{Key: "h", Value: []byte("own")}},
					Timestamp: time.UnixMilli(7)})
			},
		}).To("out", String(), String())
	d, err := NewDriver("app", b, nil, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Pipe("in", []byte("k"), []byte("v"), time.UnixMilli(5), Header{Key: "traceparent", Value: []byte("tp")}); err != nil {
		t.Fatal(err)
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	out := d.Records("out")
	if len(out) != 2 {
		t.Fatalf("%d outputs, want 2", len(out))
	}
	if h := out[0].Headers; len(h) != 1 || h[0].Key != "traceparent" || out[0].Timestamp.UnixMilli() != 5 {
		t.Errorf("carried: headers %v timestamp %v", h, out[0].Timestamp)
	}
	if h := out[1].Headers; len(h) != 1 || h[0].Key != "h" || out[1].Timestamp.UnixMilli() != 7 {
		t.Errorf("own: headers %v timestamp %v", h, out[1].Timestamp)
	}
}

// A timer fired in a round whose transaction aborts (ExactlyOnce: the
// task's writes are discarded and its records redone) fires again when the
// records are redone: its deletion was discarded with the round, and the
// timer scans start low enough to find it again.
func TestProcessTimerFiresAgainAfterAbort(t *testing.T) {
	bl := NewBuilder()
	sessionTopology(bl)
	var out []string
	capture := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		if r.Topic == "out" {
			out = append(out, string(r.Value))
		}
		promise(r, nil)
	}, false)
	a, err := NewApp("abort", bl, Brokers("127.0.0.1:1"), StateDir(t.TempDir()), capture)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := a.newTask(taskID{sub: 0, partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.close()
	ctx := context.Background()
	round := func(key string, ms, offset int64) {
		t.Helper()
		r := &kgo.Record{Topic: "events", Key: []byte(key), Value: []byte("e"), Offset: offset, Timestamp: time.UnixMilli(ms)}
		if err := tk.handle(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
	}
	round("a", 0, 0) // a@10000
	if err := tk.flushState(); err != nil {
		t.Fatal(err)
	}
	tk.beginRound()
	round("b", 20000, 1) // fires a; b@30000
	if want := []string{"a:1@10000"}; !slices.Equal(out, want) {
		t.Fatalf("before the abort: %v, want %v", out, want)
	}
	tk.abortRound()
	round("b", 20000, 1) // redone
	if err := tk.flushState(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a:1@10000", "a:1@10000"}; !slices.Equal(out, want) {
		t.Fatalf("after the redo: %v, want a's timer fired again", out)
	}
	round("z", 40000, 2)
	if want := []string{"a:1@10000", "a:1@10000", "b:1@30000"}; !slices.Equal(out, want) {
		t.Fatalf("at 40000: %v, want %v", out, want)
	}
}

// ProcessConfig.Retry replaces the App's error policy for OnRecord.
func TestProcessRetryPolicy(t *testing.T) {
	for _, tt := range []struct {
		retry *Retry
		want  int
	}{{nil, 3}, {&Retry{Attempts: 1}, 1}} {
		attempts := 0
		b := NewBuilder()
		Process(From(b, "in", String(), String()), ProcessConfig{Name: "p", Retry: tt.retry},
			Processor[string, string, string, string]{
				OnRecord: func(*ProcessContext[string, string, string], Record[string, string]) error {
					attempts++
					return Retriable(errors.New("flaky"))
				},
			}).To("out", String(), String())
		d, err := NewDriver("app", b, nil, StateDir(t.TempDir()), MaxAttempts(3))
		if err != nil {
			t.Fatal(err)
		}
		pipeKV(t, d, "in", "k", "v", 0)
		d.Close()
		if attempts != tt.want {
			t.Errorf("retry %v: %d attempts, want %d", tt.retry, attempts, tt.want)
		}
		if n := len(d.Records(DLQTopic("app"))); n != 1 {
			t.Errorf("retry %v: %d dead letters, want 1", tt.retry, n)
		}
	}
	b := NewBuilder()
	Process(From(b, "in", String(), String()), ProcessConfig{Name: "p", Retry: &Retry{Attempts: -1}},
		Processor[string, string, string, string]{
			OnRecord: func(*ProcessContext[string, string, string], Record[string, string]) error { return nil },
		})
	if _, err := NewApp("app", b, Brokers("127.0.0.1:1")); err == nil || !strings.Contains(err.Error(), "retry attempts") {
		t.Errorf("NewApp with Retry{Attempts: -1}: %v", err)
	}
}
