package audioenc

import (
	"fmt"
	"io"

	"talkbox/engine/wav"
)

// wavEncoder is engine/wav's streaming writer: the header is written at once
// and fixed up on Close when w can seek, else it carries the largest sizes (read as "until the end").
type wavEncoder struct {
	w      *wav.Writer
	closed bool
}

func newWAV(w io.Writer, rate int) (Encoder, error) {
	ww, err := wav.NewWriter(w, rate, wav.S16)
	if err != nil {
		return nil, err
	}
	return &wavEncoder{w: ww}, nil
}

func (e *wavEncoder) Write(pcm []float32) error {
	if e.closed {
		return ErrClosed
	}
	return e.w.Write(pcm)
}

func (e *wavEncoder) Close() error {
	e.closed = true
	return e.w.Close()
}

// pcmEncoder writes raw s16le samples with the same conversion as WAV.
type pcmEncoder struct {
	w      io.Writer
	buf    []byte
	err    error
	closed bool
}

func (e *pcmEncoder) Write(pcm []float32) error {
	if e.closed {
		return ErrClosed
	}
	if e.err != nil {
		return e.err
	}
	e.buf = wav.AppendSamples(e.buf[:0], pcm, wav.S16)
	if _, err := e.w.Write(e.buf); err != nil {
		e.err = fmt.Errorf("audioenc: pcm: %w", err)
	}
	return e.err
}

func (e *pcmEncoder) Close() error {
	e.closed = true
	return e.err
}
