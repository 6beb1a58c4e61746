#include "textflag.h"

// Horizontal sum of the 8 lanes of Y into the float32 at M, in a fixed order
// (hi128+lo128, then high pair + low pair, then lane 1 + lane 0).
#define HSUM(Y, X, M) \
	VEXTRACTF128 $1, Y, X8 \
	VADDPS X8, X, X \
	VMOVHLPS X, X, X8 \
	VADDPS X8, X, X \
	VPSHUFD $1, X, X8 \
	VADDSS X8, X, X \
	VMOVSS X, M

// func dot1AVX(a, b *float32, n int) float32
// Σ_{k<n} a[k]·b[k] in 8 lanes, then HSUM; n is a multiple of 8.
TEXT ·dot1AVX(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), AX
	MOVQ b+8(FP), BX
	MOVQ n+16(FP), R8
	SHLQ $2, R8
	XORQ R10, R10
	VXORPS Y0, Y0, Y0

loop1:
	CMPQ R10, R8
	JGE  done1
	VMOVUPS (AX)(R10*1), Y8
	VFMADD231PS (BX)(R10*1), Y8, Y0
	ADDQ $32, R10
	JMP  loop1

done1:
	HSUM(Y0, X0, ret+24(FP))
	VZEROUPPER
	RET
