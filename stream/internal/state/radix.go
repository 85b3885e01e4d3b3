package state

// radixSort sorts xs stably by a key of nbytes bytes (byteAt(x, 0) the least
// significant) with an LSD radix sort, using tmp (grown as needed) as the
// second buffer. It returns the sorted elements and the other buffer: either
// may be xs's or tmp's backing array. A byte equal in every element costs no
// pass, so keys that differ only in their low bytes (the update times of one
// flush, the tails of keys sharing a prefix) sort in a few linear passes
// instead of n log n comparisons.
func radixSort[T any](xs, tmp []T, nbytes int, byteAt func(x *T, i int) byte) (sorted, spare []T) {
	n := len(xs)
	if n < 2 {
		return xs, tmp
	}
	if cap(tmp) < n {
		tmp = make([]T, n)
	}
	tmp = tmp[:n]
	counts := make([][256]int, nbytes)
	for i := range xs {
		for b := range nbytes {
			counts[b][byteAt(&xs[i], b)]++
		}
	}
	src, dst := xs, tmp
	for b := range nbytes {
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
