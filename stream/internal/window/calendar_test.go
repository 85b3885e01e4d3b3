package window

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func load(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func msOf(t time.Time) int64 { return t.UnixMilli() }

func TestDailyWindowsAcrossDST(t *testing.T) {
	for _, tt := range []struct {
		zone       string
		day        [3]int // y, m, d
		wantLength time.Duration
	}{
		{"Europe/Berlin", [3]int{2026, 3, 29}, 23 * time.Hour},
		{"Europe/Berlin", [3]int{2026, 10, 25}, 25 * time.Hour},
		{"Europe/Berlin", [3]int{2026, 7, 1}, 24 * time.Hour},
		{"America/New_York", [3]int{2026, 3, 8}, 23 * time.Hour},
		{"America/New_York", [3]int{2026, 11, 1}, 25 * time.Hour},
		{"America/New_York", [3]int{2026, 12, 2}, 24 * time.Hour},
	} {
		loc := load(t, tt.zone)
		daily := TimeWindows{Size: 24 * time.Hour, Location: loc}
		midnight := time.Date(tt.day[0], time.Month(tt.day[1]), tt.day[2], 0, 0, 0, 0, loc)
		next := time.Date(tt.day[0], time.Month(tt.day[1]), tt.day[2]+1, 0, 0, 0, 0, loc)
		want := []Window{{msOf(midnight), msOf(next)}}
		for _, ts := range []time.Time{midnight, midnight.Add(3 * time.Hour), next.Add(-time.Millisecond)} {
			got := daily.AssignTo(nil, msOf(ts))
			if !slices.Equal(got, want) {
				t.Errorf("%s: record at %v: %v, want %v", tt.zone, ts, got, want)
			}
		}
		if got := time.Duration(want[0].End-want[0].Start) * time.Millisecond; got != tt.wantLength {
			t.Errorf("%s %v: day lasts %v, want %v", tt.zone, tt.day, got, tt.wantLength)
		}
		// A daily window starting at 06:00 local.
		six := TimeWindows{Size: 24 * time.Hour, Offset: 6 * time.Hour, Location: loc}
		at := time.Date(tt.day[0], time.Month(tt.day[1]), tt.day[2], 12, 0, 0, 0, loc)
		w := six.AssignTo(nil, msOf(at))
		wantSix := Window{msOf(time.Date(tt.day[0], time.Month(tt.day[1]), tt.day[2], 6, 0, 0, 0, loc)), msOf(time.Date(tt.day[0], time.Month(tt.day[1]), tt.day[2]+1, 6, 0, 0, 0, loc))}
		if len(w) != 1 || w[0] != wantSix {
			t.Errorf("%s: 06:00 window of %v = %v, want %v", tt.zone, at, w, wantSix)
		}
	}
}

func TestHourlyWindowsAcrossDST(t *testing.T) {
	berlin := load(t, "Europe/Berlin")
	hourly := TimeWindows{Size: time.Hour, Location: berlin}
	utc := func(h, m int, mo time.Month, d int) int64 { return msOf(time.Date(2026, mo, d, h, m, 0, 0, time.UTC)) }
	tests := []struct {
		name string
		ts   int64
		want Window
	}{
		// Spring: 02:00 CET (01:00Z) becomes 03:00 CEST.
		{"01:30 CET", utc(0, 30, 3, 29), Window{utc(0, 0, 3, 29), utc(1, 0, 3, 29)}},
		{"03:30 CEST", utc(1, 30, 3, 29), Window{utc(1, 0, 3, 29), utc(2, 0, 3, 29)}},
		// Autumn: 03:00 CEST (01:00Z) becomes 02:00 CET; the repeated
		// 02:00-03:00 readings stay in the 02:00 window, two hours long.
		{"02:30 CEST", utc(0, 30, 10, 25), Window{utc(0, 0, 10, 25), utc(2, 0, 10, 25)}},
		{"02:30 CET", utc(1, 30, 10, 25), Window{utc(0, 0, 10, 25), utc(2, 0, 10, 25)}},
		{"03:00 CET", utc(2, 0, 10, 25), Window{utc(2, 0, 10, 25), utc(3, 0, 10, 25)}},
	}
	for _, tt := range tests {
		if got := hourly.AssignTo(nil, tt.ts); len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// A zone with a half-hour offset: local hours start at :30 UTC.
	kolkata := load(t, "Asia/Kolkata")
	got := TimeWindows{Size: time.Hour, Location: kolkata}.AssignTo(nil, utc(10, 10, 6, 1))
	if want := (Window{utc(9, 30, 6, 1), utc(10, 30, 6, 1)}); len(got) != 1 || got[0] != want {
		t.Errorf("Kolkata hour: %v, want %v", got, want)
	}
}

// model is a brute-force calendar: the zone's wall clock sampled each
// minute (the zones' transitions fall on whole minutes, and between two
// minutes the clock runs linearly).
type model struct{ loc *time.Location }

func (m model) wall(ms int64) int64 {
	_, off := time.UnixMilli(ms).In(m.loc).Zone()
	return ms + int64(off)*1000
}

// clock is the largest reading at or before ms.
func (m model) clock(ms int64) int64 {
	c := m.wall(ms)
	const minute = 60 * sec
	for t := ms - ms%minute; t > ms-40*3600*sec; t -= minute {
		c = max(c, m.wall(t), m.wall(t-1))
	}
	return c
}

// first is the first instant reading at least x (x on a whole minute).
func (m model) first(x int64) int64 {
	const minute = 60 * sec
	t := x - 40*3600*sec
	t -= t % minute
	for ; ; t += minute {
		if m.wall(t) >= x {
			return t
		}
	}
}

func (m model) assign(w TimeWindows, ts int64) []Window {
	c := m.clock(ts)
	size, adv, off := w.Size.Milliseconds(), w.advance().Milliseconds(), w.Offset.Milliseconds()
	var out []Window
	for k := (c-off)/adv - size/adv - 2; k <= (c-off)/adv+2; k++ {
		s := k*adv + off
		if s <= c && c < s+size {
			out = append(out, Window{m.first(s), m.first(s + size)})
		}
	}
	return out
}

// TestCalendarAgainstModel compares calendar windows with the brute-force
// wall clock at random times around the 2026 DST changes of Berlin and New
// York (and Lord Howe, whose DST shift is 30 minutes).
func TestCalendarAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	zones := map[string][]time.Time{
		"Europe/Berlin":       {time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC)},
		"America/New_York":    {time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)},
		"Australia/Lord_Howe": {time.Date(2026, 4, 4, 15, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 15, 30, 0, 0, time.UTC)},
	}
	specs := []TimeWindows{
		{Size: time.Hour},
		{Size: 24 * time.Hour},
		{Size: 24 * time.Hour, Advance: 6 * time.Hour},
		{Size: 30 * time.Minute, Offset: 15 * time.Minute},
		{Size: 2 * time.Hour, Advance: 20 * time.Minute, Offset: -50 * time.Minute},
	}
	for zone, changes := range zones {
		loc := load(t, zone)
		m := model{loc}
		for _, change := range changes {
			for i := 0; i < 40; i++ {
				ts := msOf(change) + r.Int64N(72*3600*sec) - 36*3600*sec
				w := specs[r.IntN(len(specs))]
				w.Location = loc
				got, want := w.AssignTo(nil, ts), m.assign(w, ts)
				if !slices.Equal(got, want) {
					t.Fatalf("%s %+v at %v: %v, model %v", zone, w, time.UnixMilli(ts).In(loc), got, want)
				}
				for _, win := range got {
					if win.Start > ts || ts >= win.End {
						t.Fatalf("%s: window %v does not hold %d", zone, win, ts)
					}
				}
			}
		}
	}
}

