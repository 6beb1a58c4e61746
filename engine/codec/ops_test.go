package codec

import (
	"math"
	"testing"
)

// TestSinSq compares the reduced-range series with math.Sin over the range
// SnakeBeta sees (|x·α| up to a few hundred) and beyond.
func TestSinSq(t *testing.T) {
	worst := 0.0
	for i := -200000; i <= 200000; i++ {
		x := float32(i) * 0.0137
		s := math.Sin(float64(x))
		worst = math.Max(worst, math.Abs(float64(sinSq(x))-s*s))
	}
	if worst > 2e-7 {
		t.Errorf("sinSq max abs error %.3g", worst)
	}
	t.Logf("sinSq max abs error %.3g", worst)
}
