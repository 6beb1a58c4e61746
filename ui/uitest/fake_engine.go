// Package uitest holds test doubles for the window: a fake engine that
// streams a synthetic hum at a chosen speed. Only tests and the smoke-test
// build (-tags fakeengine) import it, so the shipped binary does not carry it.
package uitest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"talkbox/engine"
)

// FakeFrameSamples is one 12.5 Hz frame at 24 kHz.
const FakeFrameSamples = 1920

// FakeEngine is a stand-in for the TTS engine: it streams a soft synthetic
// hum at a chosen real-time factor, one chunk per frame, frame i ready at
// Prefill + (i+1)·80 ms·RTF after the call. The UI tests use it, and a
// binary built with -tags fakeengine uses it behind the hidden
// TALKBOX_FAKE_ENGINE switch for screenshots and smoke tests (make smoke).
// It never pretends to speak.
type FakeEngine struct {
	RTF      float64       // synthesis time / audio time
	Prefill  time.Duration // extra delay before the first frame
	Instruct bool          // SupportsInstruct
	// FailAfter > 0 makes every request fail after that many frames.
	FailAfter int
	// MaxFrames caps frames per request (0 = 400).
	MaxFrames int
	// NoGPU, when set, is the reason GPUNote gives for running on the CPU.
	NoGPU string

	mu        sync.Mutex
	requests  []engine.Request
	cancelled atomic.Int32
	closed    atomic.Bool
}

// Requests returns a copy of the requests seen so far.
func (e *FakeEngine) Requests() []engine.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.Request(nil), e.requests...)
}

// Cancelled is how many streams stopped because their context ended.
func (e *FakeEngine) Cancelled() int { return int(e.cancelled.Load()) }

// GPUNote says why the (pretend) GPU is not used, like *engine.Engine.
func (e *FakeEngine) GPUNote() string { return e.NoGPU }

// Closed reports whether Close was called.
func (e *FakeEngine) Closed() bool { return e.closed.Load() }

var fakeSpeakers = []string{"serena", "vivian", "uncle_fu", "ryan", "aiden", "ono_anna", "sohee", "eric", "dylan"}

// Voices are the nine speakers of the CustomVoice checkpoints.
func (e *FakeEngine) Voices() []engine.Voice {
	v := make([]engine.Voice, len(fakeSpeakers))
	for i, s := range fakeSpeakers {
		v[i] = engine.Voice{Name: s}
	}
	return v
}

func (e *FakeEngine) Languages() []string {
	return []string{"auto", "chinese", "english", "japanese", "korean", "german", "french", "russian", "portuguese", "spanish", "italian"}
}

func (e *FakeEngine) SupportsInstruct() bool { return e.Instruct }
func (e *FakeEngine) Device() string         { return fmt.Sprintf("Fake engine (RTF %.2f)", e.RTF) }
func (e *FakeEngine) ModelName() string      { return "fake-12Hz-CustomVoice" }
func (e *FakeEngine) Close() error           { e.closed.Store(true); return nil }

// FramesFor is how many frames a text gets: about one per character, at
// least 4.
func (e *FakeEngine) FramesFor(text string) int {
	limit := e.MaxFrames
	if limit <= 0 {
		limit = 400
	}
	return min(max(4, utf8.RuneCountInString(text)), limit)
}

// Synthesize validates like the real engine and streams frames.
func (e *FakeEngine) Synthesize(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error) {
	if strings.TrimSpace(req.Text) == "" {
		return nil, engine.ErrEmptyText
	}
	known := false
	for _, s := range fakeSpeakers {
		known = known || strings.EqualFold(s, req.Voice)
	}
	if !known {
		return nil, fmt.Errorf("voice %q: %w", req.Voice, engine.ErrUnknownVoice)
	}
	e.mu.Lock()
	e.requests = append(e.requests, req)
	e.mu.Unlock()

	frames := e.FramesFor(req.Text)
	ch := make(chan engine.Chunk, 2)
	start := time.Now()
	per := time.Duration(e.RTF * float64(80*time.Millisecond))
	go func() {
		defer close(ch)
		for i := 0; i < frames; i++ {
			due := start.Add(e.Prefill + time.Duration(i+1)*per)
			select {
			case <-ctx.Done():
				e.cancelled.Add(1)
				return
			case <-time.After(time.Until(due)):
			}
			c := engine.Chunk{PCM: fakeHum(i), FirstFrame: i, Frames: 1, Since: time.Since(start)}
			if e.FailAfter > 0 && i+1 >= e.FailAfter {
				c.Final = true
				c.Err = fmt.Errorf("fake engine: failing after %d frames as configured", i+1)
			}
			select {
			case ch <- c:
			case <-ctx.Done():
				e.cancelled.Add(1)
				return
			}
			if c.Final {
				return
			}
		}
		wall := time.Since(start)
		audioSec := float64(frames) * 0.08
		select {
		case ch <- engine.Chunk{Final: true, FirstFrame: frames, Since: wall, Stats: &engine.Stats{
			Frames: frames, Wall: wall, AudioSeconds: audioSec, RTF: wall.Seconds() / audioSec, Device: e.Device(),
		}}:
		case <-ctx.Done():
			e.cancelled.Add(1)
		}
	}()
	return ch, nil
}

// fakeHum is frame i of a quiet 150 Hz tone with a slow swell, continuous
// across frames.
func fakeHum(i int) []float32 {
	pcm := make([]float32, FakeFrameSamples)
	for k := range pcm {
		n := float64(i*FakeFrameSamples + k)
		t := n / 24000
		env := 0.5 + 0.5*math.Sin(2*math.Pi*0.8*t)
		pcm[k] = float32(0.1 * env * (math.Sin(2*math.Pi*150*t) + 0.4*math.Sin(2*math.Pi*300*t)))
	}
	return pcm
}
