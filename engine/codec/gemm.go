package codec

import (
	"runtime"

	"talkbox/engine/cores"
)

// gemmNT computes out[m*N+n] = bias[n] + Σ_k a[m*K+k]·w[n*K+k] for an M×K
// matrix a and an N×K matrix w (both row-major, K contiguous: the layout of a
// Linear weight and of im2col'd conv inputs). bias may be nil.
//
// Every output element is one float32 accumulator summed over k in order,
// whatever the tiling or the number of goroutines, so a row's result does not
// depend on how many other rows are computed with it. That is what makes a
// streaming push of one frame give bit-for-bit the samples of a push of many.
//
// This is why the codec does not use engine/linalg's OpenBLAS products: BLAS
// takes gemv for one row and gemm for several, which round differently
// (TestGemmRowIndependent fails on it), and it is no faster here. Measured on
// the 2-core dev box with the synthetic released-shape decoder (20 frames,
// median ms/frame, three alternating runs): these AVX2 kernels 68-85, the
// linalg MatMul 84-104.
func gemmNT(out, a, w, bias []float32, M, N, K int) {
	if M == 0 || N == 0 {
		return
	}
	if K == 0 {
		for m := 0; m < M; m++ {
			for n := 0; n < N; n++ {
				out[m*N+n] = biasAt(bias, n)
			}
		}
		return
	}
	workers := gemmWorkers(M, N, K)
	if workers == 1 {
		gemmTile(out, a, w, bias, M, N, K, 0, M, 0, N)
		return
	}
	// Split the larger dimension into aligned, contiguous ranges on the
	// cores the LM leaves free (engine/cores): N when the weights are the
	// bigger operand (each worker streams its own weight rows once), M
	// otherwise.
	if N >= M || M < 4*workers {
		cores.For(N, 4, workers, func(n0, n1 int) { gemmTile(out, a, w, bias, M, N, K, 0, M, n0, n1) })
	} else {
		cores.For(M, 4, workers, func(m0, m1 int) { gemmTile(out, a, w, bias, M, N, K, m0, m1, 0, N) })
	}
}

// parallelMinMACs is the smallest product worth splitting across goroutines:
// below it the start-up of a goroutine costs more than it saves.
const parallelMinMACs = 1 << 17

func gemmWorkers(M, N, K int) int {
	p := runtime.GOMAXPROCS(0)
	if p <= 1 || M*N*K < parallelMinMACs {
		return 1
	}
	if p > 16 {
		p = 16
	}
	return p
}

func biasAt(bias []float32, n int) float32 {
	if bias == nil {
		return 0
	}
	return bias[n]
}

// gemmTile computes rows [m0,m1) × columns [n0,n1) of out. Rows of a are
// taken in panels that fit the cache, and each 4-row block of w is reused
// across a whole panel before moving on.
func gemmTile(out, a, w, bias []float32, M, N, K, m0, m1, n0, n1 int) {
	panel := (64 << 10) / (4 * K) // rows of a per ~64 KiB panel
	panel = max(4, panel&^3)
	for p0 := m0; p0 < m1; p0 += panel {
		p1 := min(p0+panel, m1)
		n := n0
		for ; n+4 <= n1; n += 4 {
			w0 := w[n*K : n*K+K]
			w1 := w[(n+1)*K : (n+1)*K+K]
			w2 := w[(n+2)*K : (n+2)*K+K]
			w3 := w[(n+3)*K : (n+3)*K+K]
			m := p0
			for ; m+2 <= p1; m += 2 {
				a0 := a[m*K : m*K+K]
				a1 := a[(m+1)*K : (m+1)*K+K]
				c := kernel2x4(a0, a1, w0, w1, w2, w3)
				o0 := out[m*N+n : m*N+n+4]
				o1 := out[(m+1)*N+n : (m+1)*N+n+4]
				for j := 0; j < 4; j++ {
					b := biasAt(bias, n+j)
					o0[j] = b + c[j]
					o1[j] = b + c[4+j]
				}
			}
			for ; m < p1; m++ {
				a0 := a[m*K : m*K+K]
				for j, wr := range [4][]float32{w0, w1, w2, w3} {
					out[m*N+n+j] = biasAt(bias, n+j) + dot(a0, wr)
				}
			}
		}
		for ; n < n1; n++ {
			wr := w[n*K : n*K+K]
			for m := p0; m < p1; m++ {
				out[m*N+n] = biasAt(bias, n) + dot(a[m*K:m*K+K], wr)
			}
		}
	}
}

// kernel2x4 returns the 8 dot products of rows a0,a1 with rows w0..w3
// (row-major 2×4).
func kernel2x4(a0, a1, w0, w1, w2, w3 []float32) [8]float32 {
	K := len(a0)
	a1, w0, w1, w2, w3 = a1[:K], w0[:K], w1[:K], w2[:K], w3[:K]
	var c [8]float32
	k8 := 0
	if useAVX {
		k8 = K &^ 7
		if k8 > 0 {
			dot2x4AVX(&a0[0], &a1[0], &w0[0], &w1[0], &w2[0], &w3[0], k8, &c)
		}
	}
	// The scalar part continues each sum in order; with no AVX it is the
	// whole sum, with eight accumulators so the loop is not latency bound.
	for k := k8; k < K; k++ {
		x0, x1 := a0[k], a1[k]
		y0, y1, y2, y3 := w0[k], w1[k], w2[k], w3[k]
		c[0] += x0 * y0
		c[1] += x0 * y1
		c[2] += x0 * y2
		c[3] += x0 * y3
		c[4] += x1 * y0
		c[5] += x1 * y1
		c[6] += x1 * y2
		c[7] += x1 * y3
	}
	return c
}

// dot is the same sum as one entry of kernel2x4, bit for bit.
func dot(a, b []float32) float32 {
	K := len(a)
	b = b[:K]
	var s float32
	k8 := 0
	if useAVX {
		k8 = K &^ 7
		if k8 > 0 {
			s = dot1AVX(&a[0], &b[0], k8)
		}
	}
	for k := k8; k < K; k++ {
		s += a[k] * b[k]
	}
	return s
}
