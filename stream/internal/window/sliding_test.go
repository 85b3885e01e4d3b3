package window

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type slidingState struct {
	SlidingWindow
	sum int64
}

// slidingStore applies records through Add, as a windowed aggregate would.
type slidingStore struct {
	s   Sliding
	all []slidingState // sorted by End, then Start (the store's order)
}

func (st *slidingStore) add(t *testing.T, ts, val int64) {
	t.Helper()
	// The scan: End >= SearchFrom, until Start > SearchTo.
	var scanned []SlidingWindow
	var at []int
	for i, w := range st.all {
		if w.End < st.s.SearchFrom(ts) {
			continue
		}
		if w.Start > st.s.SearchTo(ts) {
			break
		}
		scanned = append(scanned, w.SlidingWindow)
		at = append(at, i)
	}
	res, err := st.s.Add(ts, scanned)
	if err != nil {
		t.Fatalf("Add(%d): %v", ts, err)
	}
	var created []slidingState
	for _, c := range res.Create {
		n := slidingState{SlidingWindow: c.Window}
		if c.Seed >= 0 {
			n.sum = st.all[at[c.Seed]].sum
		}
		if c.Holds {
			n.sum += val
		}
		created = append(created, n)
	}
	for _, u := range res.Update {
		w := &st.all[at[u]]
		w.sum += val
		w.First, w.Last = min(w.First, ts), max(w.Last, ts)
	}
	st.all = append(st.all, created...)
	slices.SortFunc(st.all, func(a, b slidingState) int {
		return cmp.Or(cmp.Compare(a.End, b.End), cmp.Compare(a.Start, b.Start))
	})
}

// bruteSliding computes a key's sliding windows from all records by the
// definition: left(x) for every record, right(x) when it holds a record.
func bruteSliding(ts, vals []int64, d int64) []slidingState {
	set := map[Window]bool{}
	for _, x := range ts {
		set[Window{x - d, x}] = true
		for _, y := range ts {
			if y > x && y <= x+1+d {
				set[Window{x + 1, x + 1 + d}] = true
			}
		}
	}
	var out []slidingState
	for w := range set {
		st := slidingState{SlidingWindow: SlidingWindow{Window: w, First: w.End, Last: w.Start}}
		for i, x := range ts {
			if w.Start <= x && x <= w.End {
				st.sum += vals[i]
				st.First, st.Last = min(st.First, x), max(st.Last, x)
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b slidingState) int {
		return cmp.Or(cmp.Compare(a.End, b.End), cmp.Compare(a.Start, b.Start))
	})
	return out
}

// TestSlidingKafkaExample is the example of Kafka's SlidingWindows javadoc.
func TestSlidingKafkaExample(t *testing.T) {
	st := &slidingStore{s: Sliding{TimeDifference: 5 * time.Second}}
	st.add(t, 8000, 1)
	st.add(t, 9200, 10)
	st.add(t, 12400, 100)
	want := []slidingState{
		{SlidingWindow{Window{3000, 8000}, 8000, 8000}, 1},
		{SlidingWindow{Window{4200, 9200}, 8000, 9200}, 11},
		{SlidingWindow{Window{7400, 12400}, 8000, 12400}, 111},
		{SlidingWindow{Window{8001, 13001}, 9200, 12400}, 110},
		{SlidingWindow{Window{9201, 14201}, 12400, 12400}, 100},
	}
	if !slices.Equal(st.all, want) {
		t.Fatalf("windows %v\nwant %v", st.all, want)
	}
}

// TestSlidingAgainstBruteForce feeds records in random order (so out of
// order, with duplicate times) and compares with the definition.
func TestSlidingAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for round := 0; round < 2000; round++ {
		d := r.Int64N(15)
		st := &slidingStore{s: Sliding{TimeDifference: time.Duration(d) * time.Millisecond}}
		n := 1 + r.IntN(25)
		ts, vals := make([]int64, n), make([]int64, n)
		for i := range ts {
			ts[i], vals[i] = r.Int64N(80), 1+r.Int64N(1000)
			st.add(t, ts[i], vals[i])
		}
		if want := bruteSliding(ts, vals, d); !slices.Equal(st.all, want) {
			t.Fatalf("round %d D %d times %v:\n got %v\nwant %v", round, d, ts, st.all, want)
		}
	}
}

func TestSlidingAddErrors(t *testing.T) {
	s := Sliding{TimeDifference: 10 * time.Millisecond}
	bad := [][]SlidingWindow{
		{{Window{0, 5}, 0, 5}},   // wrong size
		{{Window{0, 10}, 5, 4}},  // first after last
		{{Window{0, 10}, 0, 11}}, // last outside
	}
	for _, ws := range bad {
		if _, err := s.Add(5, ws); err == nil {
			t.Errorf("Add accepted %v", ws)
		}
	}
	// Records 3 and 9, stored consistently: left(3), left(9), right(3).
	consistent := []SlidingWindow{{Window{-7, 3}, 3, 3}, {Window{-1, 9}, 3, 9}, {Window{4, 14}, 9, 9}}
	if _, err := s.Add(8, consistent); err != nil {
		t.Fatalf("consistent store: %v", err)
	}
	// The same store without left(3): the new left window [-2, 8] holds
	// record 3 before 8, and nothing stored holds exactly that.
	if _, err := s.Add(8, []SlidingWindow{{Window{-1, 9}, 3, 9}}); err == nil {
		t.Error("Add seeded a window from nothing")
	}
}
