package ilog

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLog records each Append; gate, when set, holds every Append until
// a value is sent on it (so writes pile up behind a slow one).
type fakeLog struct {
	mu      sync.Mutex
	appends []appendCall
	end     int64
	gate    chan struct{}
	entered chan struct{}
	err     error
}

type appendCall struct {
	data    string
	durable bool
}

func (f *fakeLog) append(b []byte, durable bool) (int64, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appends = append(f.appends, appendCall{string(b), durable})
	if f.err != nil {
		return -1, f.err
	}
	base := f.end
	f.end += int64(len(b)) // one "record" per byte in these tests
	return base, nil
}

func (f *fakeLog) calls() []appendCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]appendCall(nil), f.appends...)
}

type result struct {
	name string
	base int64
	err  error
}

// harness runs a Writer whose Deliver feeds an owner loop simulated by a
// channel the test reads.
func harness(t *testing.T, f *fakeLog) (*Writer, chan func(), chan struct{}) {
	events := make(chan func(), 16)
	quit := make(chan struct{})
	w := New(Options{
		Append: f.append,
		Deliver: func(fn func()) {
			select {
			case events <- fn:
			case <-quit:
			}
		},
	})
	go w.Run()
	return w, events, quit
}

func next(t *testing.T, events chan func()) {
	t.Helper()
	select {
	case fn := <-events:
		fn()
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
}

func TestCoalescesInQueueOrder(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{}), entered: make(chan struct{}, 8)}
	w, events, quit := harness(t, f)
	defer func() { close(quit); w.Stop() }()
	var got []result
	w1 := func(name string, durable bool) Write {
		return Write{Batch: []byte(name), Records: len(name), Durable: durable, Done: func(base int64, err error) {
			got = append(got, result{name, base, err})
		}}
	}
	w.Enqueue(w1("a", false))
	<-f.entered // the first append is in progress; the next writes pile up
	w.Enqueue(w1("bb", false))
	w.Enqueue(Write{Batch: []byte("x"), Records: 1}) // no Done
	w.Enqueue(w1("ccc", true))
	w.Enqueue(w1("d", false))
	f.gate <- struct{}{}
	next(t, events)
	<-f.entered
	f.gate <- struct{}{}
	next(t, events)
	want := []appendCall{{"a", false}, {"bbxcccd", true}}
	if c := f.calls(); len(c) != 2 || c[0] != want[0] || c[1] != want[1] {
		t.Fatalf("appends %+v, want %+v", c, want)
	}
	wantRes := []result{{"a", 0, nil}, {"bb", 1, nil}, {"ccc", 4, nil}, {"d", 7, nil}}
	if len(got) != len(wantRes) {
		t.Fatalf("results %+v", got)
	}
	for i := range got {
		if got[i] != wantRes[i] {
			t.Fatalf("result %d = %+v, want %+v", i, got[i], wantRes[i])
		}
	}
}

func TestErrorReachesEveryWriteOfTheFlush(t *testing.T) {
	boom := errors.New("disk full")
	f := &fakeLog{gate: make(chan struct{}), entered: make(chan struct{}, 8)}
	var onErr []int
	events := make(chan func(), 4)
	w := New(Options{
		Append:  f.append,
		Deliver: func(fn func()) { events <- fn },
		OnError: func(n int, err error) {
			if !errors.Is(err, boom) {
				t.Errorf("OnError got %v", err)
			}
			onErr = append(onErr, n)
		},
	})
	go w.Run()
	defer w.Stop()
	var errs []error
	done := func(_ int64, err error) { errs = append(errs, err) }
	w.Enqueue(Write{Batch: []byte("a"), Records: 1, Durable: true, Done: done})
	<-f.entered
	f.mu.Lock()
	f.err = boom
	f.mu.Unlock()
	w.Enqueue(Write{Batch: []byte("b"), Records: 1, Durable: true, Done: done})
	w.Enqueue(Write{Batch: []byte("c"), Records: 1, Durable: true, Done: done})
	f.gate <- struct{}{}
	<-f.entered
	f.gate <- struct{}{}
	next(t, events)
	next(t, events)
	if len(errs) != 3 || !errors.Is(errs[0], boom) || !errors.Is(errs[1], boom) || !errors.Is(errs[2], boom) {
		// The first append ran before the error was set but returned after.
		t.Fatalf("errors %v", errs)
	}
	if len(onErr) != 2 || onErr[0] != 1 || onErr[1] != 2 {
		t.Fatalf("OnError calls %v", onErr)
	}
}

func TestStopAndDrainAppendsWhatIsQueued(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{}), entered: make(chan struct{}, 8)}
	w, _, quit := harness(t, f)
	ran := false
	w.Enqueue(Write{Batch: []byte("a"), Records: 1})
	<-f.entered
	w.Enqueue(Write{Batch: []byte("b"), Records: 1, Done: func(int64, error) { ran = true }})
	w.Enqueue(Write{Batch: []byte("c"), Records: 1, Durable: true})
	close(quit)                         // the owner's loop is gone: deliveries are dropped
	w.once.Do(func() { close(w.quit) }) // Stop has begun before the flush returns
	stopped := make(chan struct{})
	var n int
	var err error
	go func() { n, err = w.StopAndDrain(); close(stopped) }()
	f.gate <- struct{}{} // the in-progress flush finishes; Run sees quit
	<-f.entered          // the drain's append
	f.gate <- struct{}{}
	<-stopped
	if err != nil || n != 2 {
		t.Fatalf("drain: %d writes, %v", n, err)
	}
	if c := f.calls(); len(c) != 2 || c[0] != (appendCall{"a", false}) || c[1] != (appendCall{"bc", true}) {
		t.Fatalf("appends %+v", c)
	}
	if ran {
		t.Fatal("Done ran for a drained write")
	}
	if n, err := w.StopAndDrain(); n != 0 || err != nil {
		t.Fatalf("second drain: %d, %v", n, err)
	}
}

func TestStopLeavesQueuedWrites(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{}), entered: make(chan struct{}, 8)}
	w, _, quit := harness(t, f)
	w.Enqueue(Write{Batch: []byte("a"), Records: 1, Durable: true})
	<-f.entered
	w.Enqueue(Write{Batch: []byte("b"), Records: 1, Durable: true})
	close(quit)
	w.once.Do(func() { close(w.quit) }) // Stop has begun before the flush returns
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	f.gate <- struct{}{}
	<-stopped
	w.Stop() // idempotent
	if c := f.calls(); len(c) != 1 || c[0].data != "a" {
		t.Fatalf("appends after Stop %+v", c)
	}
}