// TestCalendarTumblingTiles walks a year of Berlin's daily and hourly
// windows: each starts where the previous ended.
func TestCalendarTumblingTiles(t *testing.T) {
	berlin := load(t, "Europe/Berlin")
	for _, size := range []time.Duration{time.Hour, 24 * time.Hour} {
		w := TimeWindows{Size: size, Location: berlin}
		ts := msOf(time.Date(2026, 1, 1, 0, 0, 0, 0, berlin))
		end := msOf(time.Date(2027, 1, 1, 0, 0, 0, 0, berlin))
		prev := Window{}
		n := 0
		for ts < end {
			got := w.AssignTo(nil, ts)
			if len(got) != 1 || got[0].Start > ts || got[0].End <= ts {
				t.Fatalf("%v: %v at %d", size, got, ts)
			}
			if n > 0 && got[0].Start != prev.End {
				t.Fatalf("%v: window %v does not start where %v ended", size, got[0], prev)
			}
			prev, ts = got[0], got[0].End
			n++
		}
		if want := map[time.Duration]int{time.Hour: 8760 - 1, 24 * time.Hour: 365}[size]; n != want {
			t.Fatalf("%v: %d windows in 2026, want %d", size, n, want)
		}
	}
}

// TestCalendarAgainstModelWide compares with the model at random times of
// 2005-2030 in zones with unusual rules: DST at midnight (Santiago), a
// skipped day (Apia, 2011-12-30), southern-hemisphere DST (Sydney),
// half-hour offsets (Kolkata, Tehran), 30-minute DST (Lord Howe).
func TestCalendarAgainstModelWide(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	zones := []string{"America/Santiago", "Pacific/Apia", "Australia/Sydney", "Asia/Kolkata", "Asia/Tehran", "Australia/Lord_Howe", "Europe/Berlin", "America/New_York"}
	specs := []TimeWindows{
		{Size: time.Hour},
		{Size: 24 * time.Hour},
		{Size: 24 * time.Hour, Advance: 8 * time.Hour, Offset: 2 * time.Hour},
		{Size: 7 * 24 * time.Hour, Offset: 4 * 24 * time.Hour}, // weeks from Monday
	}
	lo, hi := msOf(time.Date(2005, 1, 1, 0, 0, 0, 0, time.UTC)), msOf(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, zone := range zones {
		loc := load(t, zone)
		m := model{loc}
		for i := 0; i < 60; i++ {
			ts := lo + r.Int64N(hi-lo)
			if i%3 == 0 { // near a transition of that year
				_, end := time.UnixMilli(ts).In(loc).ZoneBounds()
				if !end.IsZero() {
					ts = msOf(end) + r.Int64N(60*3600*sec) - 30*3600*sec
				}
			}
			w := specs[r.IntN(len(specs))]
			w.Location = loc
			got, want := w.AssignTo(nil, ts), m.assign(w, ts)
			if !slices.Equal(got, want) {
				t.Fatalf("%s %+v at %v: %v, model %v", zone, w, time.UnixMilli(ts).In(loc), got, want)
			}
		}
	}
	// Apia skipped 30 December 2011: the daily window of 29 December ends
	// where 31 December starts.
	apia := load(t, "Pacific/Apia")
	daily := TimeWindows{Size: 24 * time.Hour, Location: apia}
	got := daily.AssignTo(nil, msOf(time.Date(2011, 12, 29, 12, 0, 0, 0, apia)))
	if want := msOf(time.Date(2011, 12, 31, 0, 0, 0, 0, apia)); len(got) != 1 || got[0].End != want {
		t.Fatalf("Apia 2011-12-29: %v, want end %d", got, want)
	}
}
