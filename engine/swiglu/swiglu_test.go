package swiglu

import (
	"math"
	"math/rand/v2"
	"testing"
)

func applyGo(act, gate, up []float32) {
	for j := range act {
		act[j] = Silu(gate[j]) * up[j]
	}
}

// TestAVX2MatchesDefinition: the AVX2 form gives the Go definition's bits on
// a sweep of the activations an MLP sees and at the edges (exp overflowing
// or underflowing float32, zeros, infinities, NaN, lengths off the 8-lane
// width). The two exponentials may round differently only where the double
// result lies within about an ulp of a float32 rounding boundary, which
// none of these inputs hit; a less accurate exp would.
func TestAVX2MatchesDefinition(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 and FMA on this machine: the Go loop is the only form")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 1 << 20
	gate, up := make([]float32, n), make([]float32, n)
	for i := range gate {
		switch i % 4 {
		case 0:
			gate[i] = float32(rng.NormFloat64() * 3)
		case 1:
			gate[i] = float32(rng.Float64()*200 - 100)
		case 2:
			gate[i] = float32(i-n/2) * 1e-4
		default:
			gate[i] = math.Float32frombits(rng.Uint32()) // any bits: huge, tiny, subnormal, NaN
		}
		up[i] = float32(rng.NormFloat64())
	}
	edges := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 88.7, -88.7, 103.9, -103.9, 104, -104,
		149, -149, 151, -151, 1e30, -1e30, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	copy(gate, edges)
	for _, m := range []int{n, 1, 7, 8, 9, 23} {
		got, want := make([]float32, m), make([]float32, m)
		Apply(got, gate[:m], up[:m])
		applyGo(want, gate[:m], up[:m])
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) && !(got[j] != got[j] && want[j] != want[j]) {
				t.Fatalf("n=%d: silu(%g)·%g = %g (bits %08x), definition %g (%08x)", m, gate[j], up[j], got[j],
					math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
			}
		}
	}
}

func TestApplyEmpty(t *testing.T) {
	Apply(nil, nil, nil)
	act := []float32{7}
	Apply(act, []float32{0}, []float32{5})
	if act[0] != 0 {
		t.Errorf("silu(0)·5 = %v, want 0", act[0])
	}
}
