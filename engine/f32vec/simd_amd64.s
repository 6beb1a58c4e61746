#include "textflag.h"

// These kernels keep the float32 rounding of the Go loops in f32vec.go step
// for step: a product is rounded, then added (VMULPS, VADDPS: no fused
// multiply-add), and lane k of the accumulator sums the same elements in the
// same order as the Go loop's partial sum s_k.

// func dotLanesAVX(a, b *float32, n int, lanes *[8]float32)
// lanes[k] = Σ_{i<n, i%8==k} a[i]·b[i], in order of i; n is a multiple of 8.
TEXT ·dotLanesAVX(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), AX
	MOVQ b+8(FP), BX
	MOVQ n+16(FP), CX
	MOVQ lanes+24(FP), DX
	SHLQ $2, CX
	XORQ R10, R10
	VXORPS Y0, Y0, Y0

dotloop:
	CMPQ R10, CX
	JGE  dotdone
	VMOVUPS (AX)(R10*1), Y1
	VMULPS  (BX)(R10*1), Y1, Y1
	VADDPS  Y1, Y0, Y0
	ADDQ    $32, R10
	JMP     dotloop

dotdone:
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func addScaledAVX(dst, src *float32, n int, w float32)
// dst[i] += w·src[i] for i < n, n a multiple of 8.
TEXT ·addScaledAVX(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), AX
	MOVQ         src+8(FP), BX
	MOVQ         n+16(FP), CX
	VBROADCASTSS w+24(FP), Y2
	SHLQ         $2, CX
	XORQ         R10, R10

axpyloop:
	CMPQ    R10, CX
	JGE     axpydone
	VMULPS  (BX)(R10*1), Y2, Y1
	VADDPS  (AX)(R10*1), Y1, Y1
	VMOVUPS Y1, (AX)(R10*1)
	ADDQ    $32, R10
	JMP     axpyloop

axpydone:
	VZEROUPPER
	RET
