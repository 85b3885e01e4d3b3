package window

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSessionMerge(t *testing.T) {
	s := Sessions{Gap: 10 * time.Millisecond}
	tests := []struct {
		name      string
		ts        int64
		existing  []Window
		want      Window
		absorbed  []int
		unchanged bool
	}{
		{"new", 100, nil, Window{100, 100}, nil, false},
		{"inside", 105, []Window{{100, 110}}, Window{100, 110}, []int{0}, true},
		{"extends end, gap inclusive", 120, []Window{{100, 110}}, Window{100, 120}, []int{0}, false},
		{"too far", 121, []Window{{100, 110}}, Window{121, 121}, nil, false},
		{"extends start", 90, []Window{{100, 110}}, Window{90, 110}, []int{0}, false},
		{"bridges two", 125, []Window{{100, 115}, {135, 140}}, Window{100, 140}, []int{0, 1}, false},
		{"skips unrelated", 200, []Window{{100, 115}, {195, 196}, {300, 300}}, Window{195, 200}, []int{1}, false},
	}
	for _, tt := range tests {
		m, err := s.Merge(tt.ts, tt.existing, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if m.Session != tt.want || !slices.Equal(m.Absorbed, tt.absorbed) || m.Unchanged != tt.unchanged {
			t.Errorf("%s: %+v, want %v absorbed %v unchanged %v", tt.name, m, tt.want, tt.absorbed, tt.unchanged)
		}
	}
	if _, err := s.Merge(1, []Window{{10, 20}, {15, 30}}, nil); err == nil {
		t.Error("overlapping sessions accepted")
	}
	if _, err := s.Merge(1, []Window{{20, 10}}, nil); err == nil {
		t.Error("session ending before it starts accepted")
	}
	if got, want := s.SearchFrom(100), int64(90); got != want {
		t.Errorf("SearchFrom = %d, want %d", got, want)
	}
	if got, want := s.SearchTo(100), int64(110); got != want {
		t.Errorf("SearchTo = %d, want %d", got, want)
	}
}

type sumWindow struct {
	w   Window
	sum int64
}

// bruteSessions recomputes a key's sessions from all its records: sort the
// times, cut where two neighbours are more than gap apart.
func bruteSessions(ts []int64, vals []int64, gap int64) []sumWindow {
	idx := make([]int, len(ts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(ts[a] - ts[b]) })
	var out []sumWindow
	for _, i := range idx {
		if n := len(out); n > 0 && ts[i]-out[n-1].w.End <= gap {
			out[n-1].w.End = ts[i]
			out[n-1].sum += vals[i]
			continue
		}
		out = append(out, sumWindow{Window{ts[i], ts[i]}, vals[i]})
	}
	return out
}

// TestSessionsAgainstBruteForce feeds records in random order through Merge,
// keeping a store of sessions with a sum each the way an aggregate would
// (scan from SearchFrom, stop after SearchTo), and compares the result with
// the sessions recomputed from all records.
func TestSessionsAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for round := 0; round < 2000; round++ {
		gap := 1 + r.Int64N(20)
		s := Sessions{Gap: time.Duration(gap) * time.Millisecond}
		n := 1 + r.IntN(40)
		ts, vals := make([]int64, n), make([]int64, n)
		for i := range ts {
			ts[i], vals[i] = r.Int64N(300), 1+r.Int64N(100)
		}
		var store []sumWindow // sorted by End
		var absorbed []int
		for i := range ts {
			// The scan: sessions with End >= SearchFrom, until Start > SearchTo.
			lo := slices.IndexFunc(store, func(x sumWindow) bool { return x.w.End >= s.SearchFrom(ts[i]) })
			var scanned []Window
			if lo >= 0 {
				for _, x := range store[lo:] {
					if x.w.Start > s.SearchTo(ts[i]) {
						break
					}
					scanned = append(scanned, x.w)
				}
			}
			m, err := s.Merge(ts[i], scanned, absorbed)
			if err != nil {
				t.Fatal(err)
			}
			absorbed = m.Absorbed
			sum := vals[i]
			for _, a := range m.Absorbed {
				sum += store[lo+a].sum
			}
			if m.Unchanged {
				store[lo+m.Absorbed[0]].sum = sum
				continue
			}
			// Delete the absorbed sessions (contiguous in the store), insert the merged one.
			if len(m.Absorbed) > 0 {
				first, last := lo+m.Absorbed[0], lo+m.Absorbed[len(m.Absorbed)-1]
				store = slices.Delete(store, first, last+1)
			}
			at, _ := slices.BinarySearchFunc(store, m.Session.End, func(x sumWindow, end int64) int { return int(x.w.End - end) })
			store = slices.Insert(store, at, sumWindow{m.Session, sum})
		}
		if want := bruteSessions(ts, vals, gap); !slices.Equal(store, want) {
			t.Fatalf("round %d gap %d times %v: sessions %v, brute force %v", round, gap, ts, store, want)
		}
	}
}
