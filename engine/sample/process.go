package sample

import "math"

// History is the set of distinct group-0 codes sampled so far in one
// utterance: the repetition penalty applies once per distinct id, not once per
// occurrence (the official processor gathers scores at the ids, so duplicates
// are no-ops).
type History struct {
	seen []bool
	ids  []int32 // distinct ids in first-seen order, so iteration is deterministic
}

// NewHistory makes an empty history over a vocabulary of size vocab.
func NewHistory(vocab int) *History { return &History{seen: make([]bool, vocab)} }

// Reset empties the history for a new utterance.
func (h *History) Reset() {
	for _, id := range h.ids {
		h.seen[id] = false
	}
	h.ids = h.ids[:0]
}

// Add records an id; ids outside the vocabulary are ignored.
func (h *History) Add(id int32) {
	if id < 0 || int(id) >= len(h.seen) || h.seen[id] {
		return
	}
	h.seen[id] = true
	h.ids = append(h.ids, id)
}

// IDs returns the distinct ids seen so far (shared; do not modify).
func (h *History) IDs() []int32 { return h.ids }

// ApplyRepetitionPenalty divides positive logits of seen ids by penalty and
// multiplies negative ones, in float32 as the official processor does.
// A penalty of 1 (or 0, meaning unset) changes nothing.
func ApplyRepetitionPenalty(logits []float32, h *History, penalty float64) {
	if h == nil || penalty == 1 || penalty == 0 {
		return
	}
	p := float32(penalty)
	for _, id := range h.ids {
		if int(id) >= len(logits) {
			continue
		}
		if v := logits[id]; v < 0 {
			logits[id] = v * p
		} else {
			logits[id] = v / p
		}
	}
}

// TalkerRules are the fixed group-0 logit processors of the official talker
// generate: suppression of the control-token range and the EOS mask for the
// first MinNewTokens steps.
type TalkerRules struct {
	SuppressFrom int // first suppressed id (vocab_size - 1024 = 2048)
	SuppressTo   int // one past the last suppressed id (vocab_size = 3072)
	EOS          int // codec EOS (2150): exempt from suppression, masked early
	MinNewTokens int // EOS is masked while fewer tokens than this were generated (2)
}

// Apply processes logits in place for the group-0 token number step (0-based:
// step tokens were generated before this one). maskEOS forces the EOS logit to
// -inf regardless of step (used when EOS must not end the utterance).
func (r TalkerRules) Apply(logits []float32, step int, maskEOS bool) {
	negInf := float32(math.Inf(-1))
	if r.EOS >= 0 && r.EOS < len(logits) && (step < r.MinNewTokens || maskEOS) {
		logits[r.EOS] = negInf
	}
	to := min(r.SuppressTo, len(logits))
	for id := max(r.SuppressFrom, 0); id < to; id++ {
		if id != r.EOS {
			logits[id] = negInf
		}
	}
}
