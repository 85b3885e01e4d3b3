package log

import (
	"errors"
	"fmt"
	"testing"
)

// The offset map grows from a small table to its bound without losing or
// confusing entries, and is full at the same count as a table allocated at
// its bound from the start.
func TestOffsetMapGrows(t *testing.T) {
	m := newOffsetMap(8 << 20) // 2^18 slots at most
	if got := uint64(len(m.slots) / 3); got != offsetMapMinSlots {
		t.Fatalf("first table: %d slots, want %d", got, offsetMapMinSlots)
	}
	if m.maxSlots != 1<<18 || m.limit != 235929 {
		t.Fatalf("bound: %d slots, limit %d", m.maxSlots, m.limit)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%d", i)) }
	n := 0
	for ; ; n++ {
		err := m.put(key(n), int64(2*n))
		if errors.Is(err, errMapFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n > 1<<18 {
			t.Fatal("never full")
		}
	}
	if n != m.limit || !m.full() {
		t.Fatalf("full after %d keys, want %d (full=%v)", n, m.limit, m.full())
	}
	if got := uint64(len(m.slots) / 3); got != m.maxSlots {
		t.Fatalf("final table: %d slots, want %d", got, m.maxSlots)
	}
	// Updates of known keys still succeed when full; every key keeps its
	// latest offset across the doublings.
	for i := 0; i < n; i += 7 {
		if err := m.put(key(i), int64(2*i+1)); err != nil {
			t.Fatalf("update of key %d when full: %v", i, err)
		}
	}
	for i := 0; i < n; i++ {
		want := int64(2 * i)
		if i%7 == 0 {
			want++
		}
		if got := m.get(key(i)); got != want {
			t.Fatalf("key %d: offset %d, want %d", i, got, want)
		}
	}
	if got := m.get([]byte("absent")); got != -1 {
		t.Fatalf("absent key: %d", got)
	}
}

// A small bound is used as is (no growth below the minimum table).
func TestOffsetMapSmallBound(t *testing.T) {
	m := newOffsetMap(0)
	if len(m.slots) != 3*1024 || m.maxSlots != 1024 || m.grow != m.limit {
		t.Fatalf("table %d words, max %d slots, grow %d, limit %d", len(m.slots), m.maxSlots, m.grow, m.limit)
	}
}
