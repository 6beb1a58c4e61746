package sample

import (
	"math"
	"testing"
)

func TestRepetitionPenaltyOverSet(t *testing.T) {
	h := NewHistory(8)
	h.Add(0)
	h.Add(1)
	h.Add(1) // a repeat must not penalise twice
	h.Add(-3)
	h.Add(100) // outside the vocabulary: ignored
	logits := []float32{2, -2, 1, 0}
	ApplyRepetitionPenalty(logits, h, 2)
	want := []float32{1, -4, 1, 0}
	for i := range want {
		if logits[i] != want[i] {
			t.Errorf("logit %d = %v, want %v", i, logits[i], want[i])
		}
	}
	if len(h.IDs()) != 2 {
		t.Errorf("history holds %v, want 2 distinct ids", h.IDs())
	}
	h.Reset()
	logits = []float32{2, -2}
	ApplyRepetitionPenalty(logits, h, 2)
	if logits[0] != 2 || logits[1] != -2 {
		t.Errorf("empty history changed logits: %v", logits)
	}
}

func TestTalkerRules(t *testing.T) {
	r := TalkerRules{SuppressFrom: 2048, SuppressTo: 3072, EOS: 2150, MinNewTokens: 2}
	for step := 0; step < 4; step++ {
		logits := make([]float32, 3072)
		for i := range logits {
			logits[i] = 1
		}
		r.Apply(logits, step, false)
		for id, v := range logits {
			suppressed := math.IsInf(float64(v), -1)
			want := id >= 2048 && id != 2150 || id == 2150 && step < 2
			if suppressed != want {
				t.Fatalf("step %d id %d: suppressed=%v, want %v", step, id, suppressed, want)
			}
		}
	}
	logits := make([]float32, 3072)
	r.Apply(logits, 10, true)
	if !math.IsInf(float64(logits[2150]), -1) || logits[2047] != 0 {
		t.Errorf("maskEOS: EOS %v, id 2047 %v", logits[2150], logits[2047])
	}
	r.Apply(make([]float32, 10), 0, false) // shorter than the ranges: no panic
}
