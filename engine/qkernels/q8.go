// Package qkernels holds the weight-only int8 products of the CPU engine:
// weights and activations quantized in blocks of 32 values with one float32
// scale each (the Q8_0 layout of llama.cpp, scale widened to float32), and C
// kernels for y = W x (+ b) over one or a few input rows: a portable one and,
// on x86-64, AVX2, AVX-512 and AVX-512 VNNI forms chosen at run time from
// CPUID. It knows nothing of models.
package qkernels

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "q8.h"
*/
import "C"

import (
	"fmt"

	"os"
	"sync"
	"talkbox/engine/cores"
	"unsafe"
)

// Block is the number of values sharing one scale.
const Block = 32

// Path is one compiled form of the kernels.
type Path int

// The paths, slowest first (the values are q8.h's enum).
const (
	Portable Path = iota
	AVX2
	AVX512
	AVX512VNNI
)

var pathNames = [...]string{"portable", "avx2", "avx512", "avx512-vnni"}

func (p Path) String() string {
	if p < 0 || int(p) >= len(pathNames) {
		return fmt.Sprintf("path(%d)", int(p))
	}
	return pathNames[p]
}

// ParsePath reads a path name as String writes it.
func ParsePath(s string) (Path, error) {
	for i, n := range pathNames {
		if n == s {
			return Path(i), nil
		}
	}
	return 0, fmt.Errorf("qkernels: unknown kernel path %q (want portable, avx2, avx512 or avx512-vnni)", s)
}

// Supported reports whether p is compiled in and this CPU (and OS) runs it.
func Supported(p Path) bool {
	return p >= Portable && p <= AVX512VNNI && C.q8_compiled(C.int(p)) != 0 && cpuHas(p)
}

