package sample

import (
	"errors"
	"math"
	"slices"
)

// ErrNoCandidate is returned when every logit is -inf or NaN.
var ErrNoCandidate = errors.New("sample: no finite logit to choose from")

// Sampler draws one token from processed logits. It keeps scratch buffers so
// the frame loop does not allocate; one Sampler must not be shared between
// goroutines.
//
// Semantics (the CUDA sampler must match them):
//   - greedy: the first index of the maximum finite logit;
//   - sampling: logits / temperature (float32), then top-k keeps every token
//     whose scaled logit is >= the k-th largest (ties at the k-th value are
//     kept), then top-p (when < 1) removes the low tail whose ascending
//     cumulative probability is <= 1-top_p (the most likely token always
//     stays), then softmax (float64) over the kept tokens and an inverse-CDF
//     draw with u, accumulating in ascending token-id order.
type Sampler struct {
	scaled []float32
	order  []int32
	probs  []float64
}

// Pick returns the chosen token. u is the uniform draw in [0, 1) and is ignored
// when p.DoSample is false. logits is not modified.
func (s *Sampler) Pick(logits []float32, p Params, u float64) (int, error) {
	if !p.DoSample {
		return Argmax(logits)
	}
	if err := p.Validate(); err != nil {
		return -1, err
	}
	n := len(logits)
	s.scaled = slices.Grow(s.scaled[:0], n)[:n]
	inv := float32(p.Temperature)
	s.order = s.order[:0]
	for i, v := range logits {
		s.scaled[i] = v / inv
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(s.scaled[i]), -1) {
			s.order = append(s.order, int32(i))
		}
	}
	if len(s.order) == 0 {
		return -1, ErrNoCandidate
	}
	needSort := (p.TopK > 0 && p.TopK < len(s.order)) || p.TopP < 1
	if needSort {
		// Descending by value, ties by ascending id, so the order is total.
		slices.SortFunc(s.order, func(a, b int32) int {
			va, vb := s.scaled[a], s.scaled[b]
			switch {
			case va > vb:
				return -1
			case va < vb:
				return 1
			}
			return int(a) - int(b)
		})
	}
	kept := s.order
	if p.TopK > 0 && p.TopK < len(kept) {
		threshold := s.scaled[kept[p.TopK-1]]
		end := p.TopK
		for end < len(kept) && s.scaled[kept[end]] >= threshold {
			end++
		}
		kept = kept[:end]
	}
	if p.TopP < 1 && len(kept) > 1 {
		kept = kept[:nucleusSize(s.scaled, kept, p.TopP, &s.probs)]
	}
	return s.draw(kept, u), nil
}

// nucleusSize returns how many of the descending-sorted kept tokens survive
// top-p: walking from the least likely, tokens are dropped while the
// cumulative probability stays <= 1-topP.
func nucleusSize(scaled []float32, kept []int32, topP float64, buf *[]float64) int {
	probs := softmaxInto(scaled, kept, buf)
	cut := 1 - topP
	cum := 0.0
	size := len(kept)
	for i := len(kept) - 1; i > 0; i-- {
		cum += probs[i]
		if cum > cut {
			break
		}
		size = i
	}
	return size
}

// softmaxInto writes softmax(scaled[kept]) in kept's order into buf.
func softmaxInto(scaled []float32, kept []int32, buf *[]float64) []float64 {
	probs := slices.Grow((*buf)[:0], len(kept))[:len(kept)]
	*buf = probs
	mx := math.Inf(-1)
	for _, id := range kept {
		mx = math.Max(mx, float64(scaled[id]))
	}
	sum := 0.0
	for i, id := range kept {
		probs[i] = math.Exp(float64(scaled[id]) - mx)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	return probs
}

// draw picks from kept by inverse CDF in ascending token-id order.
func (s *Sampler) draw(kept []int32, u float64) int {
	if len(kept) == 1 {
		return int(kept[0])
	}
	slices.Sort(kept)
	probs := softmaxInto(s.scaled, kept, &s.probs)
	target := u
	cum := 0.0
	for i, id := range kept {
		cum += probs[i]
		if cum > target {
			return int(id)
		}
	}
	return int(kept[len(kept)-1]) // u within rounding of 1
}

// Argmax returns the first index of the largest finite value.
func Argmax(logits []float32) (int, error) {
	best := -1
	var bv float32
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), -1) {
			continue
		}
		if best < 0 || v > bv {
			best, bv = i, v
		}
	}
	if best < 0 {
		return -1, ErrNoCandidate
	}
	return best, nil
}
