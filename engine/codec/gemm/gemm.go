// Package gemm is the codec's float32 matrix product in C: weights packed
// once into panels of 16 output columns, inputs read in place (a causal
// conv's taps are row offsets into its input, so no im2col copy is made),
// an AVX2+FMA kernel of 6 rows by 16 columns chosen at run time, and a
// portable one. Every output is one float32 accumulator summed over the taps
// and then the channels in order, so a row's result is bit-identical however
// many rows are computed with it: what lets a streaming push of one frame
// give the samples of a push of many (OpenBLAS is not used for this reason:
// it takes gemv for one row and gemm for several, which round differently).
// It is its own package because engine/codec holds Go assembly, which
// cannot share a package with cgo.
package gemm

/*
#cgo CFLAGS: -O3
#include "gemm.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/cpu"

	"talkbox/engine/cores"
)

// NR is the number of output columns in one packed panel.
const NR = C.GEMM_NR

// Path is one compiled form of the kernel.
type Path int

// The paths, slowest first (the values are gemm.h's enum).
const (
	Portable Path = iota
	AVX2
)

func (p Path) String() string {
	switch p {
	case Portable:
		return "portable"
	case AVX2:
		return "avx2"
	}
	return fmt.Sprintf("path(%d)", int(p))
}

// Supported reports whether p is compiled in and this CPU (and OS) runs it.
func Supported(p Path) bool {
	switch p {
	case Portable:
		return true
	case AVX2:
		return compiledAVX2() && cpu.X86.HasAVX2 && cpu.X86.HasFMA
	}
	return false
}

// compiledAVX2 reports whether the AVX2 kernel is compiled in (x86-64).
func compiledAVX2() bool { return C.gemm_compiled(C.GEMM_AVX2) != 0 }

// EnvPath names the environment variable that forces the portable path
// ("portable") on a machine that has AVX2; other values are ignored.
const EnvPath = "TALKBOX_GEMM_PATH"

// Best is the fastest supported path, unless EnvPath asks for portable.
func Best() Path {
	if os.Getenv(EnvPath) == "portable" || !Supported(AVX2) {
		return Portable
	}
	return AVX2
}

var path = Best()

// SetPath makes p the path every product runs on (tests compare paths) and
// returns the previous one. p must be Supported.
func SetPath(p Path) Path {
	if !Supported(p) {
		panic(fmt.Sprintf("gemm: path %s is not supported here", p))
	}
	old := path
	path = p
	return old
}

// Matrix is an N×K weight (the Linear layout [out][in]) packed into
// ceil(N/NR) panels, each [K][NR]: panel p's k-th group of NR values is
// W[p·NR .. p·NR+NR-1][k], zeros past N.
type Matrix struct {
	N, K int
	p    []float32
}

// Pack packs a row-major N×K weight.
func Pack(w []float32, N, K int) *Matrix {
	if len(w) < N*K {
		panic(fmt.Sprintf("gemm: Pack of %dx%d from %d values", N, K, len(w)))
	}
	panels := (N + NR - 1) / NR
	m := &Matrix{N: N, K: K, p: make([]float32, panels*K*NR)}
	for n := 0; n < N; n++ {
		dst := m.p[(n/NR)*K*NR+n%NR:]
		row := w[n*K : (n+1)*K]
		for k, v := range row {
			dst[k*NR] = v
		}
	}
	return m
}

// Unpack returns the row-major N×K weight the matrix holds.
func (m *Matrix) Unpack() []float32 {
	w := make([]float32, m.N*m.K)
	for n := 0; n < m.N; n++ {
		src := m.p[(n/NR)*m.K*NR+n%NR:]
		row := w[n*m.K : (n+1)*m.K]
		for k := range row {
			row[k] = src[k*NR]
		}
	}
	return w
}

// MaxTaps bounds the taps of one Conv.
const MaxTaps = 16

// Conv sets out[m·N+n] = bias[n] + Σ_t Σ_i a[m·lda+off[t]+i]·W[n][t·kin+i]
// for m < M, where kin = K/len(off): a causal conv with len(off) taps whose
// inputs for output row m start at offsets off[t] of input row m (off[t] =
// t·dilation·channels, lda = stride·channels), read in place. bias may be
// nil. The work is split over the cores engine/cores grants.
func Conv(out, a []float32, M, lda int, off []int, w *Matrix, bias []float32) {
	taps := len(off)
	if M <= 0 || w.N == 0 {
		return
	}
	if taps == 0 || taps > MaxTaps || w.K%taps != 0 {
		panic(fmt.Sprintf("gemm: %d taps for K = %d", taps, w.K))
	}
	kin := w.K / taps
	_ = out[M*w.N-1]
	if bias != nil {
		_ = bias[w.N-1]
	}
	if kin == 0 {
		for m := 0; m < M; m++ {
			for n := 0; n < w.N; n++ {
				out[m*w.N+n] = 0
				if bias != nil {
					out[m*w.N+n] = bias[n]
				}
			}
		}
		return
	}
	for t, o := range off {
		if o < 0 || (M-1)*lda+o+kin > len(a) {
			panic(fmt.Sprintf("gemm: tap %d at offset %d reads past the %d inputs (M %d, lda %d, kin %d)", t, o, len(a), M, lda, kin))
		}
	}
	if taps > 1 && kin < minTapChannels {
		// Few channels a tap (the encoder's first conv reads one): the
		// kernel would run kin steps between loads and stores of its tile,
		// so gather the taps into rows first (im2col). The sums run in the
		// same order, so the result is the same.
		col := make([]float32, M*w.K)
		for m := 0; m < M; m++ {
			for t, o := range off {
				copy(col[m*w.K+t*kin:m*w.K+(t+1)*kin], a[m*lda+o:m*lda+o+kin])
			}
		}
		a, lda, off, taps, kin = col, w.K, []int{0}, 1, w.K
	}
	var offs [MaxTaps]int64
	for t, o := range off {
		offs[t] = int64(o)
	}
	p := path
	run := func(m0, m1, p0, p1 int) {
		var bp *C.float
		if bias != nil {
			bp = (*C.float)(unsafe.Pointer(&bias[0]))
		}
		C.gemm_conv(C.int(p), (*C.float)(unsafe.Pointer(&out[0])), C.int64_t(w.N),
			(*C.float)(unsafe.Pointer(&a[0])), C.int64_t(lda), (*C.int64_t)(unsafe.Pointer(&offs[0])), C.int(taps), C.int(kin),
			(*C.float)(unsafe.Pointer(&w.p[0])), C.int(w.N), bp, C.int(m0), C.int(m1), C.int(p0), C.int(p1))
	}
	panels := (w.N + NR - 1) / NR
	workers := min(cores.Limit(), 16)
	if workers <= 1 || M*w.N*w.K < parallelMinMACs {
		run(0, M, 0, panels)
		return
	}
	// Split the operand that is read more than once: by panels when the
	// weights are the larger (each worker streams its own weights once), by
	// rows otherwise, in whole 6-row kernel blocks.
	if w.N >= M || M < 12*workers {
		cores.For(panels, 1, workers, func(p0, p1 int) { run(0, M, p0, p1) })
	} else {
		cores.For(M, 6, workers, func(m0, m1 int) { run(m0, m1, 0, panels) })
	}
}

// minTapChannels is the fewest channels a tap that Conv reads in place.
const minTapChannels = 32

// parallelMinMACs is the smallest product worth splitting across
// goroutines: below it starting one costs more than it saves.
const parallelMinMACs = 1 << 17

// NT sets out[m·N+n] = bias[n] + Σ_k a[m·K+k]·W[n][k] for an M×K input:
// a Linear layer (or 1×1 conv) on M rows.
func NT(out, a []float32, M int, w *Matrix, bias []float32) {
	Conv(out, a, M, w.K, []int{0}, w, bias)
}
