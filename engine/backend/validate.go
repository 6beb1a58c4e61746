package backend

import (
	"errors"
	"fmt"
	"math"
)

// Validation errors every backend returns for the same bad input.
var (
	ErrBadPrompt  = errors.New("bad prompt")
	ErrBadOptions = errors.New("bad generate options")
)

// Limits are the sizes a backend holds.
type Limits struct {
	Hidden         int // prompt row width (talker hidden size)
	Positions      int // KV-cache positions usable by prefill + frames
	Vocab          int // talker codec vocabulary (group 0)
	PredictorVocab int // code-predictor vocabulary (groups 1..15)
}

// Validate checks a prompt and options against a backend's limits before any
// work starts, so bad input is a named error and never a crash or garbage.
func Validate(p Prompt, opt GenerateOptions, l Limits) error {
	if len(p.Prefill) == 0 {
		return fmt.Errorf("%w: no prefill rows", ErrBadPrompt)
	}
	if len(p.Prefill) >= l.Positions {
		return fmt.Errorf("%w: %d prefill rows exceed the %d positions of the model", ErrBadPrompt, len(p.Prefill), l.Positions)
	}
	check := func(what string, i int, row []float32) error {
		if len(row) != l.Hidden {
			return fmt.Errorf("%w: %s row %d has width %d, want %d", ErrBadPrompt, what, i, len(row), l.Hidden)
		}
		for j, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: %s row %d has a non-finite value at %d", ErrBadPrompt, what, i, j)
			}
		}
		return nil
	}
	for i, r := range p.Prefill {
		if err := check("prefill", i, r); err != nil {
			return err
		}
	}
	for i, r := range p.Trailing {
		if err := check("trailing", i, r); err != nil {
			return err
		}
	}
	if err := check("tts_pad", 0, p.TTSPad); err != nil {
		return err
	}
	if err := opt.Talker.Validate(); err != nil {
		return fmt.Errorf("%w: talker: %w", ErrBadOptions, err)
	}
	if err := opt.Predictor.Validate(); err != nil {
		return fmt.Errorf("%w: code predictor: %w", ErrBadOptions, err)
	}
	if opt.MaxFrames < 0 || opt.ExactFrames < 0 {
		return fmt.Errorf("%w: MaxFrames %d and ExactFrames %d must not be negative", ErrBadOptions, opt.MaxFrames, opt.ExactFrames)
	}
	if left := l.Positions - len(p.Prefill); opt.ExactFrames > left {
		return fmt.Errorf("%w: ExactFrames %d exceeds the %d positions left after the prefill", ErrBadOptions, opt.ExactFrames, left)
	}
	for i, c := range opt.TeacherCodes {
		if c[0] < 0 || int(c[0]) >= l.Vocab {
			return fmt.Errorf("%w: teacher frame %d group 0 code %d outside [0,%d)", ErrBadOptions, i, c[0], l.Vocab)
		}
		for g := 1; g < NumGroups; g++ {
			if c[g] < 0 || int(c[g]) >= l.PredictorVocab {
				return fmt.Errorf("%w: teacher frame %d group %d code %d outside [0,%d)", ErrBadOptions, i, g, c[g], l.PredictorVocab)
			}
		}
	}
	return nil
}
