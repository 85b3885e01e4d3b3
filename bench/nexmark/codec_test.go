package nexmark

import (
	"bytes"
	"reflect"
	"testing"
)

func TestFixedCodecRoundTrip(t *testing.T) {
	rs := []Q5Result{{WindowStart: 1, WindowEnd: 2, Auction: -3, Num: 1 << 62}, {Auction: 1000}}
	b, err := q5Codec.Encode(rs[0])
	if err != nil || len(b) != 32 {
		t.Fatalf("Encode = %x, %v: want 32 bytes", b, err)
	}
	if got, err := q5Codec.Decode(b); err != nil || got != rs[0] {
		t.Fatalf("Decode = %+v, %v, want %+v", got, err, rs[0])
	}
	if _, err := q5Codec.Decode(b[:31]); err == nil {
		t.Fatal("Decode of 31 bytes succeeded")
	}
	sc := sliceOf(q5Codec)
	for _, in := range [][]Q5Result{nil, rs[:1], rs} {
		b, _ := sc.Encode(in)
		got, err := sc.Decode(b)
		if err != nil || len(got) != len(in) || (len(in) > 0 && !reflect.DeepEqual(got, in)) {
			t.Fatalf("slice round trip of %+v = %+v, %v", in, got, err)
		}
	}
	if _, err := sc.Decode(make([]byte, 33)); err == nil {
		t.Fatal("slice Decode of 33 bytes succeeded")
	}
	bid := Q7Result{WindowStart: 1, WindowEnd: 2, Auction: 3, Bidder: 4, Price: -5, DateTime: 6}
	b7, _ := sliceOf(q7Codec).Encode([]Q7Result{bid, bid})
	if got, err := sliceOf(q7Codec).Decode(b7); err != nil || len(b7) != 96 || !reflect.DeepEqual(got, []Q7Result{bid, bid}) {
		t.Fatalf("q7 round trip: %+v, %v (%d bytes)", got, err, len(b7))
	}
}

// FuzzFixedCodec: a value either fails to decode or re-encodes to itself.
func FuzzFixedCodec(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Add(make([]byte, 64))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		if v, err := q5Codec.Decode(in); err == nil {
			if b, _ := q5Codec.Encode(v); !bytes.Equal(b, in) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", in, v, b)
			}
		}
		sc := sliceOf(q5Codec)
		if vs, err := sc.Decode(in); err == nil {
			if b, _ := sc.Encode(vs); !bytes.Equal(b, in) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", in, vs, b)
			}
		}
	})
}
