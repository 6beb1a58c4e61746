// Package swiglu is the CPU LM's MLP activation, silu(gate)·up, with an
// AVX2 form in C: four exponentials at a time in double precision, where the
// Go loop calls math.Exp once per element (it and the loop were ~4% of the
// int8 LM's CPU time in a profile). It
// is its own package because the Go assembly of engine/f32vec cannot share
// a package with cgo.
package swiglu

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "swiglu.h"
*/
import "C"

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the C form (AVX2 and FMA on x86-64).
var useAVX2 = C.swiglu_compiled() != 0 && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// Silu is x·sigmoid(x) as the CPU engine defines it: x / (1 + e) with
// e = exp(-x) in float64 rounded to float32.
func Silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// Apply sets act[j] = Silu(gate[j])·up[j] for j < len(act) (gate and up at
// least as long). The AVX2 form's exponential is within ~1 ulp (double) of
// math.Exp, so after the rounding to float32 the two forms agree except
// where the double result sits within an ulp of a float32 rounding boundary.
func Apply(act, gate, up []float32) {
	n := len(act)
	if n == 0 {
		return
	}
	gate, up = gate[:n], up[:n]
	if useAVX2 {
		C.swiglu_avx2((*C.float)(unsafe.Pointer(&gate[0])), (*C.float)(unsafe.Pointer(&up[0])),
			(*C.float)(unsafe.Pointer(&act[0])), C.int(n))
		return
	}
	for j := range act {
		act[j] = Silu(gate[j]) * up[j]
	}
}
