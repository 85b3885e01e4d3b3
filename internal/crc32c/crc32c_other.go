//go:build !amd64

package crc32c

const useCLMUL = false

func updateCLMUL(uint32, []byte) uint32 {
	panic("crc32c: no carry-less multiplication path on this architecture")
}
