//go:build nosonic

// Package tempo changes the speed of speech; this nosonic build (for hosts
// without libsonic) has only speed 1.
package tempo

import "fmt"

const (
	MinSpeed = 1.0
	MaxSpeed = 1.0
)

// Stretcher passes audio through unchanged at speed 1.
type Stretcher struct {
	held []float32 // written and not yet read (Write/ReadInto)
}

func New(rate int, speed float64) (*Stretcher, error) {
	if err := check(speed); err != nil {
		return nil, err
	}
	if rate <= 0 {
		return nil, fmt.Errorf("tempo: sample rate %d", rate)
	}
	return &Stretcher{}, nil
}

func check(speed float64) error {
	if speed != 1 {
		return fmt.Errorf("tempo: speed %v needs libsonic (this build has -tags nosonic)", speed)
	}
	return nil
}

func (*Stretcher) Process(pcm []float32) ([]float32, error) { return pcm, nil }
func (*Stretcher) Flush() ([]float32, error)                { return nil, nil }
func (*Stretcher) Close()                                   {}
func (*Stretcher) SetSpeed(speed float64) error             { return check(speed) }
func (*Stretcher) Speed() float64                           { return 1 }
func (*Stretcher) End() error                               { return nil }
func (t *Stretcher) Available() int                         { return len(t.held) }
func (t *Stretcher) Discard() error                         { t.held = t.held[:0]; return nil }

func (t *Stretcher) Write(pcm []float32) error {
	t.held = append(t.held, pcm...)
	return nil
}

func (t *Stretcher) ReadInto(out []float32) int {
	n := copy(out, t.held)
	t.held = t.held[:copy(t.held, t.held[n:])]
	return n
}
