package main

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// payloads hands out record values of a fixed size whose first 8 bytes are
// the record's index (little endian) and whose rest is pseudo-random (so no
// broker or transport can profit from trivially compressible data). Buffers
// come back through put once a record is acked, so the steady state does
// not allocate. Goroutine-safe.
type payloads struct {
	size     int
	template []byte
	free     chan []byte
}

func newPayloads(size, pool int) *payloads {
	t := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range t {
		t[i] = byte(r.Uint32())
	}
	return &payloads{size: size, template: t, free: make(chan []byte, pool)}
}

// get returns a value carrying index i.
func (p *payloads) get(i int) []byte {
	var b []byte
	select {
	case b = <-p.free:
	default:
		b = make([]byte, p.size)
		copy(b, p.template)
	}
	binary.LittleEndian.PutUint64(b, uint64(i))
	return b
}

// put recycles a value returned by get; the caller must not use it again.
func (p *payloads) put(b []byte) {
	if len(b) != p.size {
		return
	}
	select {
	case p.free <- b:
	default:
	}
}

// recordIndex reads the index from a value; ok is false for a value too
// short to carry one.
func recordIndex(v []byte) (int, bool) {
	if len(v) < 8 {
		return 0, false
	}
	return int(binary.LittleEndian.Uint64(v)), true
}

// readTracker checks a full read: every index in [0, n) exactly once.
// Not goroutine-safe.
type readTracker struct {
	n    int
	seen []uint64 // bitset
	st   readStats
}

func newReadTracker(n int) *readTracker {
	return &readTracker{n: n, seen: make([]uint64, (n+63)/64)}
}

func (t *readTracker) add(v []byte) {
	t.st.Records++
	i, ok := recordIndex(v)
	if !ok || i < 0 || i >= t.n {
		t.st.Foreign++
		return
	}
	w, bit := i/64, uint64(1)<<(i%64)
	if t.seen[w]&bit != 0 {
		t.st.Duplicates++
		return
	}
	t.seen[w] |= bit
	t.st.Distinct++
}

// complete reports whether every index has been seen.
func (t *readTracker) complete() bool { return t.st.Distinct == t.n }

// pacer schedules count sends at rate/s from start: record i is due at
// start + i/rate. Latency is measured from the due time, so a sender that
// falls behind (because the broker stalls it) does not hide the stall.
type pacer struct {
	start time.Time
	rate  int
}

func (p pacer) due(i int) time.Time {
	return p.start.Add(time.Duration(float64(i) / float64(p.rate) * float64(time.Second)))
}

// dueBy returns how many records are due at time now (at most count).
func (p pacer) dueBy(now time.Time, count int) int {
	n := int(now.Sub(p.start).Seconds()*float64(p.rate)) + 1
	return min(max(n, 0), count)
}

// Latency summarises the fixed-rate phase.
type Latency struct {
	Count          int
	P50, P99, P999 time.Duration
	Max            time.Duration
}

func summarize(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return Latency{
		Count: len(s),
		P50:   quantile(s, 0.50),
		P99:   quantile(s, 0.99),
		P999:  quantile(s, 0.999),
		Max:   s[len(s)-1],
	}
}

// quantile returns the nearest-rank q-quantile of sorted s.
func quantile(s []time.Duration, q float64) time.Duration {
	k := int(math.Ceil(q*float64(len(s))-1e-9)) - 1
	return s[min(max(k, 0), len(s)-1)]
}
