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
	vals   []float32
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
	kept := s.order
	if p.TopK > 0 && p.TopK < len(kept) {
		// Every token at or above the k-th largest value, found by
		// selection instead of sorting all (a decode frame samples 16 times
		// from 2048-3072 logits, and Pick with its sort was ~1.5% of an
		// int8 CPU frame's profile); top-p sorts only the kept ones.
		s.vals = slices.Grow(s.vals[:0], len(kept))[:len(kept)]
		for i, id := range kept {
			s.vals[i] = s.scaled[id]
		}
		threshold := kthLargest(s.vals, p.TopK)
		end := 0
		for _, id := range kept {
			if s.scaled[id] >= threshold {
				kept[end] = id
				end++
			}
		}
		kept = kept[:end]
	}
	if p.TopP < 1 && len(kept) > 1 {
		sortDescending(s.scaled, kept)
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

// sortDescending orders ids by value, largest first, ties by ascending id,
// so the order is total.
func sortDescending(scaled []float32, ids []int32) {
	slices.SortFunc(ids, func(a, b int32) int {
		va, vb := scaled[a], scaled[b]
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return int(a) - int(b)
	})
}

// kthLargest returns the k-th largest of v (1 <= k <= len(v), duplicates
// counted, no NaN), reordering v: a quickselect with three-way partitions,
// so runs of equal values cost one pass.
func kthLargest(v []float32, k int) float32 {
	lo, hi := 0, len(v) // the answer is in v[lo:hi], at rank k-lo there
	for {
		if hi-lo == 1 {
			return v[lo]
		}
		pivot := median3(v[lo], v[lo+(hi-lo)/2], v[hi-1])
		// v[lo:gt] > pivot, v[gt:i] == pivot, v[lt:hi] < pivot.
		gt, i, lt := lo, lo, hi
		for i < lt {
			switch x := v[i]; {
			case x > pivot:
				v[gt], v[i] = v[i], v[gt]
				gt++
				i++
			case x < pivot:
				lt--
				v[lt], v[i] = v[i], v[lt]
			default:
				i++
			}
		}
		switch {
		case k <= gt-lo:
			hi = gt
		case k <= lt-lo:
			return pivot
		default:
			k -= lt - lo
			lo = lt
		}
	}
}

func median3(a, b, c float32) float32 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}
