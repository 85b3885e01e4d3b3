package nexmark

import (
	"encoding/binary"
	"fmt"

	"github.com/weirhq/weir/stream"
)

// fixedCodec is a binary stream codec for values of type T that are size
// bytes each — structs of int64 fields, as the queries' intermediate
// results are — cheaper than JSON where a query repartitions or stores
// many of them. put writes v into b (len size); get reads it back.
type fixedCodec[T any] struct {
	size int
	put  func(b []byte, v T)
	get  func(b []byte) T
}

func (c fixedCodec[T]) Encode(v T) ([]byte, error) {
	b := make([]byte, c.size)
	c.put(b, v)
	return b, nil
}

func (c fixedCodec[T]) Decode(b []byte) (T, error) {
	if len(b) != c.size {
		var zero T
		return zero, fmt.Errorf("nexmark: want %d bytes, got %d", c.size, len(b))
	}
	return c.get(b), nil
}

// sliceOf is the codec of []T as the concatenation of its elements.
func sliceOf[T any](c fixedCodec[T]) stream.Codec[[]T] { return sliceCodec[T]{c} }

type sliceCodec[T any] struct{ elem fixedCodec[T] }

func (c sliceCodec[T]) Encode(vs []T) ([]byte, error) {
	b := make([]byte, len(vs)*c.elem.size)
	for i, v := range vs {
		c.elem.put(b[i*c.elem.size:], v)
	}
	return b, nil
}

func (c sliceCodec[T]) Decode(b []byte) ([]T, error) {
	if len(b)%c.elem.size != 0 {
		return nil, fmt.Errorf("nexmark: want a multiple of %d bytes, got %d", c.elem.size, len(b))
	}
	vs := make([]T, len(b)/c.elem.size)
	for i := range vs {
		vs[i] = c.elem.get(b[i*c.elem.size:])
	}
	return vs, nil
}

// putInt64s writes vs into b, 8 big-endian bytes each.
func putInt64s(b []byte, vs ...int64) {
	for i, v := range vs {
		binary.BigEndian.PutUint64(b[8*i:], uint64(v))
	}
}

// int64At is the i-th int64 of b as putInt64s wrote it.
func int64At(b []byte, i int) int64 { return int64(binary.BigEndian.Uint64(b[8*i:])) }

// q5Codec is Q5Result's, for q5's last stage.
var q5Codec = fixedCodec[Q5Result]{size: 32,
	put: func(b []byte, r Q5Result) { putInt64s(b, r.WindowStart, r.WindowEnd, r.Auction, r.Num) },
	get: func(b []byte) Q5Result {
		return Q5Result{WindowStart: int64At(b, 0), WindowEnd: int64At(b, 1), Auction: int64At(b, 2), Num: int64At(b, 3)}
	},
}

// q7Codec is Q7Result's, for q7's aggregates.
var q7Codec = fixedCodec[Q7Result]{size: 48,
	put: func(b []byte, r Q7Result) {
		putInt64s(b, r.WindowStart, r.WindowEnd, r.Auction, r.Bidder, r.Price, r.DateTime)
	},
	get: func(b []byte) Q7Result {
		return Q7Result{WindowStart: int64At(b, 0), WindowEnd: int64At(b, 1), Auction: int64At(b, 2),
			Bidder: int64At(b, 3), Price: int64At(b, 4), DateTime: int64At(b, 5)}
	},
}
