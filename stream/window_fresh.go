package stream

import (
	"hash/maphash"
	"math"
	"math/bits"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// freshEnds lets a time window's first record skip the database read that
// asks whether the window exists (tumbling, hopping and calendar windows:
// one read per new window, which misses the store cache whenever the open
// windows outgrow it).
//
// The fact it keeps: a window with end E > floor exists in the store only if
// this operator instance created it. floor starts as the greatest end of
// the store's index entries ('c' and 'r') when the operator first runs,
// after the task restored its stores; every stored window has an index
// entry (written before it, deleted after it), so no window ends later. A
// window the operator creates with end E > floor is added to filters[E], a
// Bloom filter of its key's hash: a key the filter does not hold has no
// window with end E, in the database, the cache or the open transaction.
// The filters only over-approximate (a window created in a transaction that
// aborts, or by a record rolled back, stays in them), which costs a read,
// never a wrong answer. Nothing else writes the store while the operator
// lives (a restore runs before it, into a new task and a new operator).
// Once the close scans passed E, filters[E] is dropped and floor raised to
// E: a retained window (LateUpdates) is read again as before.
//
// Memory: about 1.3 bytes per window open (10 bits a key, filters growing
// by four), not charged to the store cache.
type freshEnds struct {
	floor   int64
	filters map[int64]*keyFilter
	seed    maphash.Seed
}

// loadFresh establishes the fact from the store's index entries.
func (o *windowOp[K, V, A]) loadFresh() error {
	f := &freshEnds{floor: math.MinInt64, filters: map[int64]*keyFilter{}, seed: maphash.MakeSeed()}
	for _, tag := range []byte{timekey.TagIndex, tagRetained} {
		k, ok, err := o.t.db.Last(o.name, []byte{tag}, []byte{tag + 1})
		if err != nil {
			return &fatalError{err}
		}
		if ok && len(k) >= 1+timekey.TimeSize {
			f.floor = max(f.floor, readEnd(k))
		} else if ok {
			f.floor = math.MaxInt64 // unreadable: never skip a read
		}
	}
	o.fresh = f
	return nil
}

// hash is the filters' hash of an encoded key.
func (f *freshEnds) hash(kb []byte) uint64 { return maphash.Bytes(f.seed, kb) }

// absent reports whether the window of the key hashed to h with end end is
// known not to exist.
func (f *freshEnds) absent(end int64, h uint64) bool {
	if f == nil || end <= f.floor {
		return false
	}
	kf := f.filters[end]
	return kf == nil || !kf.has(h)
}

// created notes a window the operator created.
func (f *freshEnds) created(end int64, h uint64) {
	if f == nil || end <= f.floor {
		return
	}
	kf := f.filters[end]
	if kf == nil {
		kf = &keyFilter{}
		f.filters[end] = kf
	}
	kf.add(h)
}

// closed drops the filters of windows with end <= end (the close scans
// passed them).
func (f *freshEnds) closed(end int64) {
	if f == nil || end <= f.floor {
		return
	}
	f.floor = end
	for e := range f.filters {
		if e <= end {
			delete(f.filters, e)
		}
	}
}

// dropPanes drops the filters of panes with end <= end (pane layout,
// window_pane.go: those panes are deleted for good), without raising the
// floor: a pane ending past the floor whose filter is dropped is absent.
func (f *freshEnds) dropPanes(end int64) {
	if f == nil {
		return
	}
	for e := range f.filters {
		if e <= end {
			delete(f.filters, e)
		}
	}
}

// keyFilter is a Bloom filter of key hashes that grows: a chain of parts,
// each four times the previous one's capacity, ~1% false positives each.
type keyFilter struct {
	parts []bloomPart
}

type bloomPart struct {
	bits   []uint64
	n, cap int
}

const (
	bloomHashes     = 7
	bloomBitsPerKey = 10
	bloomFirstCap   = 1024
)

func (f *keyFilter) add(h uint64) {
	if len(f.parts) == 0 || f.parts[len(f.parts)-1].n >= f.parts[len(f.parts)-1].cap {
		c := bloomFirstCap
		if len(f.parts) > 0 {
			c = f.parts[len(f.parts)-1].cap * 4
		}
		f.parts = append(f.parts, bloomPart{bits: make([]uint64, (c*bloomBitsPerKey+63)/64), cap: c})
	}
	p := &f.parts[len(f.parts)-1]
	m := uint64(len(p.bits)) * 64
	h2 := bits.RotateLeft64(h, 32) | 1
	for i := range uint64(bloomHashes) {
		b := (h + i*h2) % m
		p.bits[b>>6] |= 1 << (b & 63)
	}
	p.n++
}

func (f *keyFilter) has(h uint64) bool {
	h2 := bits.RotateLeft64(h, 32) | 1
	for pi := range f.parts {
		p := &f.parts[pi]
		m := uint64(len(p.bits)) * 64
		all := true
		for i := range uint64(bloomHashes) {
			b := (h + i*h2) % m
			if p.bits[b>>6]&(1<<(b&63)) == 0 {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
