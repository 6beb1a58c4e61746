package gemm

import (
	"math"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// paths runs f once on every path this machine supports.
func paths(t *testing.T, f func(t *testing.T, p Path)) {
	for _, p := range []Path{Portable, AVX2} {
		if !Supported(p) {
			continue
		}
		t.Run(p.String(), func(t *testing.T) {
			old := SetPath(p)
			defer SetPath(old)
			f(t, p)
		})
	}
}

// TestDispatch: the portable path is always there, AVX2 is supported exactly
// when the CPU has AVX2 and FMA on x86-64, and Best picks it then.
func TestDispatch(t *testing.T) {
	if !Supported(Portable) {
		t.Fatal("portable path not supported")
	}
	want := cpu.X86.HasAVX2 && cpu.X86.HasFMA && compiledAVX2()
	if Supported(AVX2) != want {
		t.Errorf("Supported(AVX2) = %v, want %v", Supported(AVX2), want)
	}
	t.Setenv(EnvPath, "")
	if want && Best() != AVX2 {
		t.Errorf("Best() = %s on a CPU with AVX2", Best())
	}
	t.Setenv(EnvPath, "portable")
	if Best() != Portable {
		t.Errorf("Best() = %s with %s=portable", Best(), EnvPath)
	}
}

// naiveConv is the float64 reference of Conv and the sum of |terms| (the
// scale of float32 rounding).
func naiveConv(a []float32, M, lda int, off []int, w []float32, N, K int, bias []float32) (want, mag []float64) {
	kin := K / len(off)
	want, mag = make([]float64, M*N), make([]float64, M*N)
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			s, g := 0.0, 0.0
			if bias != nil {
				s, g = float64(bias[n]), math.Abs(float64(bias[n]))
			}
			for t, o := range off {
				for i := 0; i < kin; i++ {
					p := float64(a[m*lda+o+i]) * float64(w[n*K+t*kin+i])
					s += p
					g += math.Abs(p)
				}
			}
			want[m*N+n], mag[m*N+n] = s, g
		}
	}
	return want, mag
}

// TestConvMatchesNaive: every path agrees with the float64 product within
// float32 summation error, over shapes that hit every edge (rows not a
// multiple of 6, columns not a multiple of 16, channels past one 256 block,
// several taps with dilation and stride, no bias).
func TestConvMatchesNaive(t *testing.T) {
	paths(t, func(t *testing.T, _ Path) {
		r := rand.New(rand.NewPCG(1, 2))
		type shape struct{ M, N, kin, taps, dil, stride int }
		for _, s := range []shape{{1, 1, 1, 1, 1, 1}, {3, 5, 7, 1, 1, 1}, {7, 17, 29, 1, 1, 1}, {13, 70, 300, 1, 1, 1},
			{64, 96, 96, 7, 3, 1}, {5, 1, 96, 7, 9, 1}, {20, 33, 600, 2, 1, 1}, {9, 48, 40, 7, 1, 2}, {40, 300, 16, 3, 2, 1}, {50, 20, 1, 7, 1, 4}} {
			K := s.kin * s.taps
			off := make([]int, s.taps)
			for t := range off {
				off[t] = t * s.dil * s.kin
			}
			lda := s.stride * s.kin
			a := randVec(r, (s.M-1)*lda+off[s.taps-1]+s.kin)
			w, bias := randVec(r, s.N*K), randVec(r, s.N)
			if s.M == 13 {
				bias = nil
			}
			m := Pack(w, s.N, K)
			out := make([]float32, s.M*s.N)
			Conv(out, a, s.M, lda, off, m, bias)
			want, mag := naiveConv(a, s.M, lda, off, w, s.N, K, bias)
			for i := range out {
				// The float32 summation bound (K+1)·u·Σ|terms| (u = 2⁻²⁴); an
				// indexing mistake gives errors of the order of the terms.
				if d := math.Abs(want[i] - float64(out[i])); d > float64(K+1)*0x1p-24*mag[i]+1e-6 {
					t.Fatalf("%+v: out[%d,%d] off by %.3g (Σ|terms| %.3g)", s, i/s.N, i%s.N, d, mag[i])
				}
			}
		}
	})
}

// TestPathsAgree: the paths give the same products on the same input (up to
// their different rounding: FMA against multiply-then-add).
func TestPathsAgree(t *testing.T) {
	if !Supported(AVX2) {
		t.Skip("only the portable path runs here")
	}
	r := rand.New(rand.NewPCG(5, 6))
	M, N, kin, taps := 31, 77, 384, 7
	K := kin * taps
	off := make([]int, taps)
	for i := range off {
		off[i] = i * 3 * kin
	}
	a := randVec(r, (M-1)*kin+off[taps-1]+kin)
	m := Pack(randVec(r, N*K), N, K)
	bias := randVec(r, N)
	got := map[Path][]float32{}
	for _, p := range []Path{Portable, AVX2} {
		old := SetPath(p)
		got[p] = make([]float32, M*N)
		Conv(got[p], a, M, kin, off, m, bias)
		SetPath(old)
	}
	for i, v := range got[Portable] {
		if d := math.Abs(float64(v - got[AVX2][i])); d > 1e-3*(1+math.Abs(float64(v))) {
			t.Fatalf("out[%d]: portable %v, avx2 %v", i, v, got[AVX2][i])
		}
	}
}

// TestRowIndependent checks the property streaming relies on, on every
// path: a row's result is bit-identical whether it is computed alone or
// with other rows (whatever the split into 6-row blocks and goroutines).
func TestRowIndependent(t *testing.T) {
	paths(t, func(t *testing.T, _ Path) {
		r := rand.New(rand.NewPCG(3, 4))
		M, N, K := 37, 70, 600
		a, w, bias := randVec(r, M*K), randVec(r, N*K), randVec(r, N)
		m := Pack(w, N, K)
		all := make([]float32, M*N)
		NT(all, a, M, m, bias)
		for row := 0; row < M; row++ {
			for _, n := range []int{1, 2, 5} {
				if row+n > M {
					continue
				}
				part := make([]float32, n*N)
				NT(part, a[row*K:(row+n)*K], n, m, bias)
				for j := range N {
					if part[j] != all[row*N+j] {
						t.Fatalf("row %d col %d: in a push of %d %v, in one of %d %v", row, j, n, part[j], M, all[row*N+j])
					}
				}
			}
		}
	})
}

// TestPackRoundTrip: Unpack gives back the packed weight, padding included
// only in the packed form.
func TestPackRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][2]int{{1, 1}, {16, 3}, {17, 5}, {70, 300}} {
		w := randVec(r, sh[0]*sh[1])
		got := Pack(w, sh[0], sh[1]).Unpack()
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%v: value %d is %v after a round trip, want %v", sh, i, got[i], w[i])
			}
		}
	}
}

// TestConvChecksBounds: offsets that would read past the input are refused
// before any C code runs.
func TestConvChecksBounds(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a tap past the input")
		}
	}()
	m := Pack(make([]float32, 4*6), 4, 6)
	Conv(make([]float32, 2*4), make([]float32, 8), 2, 3, []int{0, 3}, m, nil)
}
