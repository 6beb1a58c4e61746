// Package snake is the codec's SnakeBeta activation, y = x + ib·sin²(a·x)
// per channel, vectorised in C (AVX2 + FMA, float32). It is its own package
// because engine/codec holds Go assembly, which cannot share a package with
// cgo.
package snake

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "snake.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Available reports whether Rows runs here (AVX2 and FMA on x86-64).
var Available = C.snake_compiled() != 0 && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// Rows sets y = x + ib·sin²(x·a) for rows [t0, t1) of ch channels (x and y
// row-major [rows, ch]). It must only be called when Available. The result
// is within 1e-6 (relative) of the float64 formula.
func Rows(x, y, a, ib []float32, t0, t1, ch int) {
	if t1 <= t0 || ch == 0 {
		return
	}
	_ = x[t1*ch-1]
	_ = y[t1*ch-1]
	_ = a[ch-1]
	_ = ib[ch-1]
	C.snake_rows_avx2((*C.float)(unsafe.Pointer(&x[0])), (*C.float)(unsafe.Pointer(&y[0])),
		(*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&ib[0])), C.int(t0), C.int(t1), C.int(ch))
}
