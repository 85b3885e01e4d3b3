package window

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const sec = int64(1000)

func TestTimeWindowsAssign(t *testing.T) {
	tests := []struct {
		name string
		w    TimeWindows
		ts   int64
		want []Window
	}{
		{"tumbling at start", Tumbling(10 * time.Second), 0, []Window{{0, 10 * sec}}},
		{"tumbling before end", Tumbling(10 * time.Second), 9999, []Window{{0, 10 * sec}}},
		{"tumbling at end", Tumbling(10 * time.Second), 10 * sec, []Window{{10 * sec, 20 * sec}}},
		{"tumbling negative", Tumbling(10 * time.Second), -1, []Window{{-10 * sec, 0}}},
		{"hopping", Hopping(10*time.Second, 5*time.Second), 7 * sec, []Window{{0, 10 * sec}, {5 * sec, 15 * sec}}},
		{"hopping uneven", Hopping(10*time.Millisecond, 3*time.Millisecond), 0, []Window{{-9, 1}, {-6, 4}, {-3, 7}, {0, 10}}},
		{"hopping offset", TimeWindows{Size: 10 * time.Millisecond, Advance: 5 * time.Millisecond, Offset: 2 * time.Millisecond}, 7, []Window{{2, 12}, {7, 17}}},
		{"negative offset", TimeWindows{Size: 10 * time.Millisecond, Offset: -3 * time.Millisecond}, 0, []Window{{-3, 7}}},
		{"advance 0 is tumbling", TimeWindows{Size: time.Minute}, 61 * sec, []Window{{60 * sec, 120 * sec}}},
		{"near max", Tumbling(10 * time.Millisecond), math.MaxInt64, []Window{{math.MaxInt64 - 7, math.MaxInt64}}},
		{"near min", Hopping(10*time.Millisecond, 5*time.Millisecond), math.MinInt64 + 3, []Window{{math.MinInt64 + 3, math.MinInt64 + 13}}},
		{"start below min", Tumbling(10 * time.Millisecond), math.MinInt64 + 2, nil},
	}
	for _, tt := range tests {
		if err := tt.w.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := tt.w.AssignTo(nil, tt.ts); !slices.Equal(got, tt.want) {
			t.Errorf("%s: AssignTo(%d) = %v, want %v", tt.name, tt.ts, got, tt.want)
		}
	}
}

func TestTimeWindowsValidate(t *testing.T) {
	for _, w := range []TimeWindows{
		{},
		{Size: -time.Second},
		{Size: time.Microsecond},
		{Size: time.Second, Advance: 2 * time.Second},
		{Size: time.Second, Advance: -time.Millisecond},
		{Size: time.Second, Advance: 1500 * time.Microsecond},
		{Size: time.Second, Offset: time.Microsecond},
		{Size: time.Hour, Advance: time.Millisecond},
	} {
		if err := w.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", w, err)
		}
	}
	for _, err := range []error{(Sessions{}).Validate(), (Sessions{Gap: time.Microsecond}).Validate(), (Sliding{TimeDifference: -1}).Validate()} {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("got %v, want ErrConfig", err)
		}
	}
}

// TestTimeWindowsAgainstBruteForce compares AssignTo with enumerating every
// window start k*advance + offset near ts.
func TestTimeWindowsAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 20000; i++ {
		size := 1 + r.Int64N(50)
		adv := 1 + r.Int64N(size)
		off := r.Int64N(200) - 100
		ts := r.Int64N(2000) - 1000
		w := TimeWindows{Size: time.Duration(size) * time.Millisecond, Advance: time.Duration(adv) * time.Millisecond, Offset: time.Duration(off) * time.Millisecond}
		var want []Window
		for k := int64(-3000); k <= 3000; k++ {
			s := k*adv + off
			if s <= ts && ts < s+size {
				want = append(want, Window{s, s + size})
			}
		}
		if got := w.AssignTo(nil, ts); !slices.Equal(got, want) {
			t.Fatalf("size %d advance %d offset %d ts %d: %v, want %v", size, adv, off, ts, got, want)
		}
	}
}

