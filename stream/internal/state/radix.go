package state

// radixSort sorts xs stably by a key of nbytes bytes (byteAt(x, 0) the least
// significant) with an LSD radix sort, using tmp (grown as needed) as the
// second buffer. It returns the sorted elements and the other buffer: either
// may be xs's or tmp's backing array. A byte equal in every element costs no
// pass, so keys that differ only in their low bytes (the update times of one
// flush, the tails of keys sharing a prefix) sort in a few linear passes
// instead of n log n comparisons.
//
// varying has bit i set for each byte i that may differ between elements;
// the caller guarantees the bytes with a clear bit are equal in every
// element (it finds them by OR and AND of its keys' words, inlined, instead
// of the count of every byte through byteAt). They cost no pass and no
// count.
func radixSort[T any](xs, tmp []T, nbytes int, varying uint32, byteAt func(x *T, i int) byte) (sorted, spare []T) {
	n := len(xs)
	varying &= 1<<nbytes - 1
	if n < 2 || varying == 0 {
		return xs, tmp
	}
	if cap(tmp) < n {
		tmp = make([]T, n)
	}
	tmp = tmp[:n]
	bytes := make([]int, 0, nbytes)
	for b := range nbytes {
		if varying&(1<<b) != 0 {
			bytes = append(bytes, b)
		}
	}
	counts := make([][256]int, nbytes)
	for i := range xs {
		for _, b := range bytes {
			counts[b][byteAt(&xs[i], b)]++
		}
	}
	src, dst := xs, tmp
	for _, b := range bytes {
		c := &counts[b]
		if c[byteAt(&src[0], b)] == n {
			continue // the same byte everywhere
		}
		sum := 0
		for v := range c {
			c[v], sum = sum, sum+c[v]
		}
		for i := range src {
			v := byteAt(&src[i], b)
			dst[c[v]] = src[i]
			c[v]++
		}
		src, dst = dst, src
	}
	return src, dst
}

// radixSortKeys is radixSort for keyOrder by its 16 sort bytes (digit): the
// same passes with the digit read inline, not through a function value (a
// flush sorts every dirty key, a pass per varying byte).
func radixSortKeys(xs, tmp []keyOrder, varying uint32) (sorted, spare []keyOrder) {
	n := len(xs)
	varying &= 1<<16 - 1
	if n < 2 || varying == 0 {
		return xs, tmp
	}
	if cap(tmp) < n {
		tmp = make([]keyOrder, n)
	}
	tmp = tmp[:n]
	var bytes [16]uint
	nb := 0
	for b := range uint(16) {
		if varying&(1<<b) != 0 {
			bytes[nb] = b
			nb++
		}
	}
	var counts [16][256]int32
	for i := range xs {
		for _, b := range bytes[:nb] {
			counts[b][xs[i].digit(b)]++
		}
	}
	src, dst := xs, tmp
	for _, b := range bytes[:nb] {
		c := &counts[b]
		if int(c[src[0].digit(b)]) == n {
			continue // the same byte everywhere
		}
		sum := int32(0)
		for v := range c {
			c[v], sum = sum, sum+c[v]
		}
		for i := range src {
			v := src[i].digit(b)
			dst[c[v]] = src[i]
			c[v]++
		}
		src, dst = dst, src
	}
	return src, dst
}

// digit is byte b of x's 16 sort bytes, least significant first
// (radixSortKeys' digit).
func (x *keyOrder) digit(b uint) byte {
	if b < 8 {
		return byte(x.lo >> (8 * b))
	}
	return byte(x.hi >> (8 * (b - 8)))
}
