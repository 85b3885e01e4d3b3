#include "textflag.h"

// func updateCLMUL(crc uint32, p []byte) uint32
//
// Z0-Z3 hold four 64-byte accumulators, each four 128-bit lanes (see
// clmulConsts in crc32c_amd64.go for how a lane is folded forward). The
// register value crc is XORed into the first four bytes, which is what
// starting the CRC from it means for a reflected CRC.
TEXT ·updateCLMUL(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD     AX, X4
	VPXORQ    Z4, Z0, Z0
	ADDQ      $256, SI
	SUBQ      $256, CX

	VBROADCASTI32X4 ·clmulConsts+0(SB), Z8
	CMPQ CX, $256
	JB   fold4

loop256:
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPTERNLOGD $0x96, (SI), Z4, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z5
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPTERNLOGD $0x96, 64(SI), Z5, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z6
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPTERNLOGD $0x96, 128(SI), Z6, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z7
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, 192(SI), Z7, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	CMPQ       CX, $256
	JAE        loop256

fold4:
	// Z3 ^= fold64(Z2 ^ fold64(Z1 ^ fold64(Z0)))
	VBROADCASTI32X4 ·clmulConsts+16(SB), Z9
	VPCLMULQDQ      $0x00, Z9, Z0, Z4
	VPCLMULQDQ      $0x11, Z9, Z0, Z5
	VPTERNLOGD      $0x96, Z4, Z5, Z1
	VPCLMULQDQ      $0x00, Z9, Z1, Z4
	VPCLMULQDQ      $0x11, Z9, Z1, Z5
	VPTERNLOGD      $0x96, Z4, Z5, Z2
	VPCLMULQDQ      $0x00, Z9, Z2, Z4
	VPCLMULQDQ      $0x11, Z9, Z2, Z5
	VPTERNLOGD      $0x96, Z4, Z5, Z3
	CMPQ            CX, $64
	JB              reduce

loop64:
	VPCLMULQDQ $0x00, Z9, Z3, Z4
	VPCLMULQDQ $0x11, Z9, Z3, Z3
	VPTERNLOGD $0x96, (SI), Z4, Z3
	ADDQ       $64, SI
	SUBQ       $64, CX
	CMPQ       CX, $64
	JAE        loop64

reduce:
	// Lanes 0-2 folded onto lane 3, then the CRC of those 16 bytes from
	// register value 0 is the CRC of everything.
	VMOVDQU64     ·clmulConsts+64(SB), Z10
	VPCLMULQDQ    $0x00, Z10, Z3, Z4
	VPCLMULQDQ    $0x11, Z10, Z3, Z5
	VPXORQ        Z4, Z5, Z4
	VEXTRACTI32X4 $3, Z3, X6
	VEXTRACTI32X4 $1, Z4, X5
	VEXTRACTI32X4 $2, Z4, X7
	VPXOR         X4, X6, X6
	VPXOR         X5, X6, X6
	VPXOR         X7, X6, X6
	VMOVQ         X6, BX
	VPEXTRQ       $1, X6, DX
	VZEROUPPER
	XORL          AX, AX
	CRC32Q        BX, AX
	CRC32Q        DX, AX
	MOVL          AX, ret+32(FP)
	RET
