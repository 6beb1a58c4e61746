package audioenc

import (
	"fmt"
	"io"

	"github.com/mewkiz/flac"
	"github.com/mewkiz/flac/frame"
	"github.com/mewkiz/flac/meta"

	"talkbox/engine/wav"
)

// flacBlockMs is the FLAC block length: 80 ms is one codec frame of the
// 12.5 Hz model, so each chunk the engine streams becomes a FLAC frame
// without waiting for the next one.
const flacBlockMs = 80

// flacEncoder buffers samples into fixed-size blocks and hands each full one
// to github.com/mewkiz/flac (which picks the best fixed predictor per block).
// Samples are 16-bit through wav.ToS16, so decoding gives back exactly the
// values a WAV of the same audio holds.
type flacEncoder struct {
	enc     *flac.Encoder
	out     *flacSink
	block   int
	pending []int32
	err     error
	closed  bool
}

func newFLAC(w io.Writer, rate int) (Encoder, error) {
	if rate > 655350 {
		return nil, fmt.Errorf("audioenc: flac: sample rate %d too high", rate)
	}
	block := max(16, min(rate*flacBlockMs/1000, 65535))
	sink := &flacSink{w: w}
	var out io.Writer = sink
	if ws, off, ok := seekable(w); ok {
		sink.ws, sink.base = ws, off
		out = seekableSink{sink}
	}
	// NSamples 0 and an empty MD5 mean "unknown" in STREAMINFO; the encoder
	// fills both in on Close when the output can seek.
	info := &meta.StreamInfo{
		BlockSizeMin:  uint16(block),
		BlockSizeMax:  uint16(block),
		SampleRate:    uint32(rate),
		NChannels:     1,
		BitsPerSample: 16,
	}
	enc, err := flac.NewEncoder(out, info)
	if err != nil {
		return nil, fmt.Errorf("audioenc: flac: %w", err)
	}
	return &flacEncoder{enc: enc, out: sink, block: block}, nil
}

func (e *flacEncoder) Write(pcm []float32) error {
	if e.closed {
		return ErrClosed
	}
	if e.err != nil {
		return e.err
	}
	for _, x := range pcm {
		e.pending = append(e.pending, int32(wav.ToS16(x)))
		if len(e.pending) == e.block {
			if err := e.writeBlock(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *flacEncoder) writeBlock() error {
	n := len(e.pending)
	f := &frame.Frame{
		Header: frame.Header{
			HasFixedBlockSize: true,
			BlockSize:         uint16(n),
			SampleRate:        e.enc.Info.SampleRate,
			Channels:          frame.ChannelsMono,
			BitsPerSample:     16,
		},
		Subframes: []*frame.Subframe{{
			SubHeader: frame.SubHeader{Pred: frame.PredVerbatim}, // the encoder's analysis picks the predictor
			Samples:   e.pending,
			NSamples:  n,
		}},
	}
	if err := e.enc.WriteFrame(f); err != nil {
		e.err = fmt.Errorf("audioenc: flac: %w", err)
		return e.err
	}
	e.pending = e.pending[:0]
	return nil
}

func (e *flacEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err != nil {
		return e.err
	}
	if len(e.pending) > 0 {
		if err := e.writeBlock(); err != nil {
			return err
		}
	}
	end := e.out.pos
	if err := e.enc.Close(); err != nil {
		return fmt.Errorf("audioenc: flac: %w", err)
	}
	// The encoder rewrote STREAMINFO near the start; leave w at the end of
	// the stream, as a writer that appended to it expects.
	if e.out.ws != nil {
		if _, err := e.out.ws.Seek(e.out.base+end, io.SeekStart); err != nil {
			return fmt.Errorf("audioenc: flac: %w", err)
		}
	}
	return nil
}

// flacSink is what the FLAC encoder writes to. It never closes w (the
// encoder closes an io.Closer), and it offers Seek only through
// seekableSink, with offsets relative to where the stream began, because the
// encoder seeks to an absolute offset to rewrite STREAMINFO.
type flacSink struct {
	w    io.Writer
	ws   io.WriteSeeker // nil when w cannot seek
	base int64
	pos  int64 // bytes written from base
}

func (s *flacSink) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.pos += int64(n)
	return n, err
}

// seekableSink lets the encoder rewrite STREAMINFO in a seekable w.
type seekableSink struct{ *flacSink }

func (s seekableSink) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekStart {
		off += s.base
	}
	n, err := s.ws.Seek(off, whence)
	return n - s.base, err
}
