package cudacodec

/*
#include "loader.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"talkbox/engine/backend"
	"talkbox/engine/codec"
)

// Codec is the decoder's weights on one GPU. It implements backend.Codec;
// any number of streams may share it, each with its own CUDA stream, so a
// stream's work overlaps whatever else runs on the GPU (the LM).
type Codec struct {
	mu       sync.Mutex
	m        *C.tbc_model
	streams  int  // open streams; the weights go when the last one closes after Close
	closing  bool // Close was called
	spf      int
	rate     int
	codebook int
	device   string
}

var (
	_ backend.Codec       = (*Codec)(nil)
	_ backend.CodecStream = (*Stream)(nil)
)

// ErrClosed is returned by pushes on a closed stream and by NewStream on a
// closed codec.
var ErrClosed = errors.New("cudacodec: closed")

// New uploads the weights of a CPU decoder to GPU 0. The decoder is only read;
// the caller may drop it afterwards. A missing library, driver or GPU gives
// an error wrapping ErrUnavailable.
func New(d *codec.Decoder) (*Codec, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("cudacodec: no decoder")
	}
	name, err := deviceName(0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	h, err := newHostWeights(d)
	if err != nil {
		return nil, err
	}
	defer h.unpin()
	var e C.nl_err
	params := C.nl_tbc_default_params()
	m := C.nl_tbc_create(h.w, &params, &e)
	if m == nil {
		return nil, fmt.Errorf("cudacodec: uploading the decoder to %s: %s", name, message(&e))
	}
	c := &Codec{m: m, spf: int(C.nl_tbc_samples_per_frame(m)), rate: d.SampleRate(),
		codebook: d.Config().CodebookSize, device: name}
	if c.spf != d.SamplesPerFrame() {
		C.nl_tbc_destroy(m)
		return nil, fmt.Errorf("cudacodec: library computes %d samples per frame, the decoder %d", c.spf, d.SamplesPerFrame())
	}
	return c, nil
}

// SamplesPerFrame is the number of samples one frame decodes to (1920).
func (c *Codec) SamplesPerFrame() int { return c.spf }

// SampleRate is the output rate in Hz (24000).
func (c *Codec) SampleRate() int { return c.rate }

// Device names the GPU.
func (c *Codec) Device() string { return c.device }

// NewStream starts a fresh decoder state (frame 0, zero history) on the GPU.
func (c *Codec) NewStream() (backend.CodecStream, error) { return c.newStream() }

func (c *Codec) newStream() (*Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.closing {
		return nil, ErrClosed
	}
	var e C.nl_err
	s := C.nl_tbc_stream_create(c.m, &e)
	if s == nil {
		return nil, fmt.Errorf("cudacodec: new stream on %s: %s", c.device, message(&e))
	}
	c.streams++
	return &Stream{c: c, s: s}, nil
}

// Close releases the GPU weights once every stream is closed; until then the
// open streams keep working and NewStream fails.
func (c *Codec) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = true
	c.release()
	return nil
}

// release frees the weights when closing and no stream is left (c.mu held).
func (c *Codec) release() {
	if c.closing && c.streams == 0 && c.m != nil {
		C.nl_tbc_destroy(c.m)
		c.m = nil
	}
}

// Stream is one utterance's decoder state on the GPU. It implements
// backend.CodecStream. Its methods may be called from any goroutine, one at
// a time per stream (they serialise on a mutex).
type Stream struct {
	mu     sync.Mutex
	c      *Codec
	s      *C.tbc_stream
	frames int
}

// Push decodes frames and returns len(frames)·SamplesPerFrame samples. A
// code outside the codebook fails the whole push (wrapping codec.ErrBadCode)
// and leaves the state as it was.
func (s *Stream) Push(frames []backend.Codes) ([]float32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return nil, ErrClosed
	}
	if err := s.checkCodes(frames); err != nil {
		return nil, err
	}
	out := make([]float32, len(frames)*s.c.spf)
	if len(frames) == 0 {
		return out, nil
	}
	var e C.nl_err
	// backend.Codes is [16]int32, so the frames are one contiguous int32 array.
	codes := (*C.int32_t)(unsafe.Pointer(&frames[0][0]))
	if C.nl_tbc_push(s.s, codes, C.int(len(frames)), (*C.float)(unsafe.Pointer(&out[0])), &e) != 0 {
		return nil, fmt.Errorf("cudacodec: push of %d frames at frame %d: %s", len(frames), s.frames, message(&e))
	}
	s.frames += len(frames)
	return out, nil
}

func (s *Stream) checkCodes(frames []backend.Codes) error {
	for f, fr := range frames {
		for g, c := range fr {
			if c < 0 || int(c) >= s.c.codebook {
				return fmt.Errorf("%w: frame %d group %d is %d, want 0..%d", codec.ErrBadCode, f, g, c, s.c.codebook-1)
			}
		}
	}
	return nil
}

// Reset returns the stream to frame 0 with zero history, as a new stream.
func (s *Stream) Reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return ErrClosed
	}
	var e C.nl_err
	if C.nl_tbc_reset(s.s, &e) != 0 {
		return fmt.Errorf("cudacodec: reset: %s", message(&e))
	}
	s.frames = 0
	return nil
}

// Frames is the number of frames decoded since the start or the last Reset.
func (s *Stream) Frames() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frames
}

// Close frees the stream's GPU state; further pushes fail with ErrClosed.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return nil
	}
	C.nl_tbc_stream_destroy(s.s)
	s.s = nil
	s.c.mu.Lock()
	s.c.streams--
	s.c.release()
	s.c.mu.Unlock()
	return nil
}
