package codec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot checks the attention's dot product against float64 on both the
// AVX2 and the portable path, for lengths with and without a multiple-of-8
// part.
func TestDot(t *testing.T) {
	check := func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, n := range []int{1, 7, 8, 9, 64, 67, 300} {
			a, b := make([]float32, n), make([]float32, n)
			want, mag := 0.0, 0.0
			for i := range a {
				a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
				p := float64(a[i]) * float64(b[i])
				want += p
				mag += math.Abs(p)
			}
			if d := math.Abs(float64(dot(a, b)) - want); d > float64(n+1)*0x1p-24*mag {
				t.Fatalf("n=%d: off by %.3g (Σ|terms| %.3g)", n, d, mag)
			}
		}
	}
	check(t)
	if useAVX {
		setAVX(false)
		defer setAVX(true)
		t.Run("portable", check)
	}
}
