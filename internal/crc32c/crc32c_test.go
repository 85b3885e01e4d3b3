package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var stdTable = crc32.MakeTable(crc32.Castagnoli)

// TestMatchesHashCRC32 checks Update against hash/crc32 for every length up
// to a few kilobytes, at every alignment of the start within 64 bytes and
// from several starting CRCs, then for long inputs; on a CPU with AVX-512
// VPCLMULQDQ this covers the folding path and its hand-over to hash/crc32
// for the tail.
func TestMatchesHashCRC32(t *testing.T) {
	if !useCLMUL {
		t.Log("this CPU has no AVX-512 VPCLMULQDQ: only the hash/crc32 path is checked")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20+200)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	inits := []uint32{0, 0xffffffff, 0x12345678}
	for n := 0; n <= 4200; n++ {
		off := n % 64
		p := buf[off : off+n]
		for _, init := range inits {
			if got, want := Update(init, p), crc32.Update(init, stdTable, p); got != want {
				t.Fatalf("Update(%#x, %d bytes at +%d) = %#x, hash/crc32 %#x", init, n, off, got, want)
			}
		}
	}
	for _, n := range []int{1 << 16, 1<<16 + 63, 1<<20 - 1, 1 << 20, 1<<20 + 129} {
		for _, off := range []int{0, 1, 17, 63} {
			p := buf[off : off+n]
			if got, want := Checksum(p), crc32.Checksum(p, stdTable); got != want {
				t.Fatalf("Checksum(%d bytes at +%d) = %#x, hash/crc32 %#x", n, off, got, want)
			}
		}
	}
}

// TestUpdateChains checks that a checksum computed in pieces, cut anywhere,
// equals the checksum of the whole.
func TestUpdateChains(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 20000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	want := crc32.Checksum(buf, stdTable)
	for range 200 {
		var crc uint32
		for rest := buf; len(rest) > 0; {
			n := min(len(rest), rng.IntN(3000))
			crc = Update(crc, rest[:n])
			rest = rest[n:]
		}
		if crc != want {
			t.Fatalf("pieces gave %#x, whole %#x", crc, want)
		}
	}
}

// TestFoldingConstants checks reflectedXPow by the defining property of
// powers, x^(a+b) = x^a * x^b mod P (the product computed by shifting the
// reflected value, independently of reflectedXPow's loop), and against the
// reflected polynomial itself, so a wrong constant is caught even on a CPU
// where the folding path does not run.
func TestFoldingConstants(t *testing.T) {
	mul := func(a, b uint64) uint64 { // both reflected in the upper 32 bits
		x, y := uint32(a>>32), uint32(b>>32)
		var r uint32
		for i := 0; i < 32; i++ {
			if y&(1<<31>>i) != 0 { // coefficient of x^i in y
				r ^= mulX(x, i)
			}
		}
		return uint64(r) << 32
	}
	for _, c := range [][3]int{{64, 63, 127}, {1000, 1047, 2047}, {0, 2111, 2111}, {32, 31, 63}} {
		if got, want := mul(reflectedXPow(c[0]), reflectedXPow(c[1])), reflectedXPow(c[2]); got != want {
			t.Fatalf("x^%d * x^%d = %#x, x^%d = %#x", c[0], c[1], got, c[2], want)
		}
	}
	if reflectedXPow(0) != 1<<63 || reflectedXPow(31) != 1<<32 {
		t.Fatalf("x^0 = %#x, x^31 = %#x", reflectedXPow(0), reflectedXPow(31))
	}
	if reflectedXPow(32) != uint64(0x82F63B78)<<32 {
		t.Fatalf("x^32 = %#x, want the reflected polynomial", reflectedXPow(32))
	}
}

// mulX returns the reflected polynomial x (coefficient of x^d at bit 31-d)
// times x^i mod P.
func mulX(x uint32, i int) uint32 {
	for range i {
		carry := x & 1
		x >>= 1
		if carry != 0 {
			x ^= 0x82F63B78
		}
	}
	return x
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), []byte("hello"), uint8(0))
	f.Add(uint32(0xffffffff), make([]byte, 600), uint8(3))
	f.Add(uint32(7), make([]byte, 4097), uint8(63))
	f.Fuzz(func(t *testing.T, init uint32, p []byte, off uint8) {
		o := min(int(off), len(p))
		if got, want := Update(init, p[o:]), crc32.Update(init, stdTable, p[o:]); got != want {
			t.Fatalf("Update(%#x, %d bytes) = %#x, hash/crc32 %#x", init, len(p)-o, got, want)
		}
	})
}
