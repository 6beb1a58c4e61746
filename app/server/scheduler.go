package server

import (
	"context"
	"errors"
	"sync"

	"talkbox/engine"
)

// ErrOverloaded is returned by Submit when every slot and every queue place
// is taken; the HTTP layer answers 503 with Retry-After.
var ErrOverloaded = errors.New("server overloaded")

// Load is a scheduler's occupancy.
type Load struct {
	Active, Queued       int // utterances running; requests waiting for a slot
	MaxActive, MaxQueued int
}

// Scheduler decides when an utterance runs. The HTTP layer only calls Submit
// and reads Load, so a backend that batches several streams per step can
// bring its own Scheduler without the handlers changing.
type Scheduler interface {
	// Submit waits (while ctx lives) for a slot and starts the utterance. It
	// returns ErrOverloaded at once when no slot and no queue place is free.
	// The stream is the engine's: chunks, then a Final one, then close. The
	// slot is freed when the stream ends; cancelling ctx ends it at the next
	// frame, and the caller may stop reading once it has cancelled.
	Submit(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error)
	Load() Load
}

// Synthesizer is the engine as the server uses it (engine.Engine).
type Synthesizer interface {
	Synthesize(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error)
	SampleRate() int
	Voices() []engine.Voice
	Languages() []string
	ModelName() string
	Device() string
	SupportsInstruct() bool
	IsBase() bool // speaks only in cloned voices (engine.Request.Clone)
}

// sharedEngine admits up to maxActive utterances onto one engine and queues
// up to maxQueued more. The engine runs one utterance at a time (one KV
// cache), so admitted streams time-share it utterance by utterance until a
// batched backend exists.
type sharedEngine struct {
	eng   Synthesizer
	slots chan struct{} // a token per running utterance

	mu        sync.Mutex
	queued    int
	maxQueued int
	onChange  func(Load) // metrics hook; called with mu not held
}

// NewSharedEngine returns the Scheduler for one engine. maxActive >= 1,
// maxQueued >= 0.
func NewSharedEngine(eng Synthesizer, maxActive, maxQueued int, onChange func(Load)) Scheduler {
	return &sharedEngine{eng: eng, slots: make(chan struct{}, max(1, maxActive)), maxQueued: max(0, maxQueued), onChange: onChange}
}

func (s *sharedEngine) Load() Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked()
}

func (s *sharedEngine) loadLocked() Load {
	return Load{Active: len(s.slots), Queued: s.queued, MaxActive: cap(s.slots), MaxQueued: s.maxQueued}
}

func (s *sharedEngine) changed() {
	if s.onChange != nil {
		s.onChange(s.Load())
	}
}

func (s *sharedEngine) Submit(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A free slot is taken at once; otherwise wait in the queue if there is room.
	select {
	case s.slots <- struct{}{}:
	default:
		s.mu.Lock()
		if s.queued >= s.maxQueued {
			s.mu.Unlock()
			return nil, ErrOverloaded
		}
		s.queued++
		s.mu.Unlock()
		s.changed()
		var err error
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			err = ctx.Err()
		}
		s.mu.Lock()
		s.queued--
		s.mu.Unlock()
		if err != nil {
			s.changed()
			return nil, err
		}
	}
	s.changed()
	release := func() {
		<-s.slots
		s.changed()
	}
	in, err := s.eng.Synthesize(ctx, req)
	if err != nil {
		release()
		return nil, err
	}
	out := make(chan engine.Chunk, 1)
	go func() {
		// Forward until the engine's stream ends. Once ctx is cancelled the
		// reader may be gone, so the rest is drained and dropped; the slot is
		// freed only when the engine has let go of the utterance.
		defer release()
		defer close(out)
		for c := range in {
			select {
			case out <- c:
			case <-ctx.Done():
				for range in {
				}
				return
			}
		}
	}()
	return out, nil
}
