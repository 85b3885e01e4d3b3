package crc32c

import (
	"fmt"
	"hash/crc32"
	"testing"
)

// BenchmarkHot checksums one buffer again and again (it stays in cache);
// BenchmarkCold walks 1 MiB pieces of a 512 MiB buffer, so every piece comes
// from memory, as a produce request's batches do by the time the broker
// validates them. Each runs this package and hash/crc32 in the same run:
// compare the two sub-benchmarks' MB/s.
func BenchmarkHot(b *testing.B) {
	for _, n := range []int{256, 512, 1024, 16 << 10, 1 << 20} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		b.Run(fmt.Sprintf("size=%d/crc32c", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				Checksum(buf)
			}
		})
		b.Run(fmt.Sprintf("size=%d/hash-crc32", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Checksum(buf, stdTable)
			}
		})
	}
}

func BenchmarkCold(b *testing.B) {
	const piece = 1 << 20
	big := make([]byte, 512<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	run := func(b *testing.B, sum func([]byte) uint32) {
		b.SetBytes(piece)
		off := 0
		for b.Loop() {
			sum(big[off : off+piece])
			off = (off + piece) % len(big)
		}
	}
	for _, off := range []int{0, 21} { // 21: where a record batch's checksummed bytes start
		b.Run(fmt.Sprintf("offset=%d/crc32c", off), func(b *testing.B) {
			run(b, func(p []byte) uint32 { return Checksum(p[off:]) })
		})
		b.Run(fmt.Sprintf("offset=%d/hash-crc32", off), func(b *testing.B) {
			run(b, func(p []byte) uint32 { return crc32.Checksum(p[off:], stdTable) })
		})
	}
}
