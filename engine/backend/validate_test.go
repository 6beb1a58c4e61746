package backend_test

import (
	"errors"
	"testing"

	"talkbox/engine/backend"
	"talkbox/engine/backendtest"
)

// Validate refuses every request of the backends' shared bad-input list
// with its named error, and accepts the good prompt it is built around.
func TestValidateRefusesBadInputs(t *testing.T) {
	l := backend.Limits{Hidden: 8, Positions: 32, Vocab: 3072, PredictorVocab: 2048}
	row := func(v float32) []float32 {
		r := make([]float32, l.Hidden)
		for i := range r {
			r[i] = v
		}
		return r
	}
	good := backend.Prompt{Prefill: [][]float32{row(1), row(2), row(3)}, Trailing: [][]float32{row(4)}, TTSPad: row(5)}
	if err := backend.Validate(good, backendtest.Greedy(4), l); err != nil {
		t.Fatalf("good prompt refused: %v", err)
	}
	if err := backend.Validate(good, backendtest.Sampled(4, 1), l); err != nil {
		t.Fatalf("good sampling refused: %v", err)
	}
	bad := backendtest.BadInputs(good, l)
	if len(bad) < 10 {
		t.Fatalf("only %d bad inputs", len(bad))
	}
	for _, b := range bad {
		if err := backend.Validate(b.Prompt, b.Opt, l); !errors.Is(err, b.Want) {
			t.Errorf("%s: %v, want %v", b.Name, err, b.Want)
		}
	}
}
