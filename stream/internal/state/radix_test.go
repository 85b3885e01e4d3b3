package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// writeBatch's orders (radix sorts with a comparison fallback) equal plain
// sorts: data keys by bytes, index ops by (run, ts, pos). Keys include
// several stores, a shared prefix, keys longer than 16 bytes past it that
// tie in their first 16, and zero bytes.
func TestSortWritesMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		n := 1 + rng.IntN(500)
		seen := map[string]bool{}
		var ws []write
		for len(ws) < n {
			store := []string{"a", "bb", "c"}[rng.IntN(3)]
			var key string
			switch rng.IntN(4) {
			case 0:
				key = fmt.Sprintf("zone-%06d", rng.IntN(1000))
			case 1:
				key = fmt.Sprintf("zone-0000000000000000-%d", rng.IntN(1000))
			case 2:
				key = string([]byte{0, byte(rng.IntN(3)), 0})
			default:
				key = fmt.Sprintf("zone-%d", rng.IntN(100))
			}
			if round%2 == 0 {
				store = "s" // one store: a long shared prefix
			}
			dk := string(dataKey(nil, store, []byte(key)))
			if seen[dk] {
				continue
			}
			seen[dk] = true
			ws = append(ws, write{dk: dk, ts: rng.Int64N(5) - 2, found: true})
		}
		d := &DB{}
		order := d.sortWrites(ws)
		got := make([]string, len(order))
		for i, o := range order {
			got[i] = ws[o.w].dk
		}
		want := slices.Sorted(func(yield func(string) bool) {
			for _, w := range ws {
				if !yield(w.dk) {
					return
				}
			}
		})
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: data order\n got %q\nwant %q", round, got, want)
		}

		ops := make([]indexOp, 0, n)
		for pos := range n {
			op := indexOp{run: int32(rng.IntN(3)), pos: int32(pos), end: encodeTS(rng.Int64N(1<<40) - 1<<39)}
			switch round % 3 {
			case 1: // one bucket: only the runs vary
				op.end = encodeTS(1 << 30)
			case 2: // one bucket of one store: nothing to sort
				op.run, op.end = 1, encodeTS(7<<20)
			}
			ops = append(ops, op)
		}
		slices.SortFunc(ops, func(a, b indexOp) int { return int(a.pos - b.pos) })
		want2 := slices.Clone(ops)
		slices.SortFunc(want2, func(a, b indexOp) int {
			return strings.Compare(fmt.Sprintf("%08x%016x%08x", a.run, a.end, a.pos), fmt.Sprintf("%08x%016x%08x", b.run, b.end, b.pos))
		})
		got2 := d.sortIndexOps(ops)
		if !slices.Equal(got2, want2) {
			t.Fatalf("round %d: index order differs", round)
		}
	}
}

// Runs of thousands of keys equal in their first 16 bytes past the shared
// prefix (a flush's close index entries: tag, end, the start of the key)
// are radix-sorted on their next bytes (sortRun); keys that end inside the
// compared bytes, or differ only by trailing zero bytes, still sort as
// bytes.Compare does.
func TestSortWritesLongRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 20 {
		seen := map[string]bool{}
		var ws []write
		for len(ws) < 3000 {
			var key []byte
			switch rng.IntN(3) {
			case 0: // an index entry: tag, end (one of two), key, start
				key = append([]byte{'c', 0x80, 0, 0, 0, 0, 0, 0, byte(rng.IntN(2))}, fmt.Sprintf("zone-%06d", rng.IntN(5000))...)
				key = append(key, 0, 1, 0x80, 0, 0, 0, 0, 0, byte(rng.IntN(2)), 0)
			case 1: // 16 shared bytes, then a short tail of zeros, ones and 'a'
				key = []byte("zone-00000000000")
				if round%2 == 1 {
					key = []byte("zone-0000000000000000000000000000")
				} else if rng.IntN(2) == 0 {
					// Equal in the next 16 bytes, zero-padded, to the
					// key without them.
					key = append(key, make([]byte, 16)...)
				}
				for range rng.IntN(7) {
					key = append(key, []byte{0, 1, 'a'}[rng.IntN(3)])
				}
			default: // a window
				key = append([]byte{'w'}, fmt.Sprintf("zone-%06d", rng.IntN(5000))...)
				key = append(key, 0, 1, 0x80, 0, 0, 0, 0, 0, byte(rng.IntN(4)), 0)
			}
			dk := string(dataKey(nil, "w", key))
			if !seen[dk] {
				seen[dk] = true
				ws = append(ws, write{dk: dk, found: true})
			}
		}
		d := &DB{}
		order := d.sortWrites(ws)
		got := make([]string, len(order))
		for i, o := range order {
			got[i] = ws[o.w].dk
		}
		want := make([]string, len(ws))
		for i, w := range ws {
			want[i] = w.dk
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: order differs from bytes.Compare's", round)
		}
	}
}
