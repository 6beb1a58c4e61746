// Package sample holds the token-sampling semantics shared by every backend:
// the CPU sampler is the reference and the CUDA sampler must match it.
package sample

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
