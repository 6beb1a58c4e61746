package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// mropeApply is the talker's M-RoPE as the official code defines it, written
// out independently of rope.apply: every frequency slot j < 64 takes its
// angle from one of three position streams (T, H, W) chosen by the
// interleaved layout of mrope_section [24, 20, 20] — H when j%3 == 1 and
// j < 3·20, W when j%3 == 2 and j < 3·20, else T — and the cos/sin tables are
// the duplicated halves used by rotate-half.
func mropeApply(x []float32, theta float64, posT, posH, posW int, section [3]int) []float32 {
	d := len(x)
	half := d / 2
	cos := make([]float32, d)
	sin := make([]float32, d)
	for j := 0; j < half; j++ {
		inv := 1 / float32(math.Pow(theta, float64(float32(2*j)/float32(d))))
		pos := posT
		if j%3 == 1 && j < 3*section[1] {
			pos = posH
		} else if j%3 == 2 && j < 3*section[2] {
			pos = posW
		}
		a := float64(float32(pos) * inv)
		cos[j], cos[j+half] = float32(math.Cos(a)), float32(math.Cos(a))
		sin[j], sin[j+half] = float32(math.Sin(a)), float32(math.Sin(a))
	}
	out := make([]float32, d)
	for i := 0; i < d; i++ {
		var rot float32 // rotate_half(x) = [-x[half:], x[:half]]
		if i < half {
			rot = -x[i+half]
		} else {
			rot = x[i-half]
		}
		out[i] = x[i]*cos[i] + rot*sin[i]
	}
	return out
}

// TestMRoPEWithEqualStreamsIsPlainRoPE shows that the talker's interleaved
// M-RoPE with three equal position streams (always the case in TTS) is the
// plain rotate-half RoPE the engine applies, and that the slot selection does
// matter once the streams differ (so the comparison can fail).
func TestMRoPEWithEqualStreamsIsPlainRoPE(t *testing.T) {
	const headDim, theta = 128, 1e6
	r := newRope(headDim, theta)
	rng := rand.New(rand.NewPCG(7, 7))
	section := [3]int{24, 20, 20}
	worst := 0.0
	for trial := 0; trial < 50; trial++ {
		pos := rng.IntN(4000)
		r.ensure(pos + 1)
		x := make([]float32, headDim)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		want := mropeApply(x, theta, pos, pos, pos, section)
		got := append([]float32(nil), x...)
		r.apply(got, pos)
		for i := range got {
			worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
		}
		if trial == 0 {
			other := mropeApply(x, theta, pos+100, pos+101, pos+102, section)
			want := mropeApply(x, theta, pos+100, pos+100, pos+100, section)
			diff := 0.0
			for i := range other {
				diff = math.Max(diff, math.Abs(float64(other[i]-want[i])))
			}
			if diff < 1e-3 {
				t.Errorf("distinct T/H/W streams changed the result by only %g: slot selection not exercised", diff)
			}
		}
	}
	if worst > 1e-6 {
		t.Errorf("M-RoPE with equal streams differs from rotate-half RoPE by %g", worst)
	}
	t.Logf("max |M-RoPE(p,p,p) - RoPE(p)| over 50 random vectors: %g", worst)
}