func TestCloseRules(t *testing.T) {
	tw := Tumbling(10 * time.Second)
	w := Window{0, 10 * sec}
	if got := tw.CloseAt(w, 2*time.Second); got != 12*sec {
		t.Errorf("time window CloseAt = %d, want 12000", got)
	}
	if got := tw.CloseAt(Window{0, math.MaxInt64}, time.Hour); got != math.MaxInt64 {
		t.Errorf("CloseAt saturates: %d", got)
	}
	sl := Sliding{TimeDifference: 5 * time.Second}
	if got := sl.CloseAt(Window{3000, 8000}, 0); got != 8001 {
		t.Errorf("sliding CloseAt = %d, want 8001 (closed when stream time > end + grace)", got)
	}
	ss := Sessions{Gap: 5 * time.Second}
	if got := ss.CloseAt(Window{100, 200}, time.Second); got != 200+5000+1+1000 {
		t.Errorf("session CloseAt = %d", got)
	}
	if Late(100, 100, 0) || !Late(100, 101, 0) || Late(100, 1100, time.Second) || !Late(100, 1101, time.Second) {
		t.Error("Late: want late exactly when wm >= ts + 1 + lateness")
	}
}

// TestSessionClosedNeverReopened checks the rule that makes EmitFinal safe:
// a record that is not late is more than Gap after every closed session.
func TestSessionClosedNeverReopened(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 10000; i++ {
		s := Sessions{Gap: time.Duration(1+r.IntN(20)) * time.Millisecond}
		lateness := time.Duration(r.IntN(20)) * time.Millisecond
		sess := Window{r.Int64N(100), 0}
		sess.End = sess.Start + r.Int64N(50)
		wm := s.CloseAt(sess, lateness) + r.Int64N(10)
		ts := r.Int64N(400) - 100
		if Late(ts, wm, lateness) {
			continue
		}
		m, err := s.Merge(ts, []Window{sess}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Absorbed) != 0 {
			t.Fatalf("record %d (not late at wm %d) joined closed session %v", ts, wm, sess)
		}
	}
}

// FuzzAssign: for any record time and configuration, every window returned
// holds the record and the windows are in start order; calendar windows too.
func FuzzAssign(f *testing.F) {
	f.Add(int64(0), int64(10), int64(5), int64(0), false)
	f.Add(int64(math.MaxInt64), int64(1), int64(1), int64(-7), true)
	f.Add(int64(math.MinInt64), int64(86400000), int64(3600000), int64(0), true)
	f.Add(int64(1792890000000), int64(3600000), int64(3600000), int64(0), true)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ts, size, adv, off int64, calendar bool) {
		size = 1 + floorMod(size, 1<<40)
		adv = 1 + floorMod(adv, size)
		off = floorMod(off, 1<<40) - 1<<39
		w := TimeWindows{Size: time.Duration(size) * time.Millisecond, Advance: time.Duration(adv) * time.Millisecond, Offset: time.Duration(off) * time.Millisecond}
		if calendar {
			w.Location = berlin
		}
		if err := w.Validate(); err != nil {
			return // too many windows per record
		}
		got := w.AssignTo(nil, ts)
		for i, win := range got {
			if win.Start > ts || (ts >= win.End && win.End != math.MaxInt64) {
				t.Fatalf("window %v does not hold %d", win, ts)
			}
			if i > 0 && win.Start <= got[i-1].Start {
				t.Fatalf("windows out of order: %v", got)
			}
		}
		if !calendar && size == adv && len(got) != 1 && ts-floorMod(ts-off, adv) <= math.MaxInt64-size {
			t.Fatalf("tumbling: %d windows for %d: %v", len(got), ts, got)
		}
	})
}

func TestPanesTileWindows(t *testing.T) {
	for _, w := range []TimeWindows{
		Hopping(10*time.Second, 2*time.Second),
		{Size: 1000 * time.Millisecond, Advance: 400 * time.Millisecond, Offset: 50 * time.Millisecond},
		{Size: 900 * time.Millisecond, Advance: 300 * time.Millisecond, Offset: -70 * time.Millisecond},
	} {
		g := w.PaneWidth()
		for _, ts := range []int64{-2501, -1, 0, 1, 49, 50, 999, 1000, 123457} {
			p := w.PaneOf(ts)
			if p.Start > ts || ts >= p.End || p.End-p.Start != g {
				t.Fatalf("%+v: pane of %d is %+v", w, ts, p)
			}
			// Every window holding ts holds its whole pane.
			for _, win := range w.AssignTo(nil, ts) {
				if p.Start < win.Start || p.End > win.End || (win.Start-p.Start)%g != 0 {
					t.Fatalf("%+v: pane %+v of %d not aligned in window %+v", w, p, ts, win)
				}
			}
		}
	}
}
