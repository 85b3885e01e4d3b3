package crc32c

import "golang.org/x/sys/cpu"

// useCLMUL reports whether updateCLMUL can run: AVX-512 with the 512-bit
// VPCLMULQDQ, and SSE 4.2 for the final CRC32 instructions.
var useCLMUL = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42

// updateCLMUL returns the CRC-32C register after p, starting from register
// value crc (not complemented). len(p) must be a multiple of 64 and at least
// 256. Implemented in crc32c_amd64.s.
//
//go:noescape
func updateCLMUL(crc uint32, p []byte) uint32

// clmulConsts are the folding constants updateCLMUL reads:
//
//	[0:2]   fold a 128-bit lane 256 bytes forward (the 4-accumulator loop)
//	[2:4]   fold a lane 64 bytes forward (4 accumulators into 1, the 64-byte loop)
//	[8:16]  fold lanes 0, 1 and 2 of the last 64 bytes forward by 48, 32 and
//	        16 bytes onto lane 3 (lane 3's constants are zero)
//
// How a fold works, in the bit-reflected order CRC-32C uses: a 16-byte lane
// loaded little-endian holds the polynomial A = H*x^64 + L with H in its low
// quadword (the earlier bytes). Moving A forward by F bits, i.e. replacing it
// by a value congruent to A*x^F mod P at the position F bits later, is
// H*(x^(F+64) mod P) + L*(x^F mod P). A carry-less product of two reflected
// 64-bit values is the reflected product times x, so the constants are
// x^(F+63) mod P for the low quadword and x^(F-1) mod P for the high one,
// each reflected into the upper 32 bits of a quadword. The products have
// degree below 96, so they fit the 128-bit lane they are XORed into.
var clmulConsts [16]uint64

func init() {
	fold := func(i int, bytes int) {
		f := 8 * bytes
		clmulConsts[i] = reflectedXPow(f + 63)
		clmulConsts[i+1] = reflectedXPow(f - 1)
	}
	fold(0, 256)
	fold(2, 64)
	fold(8, 48)
	fold(10, 32)
	fold(12, 16)
}
