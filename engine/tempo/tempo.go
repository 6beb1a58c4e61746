//go:build !nosonic

// Package tempo changes the speed of speech without changing its pitch, as a
// stream: chunks go in as they are synthesised and the faster or slower audio
// comes out with a delay of a few pitch periods. It wraps libsonic, the
// speech speed-up library espeak-ng uses (Debian libsonic-dev).
package tempo

/*
#cgo LDFLAGS: -lsonic
#include <sonic.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MinSpeed and MaxSpeed bound Speed; the OpenAI speech API takes the same range.
const (
	MinSpeed = 0.25
	MaxSpeed = 4.0
)

// Stretcher speeds up (speed > 1) or slows down mono audio. Not safe for
// concurrent use; one per utterance (or one per consumer that calls Discard
// between utterances).
type Stretcher struct {
	s     C.sonicStream
	buf   []float32
	rate  int
	speed float64
}

// New returns a Stretcher for audio at rate Hz.
func New(rate int, speed float64) (*Stretcher, error) {
	if !(speed >= MinSpeed && speed <= MaxSpeed) {
		return nil, fmt.Errorf("tempo: speed %v outside [%v, %v]", speed, MinSpeed, MaxSpeed)
	}
	if rate <= 0 {
		return nil, fmt.Errorf("tempo: sample rate %d", rate)
	}
	s := C.sonicCreateStream(C.int(rate), 1)
	if s == nil {
		return nil, fmt.Errorf("tempo: cannot create a sonic stream")
	}
	C.sonicSetSpeed(s, C.float(speed))
	return &Stretcher{s: s, rate: rate, speed: speed}, nil
}

// SetSpeed changes the speed mid-stream: what is written from now on, and
// what is held and not yet processed, comes out at the new speed.
func (t *Stretcher) SetSpeed(speed float64) error {
	if !(speed >= MinSpeed && speed <= MaxSpeed) {
		return fmt.Errorf("tempo: speed %v outside [%v, %v]", speed, MinSpeed, MaxSpeed)
	}
	if t.s == nil {
		return fmt.Errorf("tempo: use after Close")
	}
	C.sonicSetSpeed(t.s, C.float(speed))
	t.speed = speed
	return nil
}

// Speed is the speed set last.
func (t *Stretcher) Speed() float64 { return t.speed }

// The calls below let a consumer that cannot allocate (a device callback)
// drive the stream with its own buffers: Write input, ReadInto output.

// Write adds input without reading any output.
func (t *Stretcher) Write(pcm []float32) error {
	if t.s == nil {
		return fmt.Errorf("tempo: use after Close")
	}
	if len(pcm) > 0 && C.sonicWriteFloatToStream(t.s, (*C.float)(unsafe.Pointer(&pcm[0])), C.int(len(pcm))) == 0 {
		return fmt.Errorf("tempo: out of memory")
	}
	return nil
}

// Available is how many output samples ReadInto can return now.
func (t *Stretcher) Available() int {
	if t.s == nil {
		return 0
	}
	return int(C.sonicSamplesAvailable(t.s))
}

// ReadInto copies up to len(out) ready samples into out and returns how many.
func (t *Stretcher) ReadInto(out []float32) int {
	if t.s == nil || len(out) == 0 {
		return 0
	}
	return int(C.sonicReadFloatFromStream(t.s, (*C.float)(unsafe.Pointer(&out[0])), C.int(len(out))))
}

// End processes the input still held (the last few pitch periods), so that
// Available covers all of it: the end of a stream, or a change of speed
// after which the held input must come out at the old one.
func (t *Stretcher) End() error {
	if t.s == nil {
		return fmt.Errorf("tempo: use after Close")
	}
	if C.sonicFlushStream(t.s) == 0 {
		return fmt.Errorf("tempo: out of memory")
	}
	return nil
}

// Discard drops everything held, input and output, keeping rate and speed:
// the stream starts afresh (after a Stop, before a new utterance).
func (t *Stretcher) Discard() error {
	if t.s == nil {
		return fmt.Errorf("tempo: use after Close")
	}
	s := C.sonicCreateStream(C.int(t.rate), 1)
	if s == nil {
		return fmt.Errorf("tempo: cannot create a sonic stream")
	}
	C.sonicSetSpeed(s, C.float(t.speed))
	C.sonicDestroyStream(t.s)
	t.s = s
	return nil
}

// Process takes the next chunk and returns the audio ready so far (it may be
// empty; the slice is reused by the next call).
func (t *Stretcher) Process(pcm []float32) ([]float32, error) {
	if t.s == nil {
		return nil, fmt.Errorf("tempo: use after Close")
	}
	if len(pcm) > 0 && C.sonicWriteFloatToStream(t.s, (*C.float)(unsafe.Pointer(&pcm[0])), C.int(len(pcm))) == 0 {
		return nil, fmt.Errorf("tempo: out of memory")
	}
	return t.read(), nil
}

// Flush returns the rest of the audio at the end of the utterance.
func (t *Stretcher) Flush() ([]float32, error) {
	if t.s == nil {
		return nil, fmt.Errorf("tempo: use after Close")
	}
	if C.sonicFlushStream(t.s) == 0 {
		return nil, fmt.Errorf("tempo: out of memory")
	}
	return t.read(), nil
}

func (t *Stretcher) read() []float32 {
	n := int(C.sonicSamplesAvailable(t.s))
	if cap(t.buf) < n {
		t.buf = make([]float32, n)
	}
	out := t.buf[:n]
	if n > 0 {
		got := int(C.sonicReadFloatFromStream(t.s, (*C.float)(unsafe.Pointer(&out[0])), C.int(n)))
		out = out[:got]
	}
	return out
}

// Close frees the stream.
func (t *Stretcher) Close() {
	if t.s != nil {
		C.sonicDestroyStream(t.s)
		t.s = nil
	}
}
