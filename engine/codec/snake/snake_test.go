package snake

import (
	"math"
	"testing"
)

// TestRowsMatchesFloat64: the AVX2 SnakeBeta equals the float64 formula to
// float32 rounding over the range it sees, tail channels included.
func TestRowsMatchesFloat64(t *testing.T) {
	if !Available {
		t.Skip("no AVX2 on this machine: the codec runs its scalar form")
	}
	const T, C = 50, 37
	x := make([]float32, T*C)
	a, ib := make([]float32, C), make([]float32, C)
	for c := 0; c < C; c++ {
		a[c] = 0.3 + 0.1*float32(c)
		ib[c] = 1 / (0.5 + 0.05*float32(c))
	}
	for i := range x {
		x[i] = float32(i%1999-1000) * 0.037
	}
	got := make([]float32, T*C)
	Rows(x, got, a, ib, 1, T, C)
	for i := 0; i < C; i++ {
		if got[i] != 0 {
			t.Fatal("row 0 was written though t0 = 1")
		}
	}
	worst := 0.0
	for i := C; i < T*C; i++ {
		c := i % C
		sn := math.Sin(float64(x[i] * a[c]))
		want := float64(x[i]) + float64(ib[c])*sn*sn
		worst = math.Max(worst, math.Abs(float64(got[i])-want)/(1+math.Abs(want)))
	}
	if worst > 1e-6 {
		t.Errorf("AVX2 SnakeBeta differs from float64 by %.3g (relative)", worst)
	}
	t.Logf("AVX2 SnakeBeta max relative error %.3g", worst)
}
