package cudacodec

/*
#include "loader.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"

	"talkbox/engine/backend"
	"talkbox/engine/codec"
)

// Codec is the decoder's weights on one GPU. It implements backend.Codec.
// Its streams live in pools of Slots streams each (the first made by New,
// more when one is full): the pushes that streams of one pool make at the
// same time run as one launch, so many streams cost little more GPU time
// than one. Each pool runs on a CUDA stream of its own, so decoding overlaps
// whatever else runs on the GPU (the LM).
type Codec struct {
	mu       sync.Mutex
	m        *C.tbc_model
	slots    int // streams a pool holds
	pools    []*pool
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

// New uploads the weights of a CPU decoder to GPU 0 and makes a pool for
// `slots` streams (at least 1), its graphs captured for every push it can
// run. Size slots for the streams that decode at once: a pool holds ~50 MB of
// GPU memory per slot at the released shapes. The decoder is only read; the
// caller may drop it afterwards. A missing library, driver or GPU gives an
// error wrapping ErrUnavailable.
func New(d *codec.Decoder, slots int) (*Codec, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("cudacodec: no decoder")
	}
	if maxSlots := int(C.nl_tbc_max_pool_slots()); slots < 1 || slots > maxSlots {
		return nil, fmt.Errorf("cudacodec: %d streams a pool, want 1..%d", slots, maxSlots)
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
	c := &Codec{m: m, slots: slots, spf: int(C.nl_tbc_samples_per_frame(m)), rate: d.SampleRate(),
		codebook: d.Config().CodebookSize, device: name}
	if c.spf != d.SamplesPerFrame() {
		C.nl_tbc_destroy(m)
		return nil, fmt.Errorf("cudacodec: library computes %d samples per frame, the decoder %d", c.spf, d.SamplesPerFrame())
	}
	p, err := c.newPool(slots)
	if err == nil {
		err = p.warm()
	}
	if err != nil {
		if p != nil {
			p.destroy()
		}
		C.nl_tbc_destroy(m)
		return nil, err
	}
	c.pools = append(c.pools, p)
	return c, nil
}

// SamplesPerFrame is the number of samples one frame decodes to (1920).
func (c *Codec) SamplesPerFrame() int { return c.spf }

// SampleRate is the output rate in Hz (24000).
func (c *Codec) SampleRate() int { return c.rate }

// Device names the GPU.
func (c *Codec) Device() string { return c.device }

// Slots is the number of streams a pool holds (New's argument).
func (c *Codec) Slots() int { return c.slots }

// NewStream starts a fresh decoder state (frame 0, zero history) in a free
// slot, making a new pool when every slot is taken.
func (c *Codec) NewStream() (backend.CodecStream, error) { return c.newStream() }

func (c *Codec) newStream() (*Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.closing {
		return nil, ErrClosed
	}
	var p *pool
	for _, q := range c.pools {
		if len(q.free) > 0 {
			p = q
			break
		}
	}
	if p == nil {
		var err error
		if p, err = c.newPool(c.slots); err != nil {
			return nil, err
		}
		c.pools = append(c.pools, p)
	}
	slot := p.free[len(p.free)-1]
	if err := p.reset(slot); err != nil {
		return nil, err
	}
	p.free = p.free[:len(p.free)-1]
	p.merger.join()
	c.streams++
	return &Stream{c: c, p: p, slot: slot}, nil
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

// release frees the pools and the weights when closing and no stream is
// left (c.mu held).
func (c *Codec) release() {
	if c.closing && c.streams == 0 && c.m != nil {
		for _, p := range c.pools {
			p.destroy()
		}
		c.pools = nil
		C.nl_tbc_destroy(c.m)
		c.m = nil
	}
}

// Stream is one utterance's decoder state: a slot of a pool. It implements
// backend.CodecStream. Its methods may be called from any goroutine, one at
// a time per stream (they serialise on a mutex).
type Stream struct {
	mu     sync.Mutex
	c      *Codec
	p      *pool // nil once closed
	slot   int
	frames int
}

// Push decodes frames and returns len(frames)·SamplesPerFrame samples. It
// runs in one launch with whatever pushes other streams of the pool make at
// the same time. A code outside the codebook fails the whole push (wrapping
// codec.ErrBadCode) and leaves the state as it was.
func (s *Stream) Push(frames []backend.Codes) ([]float32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return nil, ErrClosed
	}
	if err := s.checkCodes(frames); err != nil {
		return nil, err
	}
	out := make([]float32, len(frames)*s.c.spf)
	if len(frames) == 0 {
		return out, nil
	}
	if err := s.p.merger.push(s.slot, frames, out); err != nil {
		return nil, fmt.Errorf("cudacodec: push of %d frames at frame %d: %w", len(frames), s.frames, err)
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
	if s.p == nil {
		return ErrClosed
	}
	if err := s.p.reset(s.slot); err != nil {
		return err
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

// Close gives the stream's slot back; further pushes fail with ErrClosed.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return nil
	}
	s.c.mu.Lock()
	s.p.free = append(s.p.free, s.slot)
	s.p.merger.leave()
	s.p = nil
	s.c.streams--
	s.c.release()
	s.c.mu.Unlock()
	return nil
}
