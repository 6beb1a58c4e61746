package codec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmMatchesNaive checks the tiled, parallel, SIMD product against a
// float64 triple loop for shapes that hit every edge path (odd rows, columns
// not a multiple of 4, K with and without a multiple-of-8 part).
func TestGemmMatchesNaive(t *testing.T) { checkGemmNaive(t) }

// TestGemmPortable runs the same check on the pure-Go path used without
// AVX2/FMA (and on other architectures).
func TestGemmPortable(t *testing.T) {
	if !useAVX {
		t.Skip("already portable")
	}
	setAVX(false)
	defer setAVX(true)
	checkGemmNaive(t)
}

func checkGemmNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {2, 4, 8}, {7, 9, 29}, {33, 70, 300}, {64, 96, 672}, {5, 1, 672}} {
		M, N, K := sh[0], sh[1], sh[2]
		a, w, bias := randVec(r, M*K), randVec(r, N*K), randVec(r, N)
		out := make([]float32, M*N)
		gemmNT(out, a, w, bias, M, N, K)
		for m := 0; m < M; m++ {
			for n := 0; n < N; n++ {
				want, mag := float64(bias[n]), math.Abs(float64(bias[n]))
				for k := 0; k < K; k++ {
					p := float64(a[m*K+k]) * float64(w[n*K+k])
					want += p
					mag += math.Abs(p)
				}
				// The standard float32 summation bound K·u·Σ|terms| (u = 2⁻²⁴);
				// an indexing mistake gives errors of the order of the terms.
				if d := math.Abs(want - float64(out[m*N+n])); d > float64(K+1)*0x1p-24*mag+1e-6 {
					t.Fatalf("M=%d N=%d K=%d: out[%d,%d] off by %.3g (Σ|terms| %.3g)", M, N, K, m, n, d, mag)
				}
			}
		}
	}
}

// TestGemmRowIndependent checks the property streaming relies on: a row's
// result is bit-identical whether it is computed alone or with other rows.
func TestGemmRowIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	M, N, K := 37, 70, 300
	a, w := randVec(r, M*K), randVec(r, N*K)
	all := make([]float32, M*N)
	gemmNT(all, a, w, nil, M, N, K)
	for m := 0; m < M; m++ {
		one := make([]float32, N)
		gemmNT(one, a[m*K:(m+1)*K], w, nil, 1, N, K)
		for n := range one {
			if one[n] != all[m*N+n] {
				t.Fatalf("row %d col %d: alone %v, in batch %v", m, n, one[n], all[m*N+n])
			}
		}
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}
