package f32vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// dotRef and addScaledRef spell out the documented order one operation at a
// time, with every product rounded to float32 before the add.
func dotRef(a, b []float32) float32 {
	var s [8]float32
	n8 := len(a) &^ 7
	for i := 0; i < n8; i++ {
		p := float32(a[i] * b[i])
		s[i%8] = s[i%8] + p
	}
	for i := n8; i < len(a); i++ {
		p := float32(a[i] * b[i])
		s[0] = s[0] + p
	}
	l := float32(s[0]+s[1]) + float32(s[2]+s[3])
	r := float32(s[4]+s[5]) + float32(s[6]+s[7])
	return l + r
}

func addScaledRef(dst, src []float32, w float32) {
	for i := range dst {
		p := float32(w * src[i])
		dst[i] = dst[i] + p
	}
}

// forms runs f with the AVX kernels (where the CPU has them) and with the
// Go loops.
func forms(t *testing.T, f func(t *testing.T)) {
	saved := useAVX
	defer func() { useAVX = saved }()
	for _, avx := range []bool{false, true} {
		if avx && !saved {
			t.Log("no AVX on this CPU: only the Go loops are checked")
			continue
		}
		useAVX = avx
		name := "go"
		if avx {
			name = "avx"
		}
		t.Run(name, f)
	}
}

func TestDot(t *testing.T) {
	forms(t, func(t *testing.T) {
		a := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
		b := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 99}
		if got := Dot(a, b); got != 77 {
			t.Errorf("Dot = %v, want 77", got)
		}
	})
}

// TestSameBitsAsDefinition: both forms give the documented order's bits on
// lengths around the 8-lane width and on data with mixed magnitudes, where a
// fused multiply-add or another summation order would round differently.
func TestSameBitsAsDefinition(t *testing.T) {
	forms(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 64, 127, 128, 129, 1000} {
			for trial := 0; trial < 20; trial++ {
				a, b, dst := make([]float32, n), make([]float32, n+3), make([]float32, n)
				for i := range a {
					a[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
					dst[i] = float32(rng.NormFloat64())
				}
				for i := range b {
					b[i] = float32(rng.NormFloat64())
				}
				if got, want := Dot(a, b), dotRef(a, b[:n]); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("n=%d: Dot = %v, definition %v", n, got, want)
				}
				w := float32(rng.NormFloat64())
				want := append([]float32(nil), dst...)
				addScaledRef(want, b, w)
				AddScaled(dst, b, w)
				for i := range dst {
					if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d: AddScaled[%d] = %v, definition %v", n, i, dst[i], want[i])
					}
				}
			}
		}
	})
}
