package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// drawCounts draws n tokens with seeds (7, i, 3) and counts them.
func drawCounts(t *testing.T, logits []float32, p Params, n int) []int {
	t.Helper()
	var s Sampler
	counts := make([]int, len(logits))
	for i := 0; i < n; i++ {
		id, err := s.Pick(logits, p, Uniform(7, i, 3))
		if err != nil {
			t.Fatal(err)
		}
		counts[id]++
	}
	return counts
}

// chiSquare compares counts with expected probabilities. Tokens with zero
// expected probability must never appear.
func chiSquare(t *testing.T, what string, counts []int, probs []float64) float64 {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	chi := 0.0
	for i, p := range probs {
		if p == 0 {
			if counts[i] != 0 {
				t.Errorf("%s: token %d has probability 0 but was drawn %d times", what, i, counts[i])
			}
			continue
		}
		e := p * float64(n)
		chi += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
	}
	return chi
}

func softmaxOf(logits []float64, keep []bool) []float64 {
	out := make([]float64, len(logits))
	sum := 0.0
	for i, l := range logits {
		if keep[i] {
			out[i] = math.Exp(l)
			sum += out[i]
		}
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// TestSamplingDistributions checks temperature, top-k (with a tie at the k-th
// value) and top-p against their exact distributions with a chi-square bound.
// 20000 draws; the bound 30 for at most 5 degrees of freedom is exceeded by
// chance with probability < 2e-5, while a wrong temperature or filter gives
// chi-square in the hundreds.
func TestSamplingDistributions(t *testing.T) {
	const n = 20000
	base := []float64{1.0, 0.5, 0.2, 0.2, -0.3, -1.0}
	logits := make([]float32, len(base))
	for i, v := range base {
		logits[i] = float32(v)
	}
	all := []bool{true, true, true, true, true, true}
	scaled := func(T float64) []float64 {
		out := make([]float64, len(base))
		for i, v := range base {
			out[i] = v / T
		}
		return out
	}

	// Temperature alone.
	p := Params{DoSample: true, Temperature: 0.5, TopP: 1}
	if chi := chiSquare(t, "temperature", drawCounts(t, logits, p, n), softmaxOf(scaled(0.5), all)); chi > 30 {
		t.Errorf("temperature 0.5: chi-square %.1f > 30", chi)
	}
	// The same draws judged against temperature 1 must fail, or the test is blind.
	if chi := chiSquare(t, "wrong temperature", drawCounts(t, logits, p, n), softmaxOf(scaled(1), all)); chi < 100 {
		t.Errorf("temperature test cannot tell 0.5 from 1 (chi-square %.1f)", chi)
	}

	// Top-k 3: tokens 2 and 3 tie at the 3rd value, so both stay (4 tokens).
	p = Params{DoSample: true, Temperature: 1, TopK: 3, TopP: 1}
	keep := []bool{true, true, true, true, false, false}
	if chi := chiSquare(t, "top-k", drawCounts(t, logits, p, n), softmaxOf(scaled(1), keep)); chi > 30 {
		t.Errorf("top-k 3: chi-square %.1f > 30", chi)
	}

	// Top-p: probabilities 0.5, 0.3, 0.12, 0.08 with top_p 0.75 keep {0, 1}.
	probs := []float64{0.5, 0.3, 0.12, 0.08}
	pl := make([]float32, len(probs))
	lp := make([]float64, len(probs))
	for i, q := range probs {
		pl[i] = float32(math.Log(q))
		lp[i] = math.Log(q)
	}
	p = Params{DoSample: true, Temperature: 1, TopP: 0.75}
	if chi := chiSquare(t, "top-p", drawCounts(t, pl, p, n), softmaxOf(lp, []bool{true, true, false, false})); chi > 30 {
		t.Errorf("top-p 0.75: chi-square %.1f > 30", chi)
	}
	// top_p 0.9 keeps the boundary token too: {0, 1, 2}.
	p.TopP = 0.9
	if chi := chiSquare(t, "top-p 0.9", drawCounts(t, pl, p, n), softmaxOf(lp, []bool{true, true, true, false})); chi > 30 {
		t.Errorf("top-p 0.9: chi-square %.1f > 30", chi)
	}
}

func TestGreedyAndEdgeCases(t *testing.T) {
	inf := float32(math.Inf(-1))
	var s Sampler
	id, err := s.Pick([]float32{0.1, 3, -1, 3}, Greedy(), 0.99)
	if err != nil || id != 1 {
		t.Errorf("greedy: %d, %v; want the first maximum 1", id, err)
	}
	if _, err := s.Pick([]float32{inf, inf}, Greedy(), 0); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("all -inf greedy: err %v", err)
	}
	if _, err := s.Pick([]float32{inf, float32(math.NaN())}, Params{DoSample: true, Temperature: 1, TopP: 1}, 0.5); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("all -inf sampled: err %v", err)
	}
	// A -inf (suppressed) token is never drawn, even at u close to 1.
	for _, u := range []float64{0, 0.5, 0.999999} {
		id, err := s.Pick([]float32{0, inf, 0}, Params{DoSample: true, Temperature: 1, TopP: 1}, u)
		if err != nil || id == 1 {
			t.Errorf("u=%v: drew %d (%v)", u, id, err)
		}
	}
	if _, err := s.Pick([]float32{1, 2}, Params{DoSample: true, Temperature: 0, TopP: 1}, 0.5); err == nil {
		t.Error("temperature 0 with sampling accepted")
	}
	for _, bad := range []Params{{DoSample: true, Temperature: 1, TopP: 0}, {DoSample: true, Temperature: 1, TopP: 1, TopK: -1},
		{RepetitionPenalty: -1}, {DoSample: true, Temperature: math.Inf(1), TopP: 1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if err := Greedy().Validate(); err != nil {
		t.Errorf("greedy params invalid: %v", err)
	}
}

func TestUniform(t *testing.T) {
	if Uniform(1, 2, 3) != Uniform(1, 2, 3) {
		t.Error("Uniform is not a function of its arguments")
	}
	seen := map[float64]bool{}
	sum := 0.0
	n := 0
	for f := 0; f < 200; f++ {
		for g := 0; g < 16; g++ {
			u := Uniform(99, f, g)
			if u < 0 || u >= 1 {
				t.Fatalf("Uniform out of [0,1): %v", u)
			}
			if seen[u] {
				t.Errorf("repeated draw at frame %d group %d", f, g)
			}
			seen[u] = true
			sum += u
			n++
		}
	}
	if mean := sum / float64(n); math.Abs(mean-0.5) > 0.03 {
		t.Errorf("mean of %d draws %.3f, want about 0.5", n, mean)
	}
	if Uniform(1, 0, 0) == Uniform(2, 0, 0) {
		t.Error("different seeds give the same draw")
	}
}

// pickBySorting is Pick as specified, by sorting every candidate: the
// reference for the selection Pick uses for top-k.
func pickBySorting(logits []float32, p Params, u float64) int {
	scaled := make([]float32, len(logits))
	var order []int32
	for i, v := range logits {
		scaled[i] = v / float32(p.Temperature)
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(scaled[i]), -1) {
			order = append(order, int32(i))
		}
	}
	sortDescending(scaled, order)
	kept := order
	if p.TopK > 0 && p.TopK < len(kept) {
		end := p.TopK
		for end < len(kept) && scaled[kept[end]] >= scaled[kept[p.TopK-1]] {
			end++
		}
		kept = kept[:end]
	}
	if p.TopP < 1 && len(kept) > 1 {
		var buf []float64
		kept = kept[:nucleusSize(scaled, kept, p.TopP, &buf)]
	}
	s := Sampler{scaled: scaled}
	return s.draw(append([]int32(nil), kept...), u)
}

// TestTopKSelectionMatchesSorting: on random logits with many ties (values
// drawn from a few levels), NaN and -inf, every top-k/top-p/draw combination
// picks what sorting everything picks.
func TestTopKSelectionMatchesSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var s Sampler
	for trial := 0; trial < 3000; trial++ {
		n := 1 + rng.IntN(300)
		levels := 1 + rng.IntN(40)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(rng.IntN(levels)) * 0.37
			switch rng.IntN(50) {
			case 0:
				logits[i] = float32(math.NaN())
			case 1:
				logits[i] = float32(math.Inf(-1))
			}
		}
		p := Params{DoSample: true, Temperature: 0.5 + rng.Float64(), TopK: rng.IntN(n + 2), TopP: 1}
		if rng.IntN(2) == 0 {
			p.TopP = 0.05 + 0.9*rng.Float64()
		}
		u := rng.Float64()
		got, err := s.Pick(logits, p, u)
		if err != nil {
			continue // every logit NaN or -inf: both ways have no candidate
		}
		if want := pickBySorting(logits, p, u); got != want {
			t.Fatalf("trial %d (n %d, %+v, u %v): picked %d, sorting picks %d", trial, n, p, u, got, want)
		}
	}
}

// TestKthLargest: the selection against a sort, duplicates included.
func TestKthLargest(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(200)
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.IntN(1 + rng.IntN(30)))
		}
		sorted := slices.Clone(v)
		slices.Sort(sorted)
		k := 1 + rng.IntN(n)
		if got, want := kthLargest(v, k), sorted[n-k]; got != want {
			t.Fatalf("n %d k %d: %v, want %v", n, k, got, want)
		}
	}
}
