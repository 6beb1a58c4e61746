// Package sample holds the token-sampling semantics shared by every backend:
// the CPU sampler is the reference and the CUDA sampler must match it.
package sample

import (
	"fmt"
	"math"
)

// Params are the settings of one sampler (talker group 0 or code predictor).
type Params struct {
	DoSample          bool    // false: argmax (greedy)
	Temperature       float64 // > 0
	TopK              int     // 0: no top-k filter
	TopP              float64 // 1.0: no nucleus filter
	RepetitionPenalty float64 // 1.0: none; talker only, over the set of past group-0 codes
}

// Greedy returns argmax settings.
func Greedy() Params {
	return Params{DoSample: false, Temperature: 1, TopK: 0, TopP: 1, RepetitionPenalty: 1}
}

// Validate reports settings that cannot be sampled with, so a bad request is
// an error instead of NaN probabilities or a panic deep in the frame loop.
func (p Params) Validate() error {
	if p.DoSample {
		if !(p.Temperature > 0) || math.IsInf(p.Temperature, 0) {
			return fmt.Errorf("sampling temperature %v must be positive and finite", p.Temperature)
		}
		if p.TopK < 0 {
			return fmt.Errorf("top-k %d must not be negative", p.TopK)
		}
		if !(p.TopP > 0 && p.TopP <= 1) {
			return fmt.Errorf("top-p %v must be in (0, 1]", p.TopP)
		}
	}
	if p.RepetitionPenalty != 0 && (!(p.RepetitionPenalty > 0) || math.IsInf(p.RepetitionPenalty, 0)) {
		return fmt.Errorf("repetition penalty %v must be positive and finite (1 = none)", p.RepetitionPenalty)
	}
	return nil
}
