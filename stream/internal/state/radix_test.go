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
