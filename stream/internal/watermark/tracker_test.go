package watermark

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newTracker(t *testing.T, bound, idle time.Duration) *Tracker {
	t.Helper()
	tr, err := New(Config{OutOfOrderness: bound, IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{OutOfOrderness: -time.Millisecond}, {OutOfOrderness: time.Microsecond}, {IdleTimeout: -1}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

func TestSourceBoundedOutOfOrderness(t *testing.T) {
	tr := newTracker(t, 10*time.Millisecond, 0)
	in := tr.AddSource("in", 0, t0)
	if got := tr.Advance(t0); got != Min {
		t.Fatalf("watermark before any record = %d, want Min", got)
	}
	steps := []struct {
		events []int64
		want   int64
	}{
		{[]int64{100}, 90},
		{[]int64{95, 80}, 90},         // out of order: max stays 100
		{[]int64{150, 120}, 140},      // max 150
		{nil, 140},                    // nothing new
		{[]int64{math.MinInt64}, 140}, // an absurd old time changes nothing
	}
	for i, s := range steps {
		for _, e := range s.events {
			tr.Observe(in, e)
		}
		if got := tr.Advance(at(time.Duration(i) * time.Second)); got != s.want {
			t.Fatalf("step %d: watermark %d, want %d", i, got, s.want)
		}
	}
}

func TestSaturation(t *testing.T) {
	tr := newTracker(t, time.Hour, 0)
	in := tr.AddSource("in", 0, t0)
	tr.Observe(in, math.MinInt64+5)
	if got := tr.Advance(t0); got != Min {
		t.Fatalf("watermark %d, want Min (saturated)", got)
	}
}

func TestMinOverSources(t *testing.T) {
	tr := newTracker(t, 0, 0)
	a := tr.AddSource("in", 0, t0)
	b := tr.AddSource("in", 1, t0)
	tr.Observe(a, 500)
	if got := tr.Advance(t0); got != Min {
		t.Fatalf("with a silent partition and no idle timeout: %d, want Min", got)
	}
	tr.Observe(b, 300)
	if got := tr.Advance(at(time.Hour)); got != 300 {
		t.Fatalf("watermark %d, want 300", got)
	}
	tr.Observe(b, 800)
	if got := tr.Advance(at(2 * time.Hour)); got != 500 {
		t.Fatalf("watermark %d, want 500", got)
	}
}

func TestIdleness(t *testing.T) {
	const idle = 5 * time.Second
	tr := newTracker(t, 0, idle)
	a := tr.AddSource("in", 0, t0)
	b := tr.AddSource("in", 1, t0)

	tr.Observe(a, 1000)
	if got := tr.Advance(at(4 * time.Second)); got != Min {
		t.Fatalf("b not idle yet: %d, want Min", got)
	}
	tr.Observe(a, 2000)
	if got := tr.Advance(at(5 * time.Second)); got != 2000 {
		t.Fatalf("b idle after 5s without records: %d, want 2000", got)
	}
	st := tr.Status()
	if st[0].Idle || !st[1].Idle || tr.IdleInputs() != 1 {
		t.Fatalf("status %+v, %d idle: want a active, b idle", st, tr.IdleInputs())
	}

	// b comes back behind the watermark: it holds the watermark where it is
	// (no going back), and advances it only as it catches up.
	tr.Observe(b, 1500)
	tr.Observe(a, 3000)
	if got := tr.Advance(at(6 * time.Second)); got != 2000 {
		t.Fatalf("b resumed at 1500: %d, want 2000 (held, not backwards)", got)
	}
	tr.Observe(b, 2500)
	if got := tr.Advance(at(7 * time.Second)); got != 2500 {
		t.Fatalf("b at 2500: %d, want 2500", got)
	}

	// a goes idle while b is active: b alone decides.
	tr.Observe(b, 2600)
	tr.Advance(at(11 * time.Second))
	tr.Observe(b, 2700)
	if got := tr.Advance(at(12 * time.Second)); got != 2700 {
		t.Fatalf("a idle since 6s (last record): %d, want 2700", got)
	}

	// Everything idle: the largest input watermark (a's 3000).
	if got := tr.Advance(at(20 * time.Second)); got != 3000 {
		t.Fatalf("all idle: %d, want 3000", got)
	}
}

func TestRepartitionWriters(t *testing.T) {
	const idle = 10 * time.Second
	tr := newTracker(t, 0, idle)
	in, err := tr.AddRepartition("app-by-zone-repartition", 4, 3, t0)
	if err != nil {
		t.Fatal(err)
	}
	mark := func(w uint32, wm int64, isIdle bool, now time.Time) {
		t.Helper()
		if err := tr.ObserveMarker(in, Marker{Writer: w, Writers: 3, Watermark: wm, Idle: isIdle}, now); err != nil {
			t.Fatal(err)
		}
	}
	tr.Observe(in, 1_000_000) // data records do not move a repartition input
	mark(0, 100, false, at(time.Second))
	mark(1, 200, false, at(time.Second))
	if got := tr.Advance(at(time.Second)); got != Min {
		t.Fatalf("writer 2 not heard from: %d, want Min", got)
	}
	mark(2, 150, false, at(2*time.Second))
	if got := tr.Advance(at(2 * time.Second)); got != 100 {
		t.Fatalf("min over writers: %d, want 100", got)
	}
	mark(0, 50, false, at(3*time.Second)) // an older marker: no going back
	mark(0, 300, false, at(3*time.Second))
	if got := tr.Advance(at(3 * time.Second)); got != 150 {
		t.Fatalf("min over writers: %d, want 150", got)
	}
	// Writer 2 says it is idle: it stops holding.
	mark(2, 150, true, at(4*time.Second))
	if got := tr.Advance(at(4 * time.Second)); got != 200 {
		t.Fatalf("writer 2 idle: %d, want 200", got)
	}
	// Writer 1 stalls: markers from 0 only; after the idle timeout writer 1
	// stops holding.
	mark(0, 400, false, at(10*time.Second))
	if got := tr.Advance(at(10 * time.Second)); got != 200 {
		t.Fatalf("writer 1 silent 9s: %d, want 200", got)
	}
	mark(0, 450, false, at(11*time.Second))
	if got := tr.Advance(at(11 * time.Second)); got != 450 {
		t.Fatalf("writer 1 silent 10s: %d, want 450", got)
	}
	st := tr.Status()[0]
	if st.Writers != 3 || st.IdleWriters != 2 || st.Idle || st.Watermark != 450 {
		t.Fatalf("status %+v", st)
	}
	// Writer 2 active again behind: holds at the current watermark.
	mark(2, 300, false, at(12*time.Second))
	mark(0, 500, false, at(12*time.Second))
	if got := tr.Advance(at(12 * time.Second)); got != 450 {
		t.Fatalf("writer 2 back at 300: %d, want 450", got)
	}
}

func TestRepartitionAndSource(t *testing.T) {
	tr := newTracker(t, 5*time.Millisecond, 0)
	src := tr.AddSource("in", 0, t0)
	rep, _ := tr.AddRepartition("rep", 0, 1, t0)
	tr.Observe(src, 105)
	if err := tr.ObserveMarker(rep, Marker{Writer: 0, Writers: 1, Watermark: 70}, t0); err != nil {
		t.Fatal(err)
	}
	if got := tr.Advance(t0); got != 70 {
		t.Fatalf("%d, want 70", got)
	}
	tr.ObserveMarker(rep, Marker{Writer: 0, Writers: 1, Watermark: 500}, t0)
	if got := tr.Advance(t0); got != 100 {
		t.Fatalf("%d, want 100", got)
	}
}

func TestMarkerErrors(t *testing.T) {
	tr := newTracker(t, 0, 0)
	src := tr.AddSource("in", 0, t0)
	rep, _ := tr.AddRepartition("rep", 0, 2, t0)
	var me *MarkerError
	if err := tr.ObserveMarker(src, Marker{Writer: 0, Writers: 1}, t0); !errors.As(err, &me) {
		t.Errorf("marker on a source: %v", err)
	}
	if err := tr.ObserveMarker(rep, Marker{Writer: 0, Writers: 3}, t0); !errors.As(err, &me) {
		t.Errorf("writer count mismatch: %v", err)
	}
	if err := tr.ObserveMarker(rep, Marker{Writer: 2, Writers: 2}, t0); !errors.As(err, &me) {
		t.Errorf("writer out of range: %v", err)
	}
	if _, err := tr.AddRepartition("rep", 1, 0, t0); err == nil {
		t.Error("AddRepartition with 0 writers accepted")
	}
	if got := tr.Advance(t0); got != Min {
		t.Errorf("rejected markers moved the watermark to %d", got)
	}
}

func TestStateRoundTripAndRestore(t *testing.T) {
	const idle = time.Minute
	tr := newTracker(t, 10*time.Millisecond, idle)
	a := tr.AddSource("in", 0, t0)
	rep, _ := tr.AddRepartition("rep", 3, 2, t0)
	tr.Observe(a, 1010)
	tr.ObserveMarker(rep, Marker{Writer: 0, Writers: 2, Watermark: 1200}, t0)
	tr.ObserveMarker(rep, Marker{Writer: 1, Writers: 2, Watermark: 1100, Idle: true}, t0)
	if got := tr.Advance(t0); got != 1000 {
		t.Fatalf("%d, want 1000", got)
	}
	saved := tr.AppendState(nil)

	// A new incarnation of the task: same inputs, restored.
	later := at(time.Hour)
	tr2 := newTracker(t, 10*time.Millisecond, idle)
	a2 := tr2.AddSource("in", 0, later)
	rep2, _ := tr2.AddRepartition("rep", 3, 2, later)
	if err := tr2.Restore(saved, later); err != nil {
		t.Fatal(err)
	}
	if got := tr2.Watermark(); got != 1000 {
		t.Fatalf("restored watermark %d, want 1000", got)
	}
	if got := tr2.Advance(later); got != 1000 {
		t.Fatalf("after restore: %d, want 1000 (idle timeouts restart at the restore)", got)
	}
	if !bytes.Equal(tr2.AppendState(nil), saved) {
		t.Fatalf("state after restore differs:\n%x\n%x", tr2.AppendState(nil), saved)
	}
	// Replayed records older than the saved state move nothing back.
	tr2.Observe(a2, 500)
	tr2.ObserveMarker(rep2, Marker{Writer: 0, Writers: 2, Watermark: 10}, later)
	if got := tr2.Advance(later); got != 1000 {
		t.Fatalf("after replay: %d, want 1000", got)
	}

	// Restored into a task whose upstream was resized and with a new input:
	// the watermark is kept, the new writers hold the input at the restored
	// watermark (never backwards).
	tr3 := newTracker(t, 10*time.Millisecond, idle)
	a3 := tr3.AddSource("in", 0, later)
	tr3.AddRepartition("rep", 3, 4, later)
	tr3.AddSource("other", 0, later)
	if err := tr3.Restore(saved, later); err != nil {
		t.Fatal(err)
	}
	tr3.Observe(a3, 5000)
	if got := tr3.Advance(later); got != 1000 {
		t.Fatalf("resized upstream: %d, want 1000", got)
	}
	if got := tr3.Status()[0].MaxEvent; got != 5000 {
		t.Fatalf("restored max event %d, want 5000", got)
	}
}

func TestStateCorruption(t *testing.T) {
	tr := newTracker(t, 0, 0)
	tr.AddSource("in", 0, t0)
	good := tr.AppendState(nil)
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		if err := tr.Restore(b, t0); !errors.Is(err, ErrState) {
			t.Errorf("flip in byte %d: err = %v, want ErrState", i, err)
		}
	}
	for n := 0; n < len(good); n++ {
		if err := tr.Restore(good[:n], t0); !errors.Is(err, ErrState) {
			t.Errorf("truncated to %d: err = %v, want ErrState", n, err)
		}
	}
}

// TestRandomizedAgainstModel drives random inputs, records, markers and
// clock steps and checks the tracker against a brute-force model: with no
// idle timeout the watermark is exactly the minimum over inputs of their
// watermark computed from the whole history; with one it is never below that
// (idleness only lets it advance) nor above the largest input watermark, and
// it never goes backwards.
func TestRandomizedAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := 0; round < 300; round++ {
		bound := time.Duration(r.IntN(20)) * time.Millisecond
		idle := time.Duration(0)
		if r.IntN(2) == 0 {
			idle = time.Duration(1+r.IntN(5)) * time.Second
		}
		tr := newTracker(t, bound, idle)
		type modelInput struct {
			maxEvent int64
			writers  []int64
		}
		var model []modelInput
		var ins []Input
		for i := 0; i < 1+r.IntN(4); i++ {
			if r.IntN(2) == 0 {
				ins = append(ins, tr.AddSource("s", int32(i), t0))
				model = append(model, modelInput{maxEvent: Min})
			} else {
				n := 1 + r.IntN(3)
				in, _ := tr.AddRepartition("r", int32(i), n, t0)
				ins = append(ins, in)
				ws := make([]int64, n)
				for j := range ws {
					ws[j] = Min
				}
				model = append(model, modelInput{maxEvent: Min, writers: ws})
			}
		}
		now, prev := t0, int64(Min)
		for step := 0; step < 50; step++ {
			now = now.Add(time.Duration(r.IntN(1500)) * time.Millisecond)
			for k := 0; k < r.IntN(6); k++ {
				i := r.IntN(len(ins))
				ts := int64(r.IntN(1000))
				if model[i].writers == nil {
					tr.Observe(ins[i], ts)
					model[i].maxEvent = max(model[i].maxEvent, ts)
				} else {
					w := r.IntN(len(model[i].writers))
					tr.ObserveMarker(ins[i], Marker{Writer: uint32(w), Writers: uint32(len(model[i].writers)), Watermark: ts}, now)
					model[i].writers[w] = max(model[i].writers[w], ts)
				}
			}
			got := tr.Advance(now)
			low, high := int64(math.MaxInt64), int64(Min)
			for _, m := range model {
				wm := sub(m.maxEvent, bound.Milliseconds())
				if m.writers != nil {
					wm = math.MaxInt64
					for _, w := range m.writers {
						wm = min(wm, w)
					}
				}
				low, high = min(low, wm), max(high, wm)
			}
			// The high bound also covers a writer's largest marker.
			for _, m := range model {
				for _, w := range m.writers {
					high = max(high, w)
				}
			}
			if got < prev {
				t.Fatalf("round %d step %d: watermark went back %d -> %d", round, step, prev, got)
			}
			if idle == 0 && got != low {
				t.Fatalf("round %d step %d: watermark %d, model %d", round, step, got, low)
			}
			if idle > 0 && (got < low || got > high) {
				t.Fatalf("round %d step %d: watermark %d outside [%d, %d]", round, step, got, low, high)
			}
			prev = got
		}
	}
}

func FuzzRestore(f *testing.F) {
	tr, _ := New(Config{})
	tr.AddSource("in", 0, t0)
	tr.AddRepartition("rep", 1, 2, t0)
	f.Add(tr.AppendState(nil))
	tr.Observe(0, 77)
	tr.ObserveMarker(1, Marker{Writer: 1, Writers: 2, Watermark: -3, Idle: true}, t0)
	tr.Advance(t0)
	f.Add(tr.AppendState(nil))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		wm, saved, err := decodeState(b)
		if err != nil {
			return
		}
		// Rebuild a tracker with the saved inputs; restored, it writes the
		// same bytes (unless an input appears twice, which Restore merges).
		tr, _ := New(Config{})
		seen := map[[2]any]bool{}
		for _, s := range saved {
			k := [2]any{s.topic, s.partition}
			if seen[k] {
				return
			}
			seen[k] = true
			if len(s.writers) == 0 {
				tr.AddSource(s.topic, s.partition, t0)
			} else if _, err := tr.AddRepartition(s.topic, s.partition, len(s.writers), t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.Restore(b, t0); err != nil {
			t.Fatal(err)
		}
		if tr.Watermark() != wm {
			t.Fatalf("watermark %d, saved %d", tr.Watermark(), wm)
		}
		if again := tr.AppendState(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
}

// BenchmarkObserve is the per-record cost of the tracker (Observe over four
// partitions, with an Advance every 1000 records, a round) against a plain
// running maximum over the same times, alternating batches of 10,000
// records so both see the same conditions. Times are process CPU time
// (the machine is shared: wall time counts other processes).
func BenchmarkObserve(b *testing.B) {
	times := make([]int64, 4096)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range times {
		times[i] = 1764633600000 + int64(i)*10 - r.Int64N(500)
	}
	tr, _ := New(Config{OutOfOrderness: time.Second, IdleTimeout: time.Minute})
	ins := []Input{tr.AddSource("in", 0, t0), tr.AddSource("in", 1, t0), tr.AddSource("in", 2, t0), tr.AddSource("in", 3, t0)}
	var m int64 = Min
	var baseNs, obsNs int64
	const batch = 10000
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		start := processCPU(b)
		for i := done; i < done+n; i++ {
			if ts := times[i&4095]; ts > m {
				m = ts
			}
		}
		baseNs += int64(processCPU(b) - start)
		start = processCPU(b)
		for i := done; i < done+n; i++ {
			tr.Observe(ins[i&3], times[i&4095])
		}
		tr.Advance(t0)
		obsNs += int64(processCPU(b) - start)
	}
	sink = m + tr.Watermark()
	b.ReportMetric(float64(baseNs)/float64(b.N), "max-ns/op")
	b.ReportMetric(float64(obsNs)/float64(b.N), "observe-ns/op")
	b.ReportMetric(float64(obsNs)/float64(baseNs), "x-max")
}

var sink int64

// processCPU returns the process's CPU time (user + system) so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestInputStateAndClone: one input's state restores that input (and the
// task watermark) alone; without writers, a repartition input's writers
// are not restored while the watermark is; a clone is independent.
func TestInputStateAndClone(t *testing.T) {
	tr := newTracker(t, 0, 0)
	src := tr.AddSource("in", 0, t0)
	rep, _ := tr.AddRepartition("rep", 0, 2, t0)
	tr.Observe(src, 700)
	tr.ObserveMarker(rep, Marker{Writer: 0, Writers: 2, Watermark: 500}, t0)
	tr.ObserveMarker(rep, Marker{Writer: 1, Writers: 2, Watermark: 600}, t0)
	if got := tr.Advance(t0); got != 500 {
		t.Fatalf("%d, want 500", got)
	}
	fresh := func() (*Tracker, Input, Input) {
		n := newTracker(t, 0, 0)
		return n, n.AddSource("in", 0, t0), mustRep(t, n)
	}
	n, _, _ := fresh()
	if err := n.Restore(tr.AppendInputState(nil, rep, true), t0); err != nil {
		t.Fatal(err)
	}
	if st := n.Status(); n.Watermark() != 500 || st[0].MaxEvent != Min {
		t.Fatalf("rep's state restored wm %d, inputs %+v: want 500 and the source untouched", n.Watermark(), st)
	}
	n.Observe(0, 900)
	if got := n.Advance(t0); got != 500 { // writers restored: min(500, 600)
		t.Fatalf("after restoring rep with writers: %d, want 500", got)
	}
	n, _, _ = fresh()
	if err := n.Restore(tr.AppendInputState(nil, rep, false), t0); err != nil {
		t.Fatal(err)
	}
	n.Observe(0, 900)
	n.ObserveMarker(1, Marker{Writer: 0, Writers: 2, Watermark: 800}, t0)
	if got := n.Advance(t0); got != 500 { // writer 1 unknown again: holds; the watermark stays
		t.Fatalf("without writers: %d, want 500", got)
	}
	n, _, _ = fresh()
	if err := n.Restore(tr.AppendInputState(nil, src, true), t0); err != nil {
		t.Fatal(err)
	}
	if st := n.Status(); st[0].MaxEvent != 700 {
		t.Fatalf("source state restored %+v, want max event 700", st)
	}

	c := tr.Clone()
	tr.Observe(src, 5000)
	tr.ObserveMarker(rep, Marker{Writer: 0, Writers: 2, Watermark: 4000}, t0)
	tr.ObserveMarker(rep, Marker{Writer: 1, Writers: 2, Watermark: 4000}, t0)
	if got := tr.Advance(t0); got != 4000 {
		t.Fatalf("%d, want 4000", got)
	}
	if got := c.Advance(t0); got != 500 || c.Status()[0].MaxEvent != 700 {
		t.Fatalf("clone moved with the original: %d %+v", got, c.Status())
	}
}

func mustRep(t *testing.T, tr *Tracker) Input {
	t.Helper()
	in, err := tr.AddRepartition("rep", 0, 2, t0)
	if err != nil {
		t.Fatal(err)
	}
	return in
}
