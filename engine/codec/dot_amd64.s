#include "textflag.h"

// Horizontal sum of the 8 lanes of Y into the float32 at M, in a fixed order
// (hi128+lo128, then high pair + low pair, then lane 1 + lane 0) shared by
// both kernels, so a dot product has the same rounding whichever kernel
// computed it.
#define HSUM(Y, X, M) \
	VEXTRACTF128 $1, Y, X8 \
	VADDPS X8, X, X \
	VMOVHLPS X, X, X8 \
	VADDPS X8, X, X \
	VPSHUFD $1, X, X8 \
	VADDSS X8, X, X \
	VMOVSS X, M

// func dot2x4AVX(a0, a1, w0, w1, w2, w3 *float32, n int, out *[8]float32)
// out[4i+j] = Σ_{k<n} a_i[k]·w_j[k]; n is a multiple of 8.
TEXT ·dot2x4AVX(SB), NOSPLIT, $0-64
	MOVQ a0+0(FP), AX
	MOVQ a1+8(FP), BX
	MOVQ w0+16(FP), CX
	MOVQ w1+24(FP), DX
	MOVQ w2+32(FP), SI
	MOVQ w3+40(FP), DI
	MOVQ n+48(FP), R8
	MOVQ out+56(FP), R9
	SHLQ $2, R8
	XORQ R10, R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

loop24:
	CMPQ R10, R8
	JGE  done24
	VMOVUPS (AX)(R10*1), Y8
	VMOVUPS (BX)(R10*1), Y9
	VMOVUPS (CX)(R10*1), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	VMOVUPS (DX)(R10*1), Y11
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS (SI)(R10*1), Y12
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y12, Y9, Y6
	VMOVUPS (DI)(R10*1), Y13
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y13, Y9, Y7
	ADDQ $32, R10
	JMP  loop24

done24:
	HSUM(Y0, X0, 0(R9))
	HSUM(Y1, X1, 4(R9))
	HSUM(Y2, X2, 8(R9))
	HSUM(Y3, X3, 12(R9))
	HSUM(Y4, X4, 16(R9))
	HSUM(Y5, X5, 20(R9))
	HSUM(Y6, X6, 24(R9))
	HSUM(Y7, X7, 28(R9))
	VZEROUPPER
	RET

// func dot1AVX(a, b *float32, n int) float32
// Σ_{k<n} a[k]·b[k] with the lane layout of dot2x4AVX; n is a multiple of 8.
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
