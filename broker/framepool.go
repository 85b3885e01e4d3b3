package broker

import (
	"math/bits"
	"sync"
)

// Produce request frames are the bulk of the bytes a broker reads. They are
// read into recycled buffers: a fresh 10 MiB allocation is zeroed by the
// runtime and then overwritten by the read, and both cost as much as the
// append itself. A frame returns to the pool once its request is finished
// and its response written (the log does not keep references to the
// appended bytes; the Produce response holds none).
const (
	pooledFrameMin = 64 << 10
	pooledFrameMax = 64 << 20
)

// framePool holds buffers in power-of-two size classes. Goroutine-safe.
type framePool struct {
	classes [bits.UintSize]sync.Pool // class k: *[]byte with cap 1<<k
}

func frameClass(n int) int { return bits.Len(uint(n - 1)) }

// get returns a buffer with capacity >= n.
func (p *framePool) get(n int) *[]byte {
	k := frameClass(n)
	if b, ok := p.classes[k].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 1<<k)
	return &b
}

// put recycles b, which must come from get.
func (p *framePool) put(b *[]byte) {
	k := bits.Len(uint(cap(*b))) - 1
	if cap(*b) != 1<<k {
		return // not from get
	}
	p.classes[k].Put(b)
}
