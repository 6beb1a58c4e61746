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
// concurrent use; one per utterance.
type Stretcher struct {
	s   C.sonicStream
	buf []float32
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
	return &Stretcher{s: s}, nil
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
