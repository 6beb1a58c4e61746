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
type Stretcher struct{}

func New(rate int, speed float64) (*Stretcher, error) {
	if speed != 1 {
		return nil, fmt.Errorf("tempo: speed %v needs libsonic (this build has -tags nosonic)", speed)
	}
	return &Stretcher{}, nil
}

func (*Stretcher) Process(pcm []float32) ([]float32, error) { return pcm, nil }
func (*Stretcher) Flush() ([]float32, error)                { return nil, nil }
func (*Stretcher) Close()                                   {}
