package audioenc

import (
	"errors"
	"fmt"
	"io"
)

// Encoder streams one mono recording into w.
type Encoder interface {
	// Write encodes samples (mono, nominally in [-1, 1]; chunks of any size)
	// and writes what it can at once.
	Write(pcm []float32) error
	// Close flushes what is buffered and finishes the stream (headers are
	// fixed up when w can seek). It does not close w.
	Close() error
}

var (
	// ErrClosed is returned by Write after Close.
	ErrClosed = errors.New("audioenc: write after close")
	// ErrNoOpus is returned for Opus by a binary built with -tags noopus.
	ErrNoOpus = errors.New("audioenc: opus is not in this build (built with -tags noopus)")
)

// New starts an encoder of format f at sampleRate writing to w. Headers (where
// the format has them) are written at once.
func New(w io.Writer, f Format, sampleRate int) (Encoder, error) {
	if w == nil {
		return nil, errors.New("audioenc: nil writer")
	}
	if sampleRate <= 0 {
		return nil, fmt.Errorf("audioenc: sample rate %d", sampleRate)
	}
	switch f {
	case WAV:
		return newWAV(w, sampleRate)
	case PCM:
		return &pcmEncoder{w: w}, nil
	case FLAC:
		return newFLAC(w, sampleRate)
	case Opus:
		return newOpus(w, sampleRate)
	}
	return nil, fmt.Errorf("audioenc: unknown format %d", int(f))
}

// seekable reports whether w can really seek: files that are pipes or
// terminals implement io.Seeker but fail, so the current offset is asked for.
func seekable(w io.Writer) (io.WriteSeeker, int64, bool) {
	ws, ok := w.(io.WriteSeeker)
	if !ok {
		return nil, 0, false
	}
	off, err := ws.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, false
	}
	return ws, off, true
}