// Paths lists the supported paths, slowest first.
func Paths() []Path {
	var ps []Path
	for p := Portable; p <= AVX512VNNI; p++ {
		if Supported(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// EnvPath names the environment variable that forces a path (for checking
// the fallback on a machine that has the faster ones); an unsupported or
// unknown value is ignored with the best path used instead.
const EnvPath = "TALKBOX_Q8_PATH"

// Best is the fastest supported path, or the one EnvPath names if supported.
func Best() Path {
	if s := os.Getenv(EnvPath); s != "" {
		if p, err := ParsePath(s); err == nil && Supported(p) {
			return p
		}
	}
	ps := Paths()
	return ps[len(ps)-1]
}

// Matrix is a quantized row-major [Rows, Cols] weight (the Linear layout
// [out, in]): row r's Blocks blocks are Q[r*Blocks*32:] with scales
// D[r*Blocks:], the last block zero-padded when Cols is not a multiple of 32.
type Matrix struct {
	Rows, Cols, Blocks int
	Q                  []int8
	D                  []float32
}

// Quantize converts a row-major [rows, cols] float32 weight, splitting the
// rows over threads goroutines.
func Quantize(w []float32, rows, cols, threads int) *Matrix {
	kb := (cols + Block - 1) / Block
	m := &Matrix{Rows: rows, Cols: cols, Blocks: kb, Q: make([]int8, rows*kb*Block), D: make([]float32, rows*kb)}
	if rows == 0 || cols == 0 {
		return m
	}
	_ = w[rows*cols-1]
	path := Best()
	parallel(threads, rows, rows*cols/8, func(lo, hi int) {
		quantizeRows(path, w[lo*cols:], hi-lo, cols, cols, m.Q[lo*kb*Block:], m.D[lo*kb:])
	})
	return m
}

// Bytes is the matrix's size in memory.
func (m *Matrix) Bytes() int { return len(m.Q) + 4*len(m.D) }

// Dequantize returns the float32 weight the matrix stands for (tests).
func (m *Matrix) Dequantize() []float32 {
	w := make([]float32, m.Rows*m.Cols)
	for r := 0; r < m.Rows; r++ {
		for c := 0; c < m.Cols; c++ {
			w[r*m.Cols+c] = m.D[r*m.Blocks+c/Block] * float32(m.Q[r*m.Blocks*Block+c])
		}
	}
	return w
}

// quantizeRows quantizes with path's instructions; every path gives the same
// bytes.
func quantizeRows(p Path, x []float32, n, cols, ldx int, q []int8, d []float32) {
	C.q8_quantize_rows(C.int(p), (*C.float)(unsafe.Pointer(&x[0])), C.int(n), C.int(cols), C.int(ldx),
		(*C.int8_t)(unsafe.Pointer(&q[0])), (*C.float)(unsafe.Pointer(&d[0])))
}

// Kernels run the products on one path with up to threads goroutines. They
// are safe for concurrent use.
type Kernels struct {
	path    Path
	threads int
	acts    sync.Pool // *acts: quantized input rows
}

type acts struct {
	q []int8
	d []float32
}

// New returns kernels on path p (which must be Supported) with threads
// goroutines (0 = every core engine/cores computes on).
func New(p Path, threads int) (*Kernels, error) {
	if !Supported(p) {
		return nil, fmt.Errorf("qkernels: path %s is not supported on this machine", p)
	}
	if threads <= 0 {
		threads = cores.Limit()
	}
	return &Kernels{path: p, threads: threads}, nil
}

// Path is the kernels' path.
func (k *Kernels) Path() Path { return k.path }

// Threads is the kernels' goroutine count.
func (k *Kernels) Threads() int { return k.threads }

// MatMul sets Y[i, r] = W[r,:]·X[i,:] + b[r] for n input rows (X is
// [n, m.Cols] float32, quantized here per row; Y is [n, m.Rows]); b may be
// nil. n = 1 is the matrix-vector product of decoding, larger n the prefill.
func (k *Kernels) MatMul(m *Matrix, b, x []float32, n int, y []float32) {
	if n <= 0 || m.Rows == 0 {
		return
	}
	y = y[:n*m.Rows]
	if m.Cols == 0 {
		for i := range y {
			y[i] = 0
			if b != nil {
				y[i] = b[i%m.Rows]
			}
		}
		return
	}
	_ = x[n*m.Cols-1]
	if b != nil {
		_ = b[m.Rows-1]
	}
	kb := m.Blocks
	a, _ := k.acts.Get().(*acts)
	if a == nil {
		a = &acts{}
	}
	if cap(a.q) < n*kb*Block {
		a.q = make([]int8, n*kb*Block)
		a.d = make([]float32, n*kb)
	}
	aq, ad := a.q[:n*kb*Block], a.d[:n*kb]
	quantizeRows(k.path, x, n, m.Cols, m.Cols, aq, ad)
	var bp *C.float
	if b != nil {
		bp = (*C.float)(unsafe.Pointer(&b[0]))
	}
	parallel(k.threads, m.Rows, n*m.Rows*kb*Block, func(lo, hi int) {
		C.q8_gemm(C.int(k.path), C.int(lo), C.int(hi), C.int(kb),
			(*C.int8_t)(unsafe.Pointer(&m.Q[0])), (*C.float)(unsafe.Pointer(&m.D[0])),
			C.int(n), (*C.int8_t)(unsafe.Pointer(&aq[0])), (*C.float)(unsafe.Pointer(&ad[0])),
			bp, (*C.float)(unsafe.Pointer(&y[0])), C.int(m.Rows))
	})
	k.acts.Put(a)
}

// MatVec is MatMul with one input row.
func (k *Kernels) MatVec(m *Matrix, b, x, y []float32) { k.MatMul(m, b, x, 1, y) }

// parallel runs fn over [0, rows) in bands of whole 16-row groups on at most
// threads goroutines, sharing the cores with the codec (engine/cores); work
// is the job's size in multiply-adds, and jobs too small to pay for a
// goroutine stay on the caller's.
func parallel(threads, rows, work int, fn func(lo, hi int)) {
	const minWork = 1 << 16
	cores.For(rows, 16, min(threads, max(1, work/minWork)), fn)
}
