package engine

import (
	"math"
	"sync/atomic"
	"time"
)

// maxPushSpan caps the frames a push is expected to overlap.
const maxPushSpan = 4

// codecWindow tells the LM which frames the GPU codec decodes beside
// (GenerateOptions.CodecNear), so the decode kernel leaves the codec its SMs
// for those frames only and takes every SM for the rest. A push starts when
// the frame that ends a chunk arrives, so it overlaps the next frames: the
// LM has queued them by then, and what it queued on every SM would hold the
// codec back until they end. The codec goroutine plans (plan, pushed); the LM
// goroutine asks (near).
//
// H100, synthetic 0.6B: the decode kernel's frame takes 2.35 ms on all 132
// SMs and 2.66 on the 88 it runs beside the codec; a lone 10 s utterance ran
// at RTF 0.0319 against 0.0330 when every frame left the codec 33 SMs
// (docs/dev/LATENCY.md).
type codecWindow struct {
	every atomic.Int32 // pushes start after frames e with e % every == phase
	phase atomic.Int32
	span  atomic.Int32 // frames after a chunk's end that its push overlaps
	// The last push's duration for each chunk size (the codec goroutine's
	// alone: near does not read it).
	took map[int]time.Duration
}

func newCodecWindow() *codecWindow {
	w := &codecWindow{took: map[int]time.Duration{}}
	w.every.Store(1) // every frame ends a chunk until plan says otherwise
	w.span.Store(1)
	return w
}

// near reports whether frame i is expected to run while a push decodes.
func (w *codecWindow) near(i int) bool {
	every, span := int(w.every.Load()), int(w.span.Load())
	if span >= every {
		return true
	}
	d := (i - 1 - int(w.phase.Load())) % every
	if d < 0 {
		d += every
	}
	return d < span
}

// plan records that chunks of size frames end on frames e with e % frames
// == phase, and how many frames their pushes overlap at perFrame (the LM's
// frame time): the last push of that size over perFrame, rounded up. Before
// a push of that size has been timed, the largest smaller one's time scaled
// to its frames (a push's time grows slower than its frames, so this errs
// long); every frame while nothing has been timed or the frame time is
// unknown.
func (w *codecWindow) plan(frames, phase int, perFrame time.Duration) {
	span := frames
	took, ok := w.took[frames]
	if !ok {
		from := 0
		for size, t := range w.took {
			if size < frames && size > from {
				from, took, ok = size, t*time.Duration(frames)/time.Duration(size), true
			}
		}
	}
	if ok && perFrame > 0 {
		span = min(max(int(math.Ceil(float64(took)/float64(perFrame))), 1), maxPushSpan, frames)
	}
	w.phase.Store(int32(phase))
	w.span.Store(int32(span))
	w.every.Store(int32(frames))
}

// pushed records how long a push of frames took.
func (w *codecWindow) pushed(frames int, took time.Duration) { w.took[frames] = took }
