package backend

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Loop keeps the stop rules and the bookkeeping of one Generate call, so
// every backend ends an utterance for the same reasons: a cancelled
// context, the frame cap (logged), the talker's EOS (never with
// ExactFrames), ExactFrames reached.
type Loop struct {
	Result      // what Generate returns
	name        string
	eos         int
	exactFrames int       // > 0: exactly this many frames, EOS ignored
	capFrames   int       // frames before StopCap when not exact
	last        time.Time // when the previous frame was sent (or the prefill ended)
	hold        <-chan struct{}
}

// Start checks a Generate call (the request against the spec's limits; a
// nil out is refused) and returns its loop. name prefixes its messages.
func (s Spec) Start(name string, p Prompt, opt GenerateOptions, out chan<- Frame) (*Loop, error) {
	if out == nil {
		return nil, fmt.Errorf("%s: Generate needs an output channel", name)
	}
	if err := s.Validate(p, opt); err != nil {
		return nil, err
	}
	return &Loop{Result: Result{PrefillRows: len(p.Prefill)}, name: name, eos: s.EOS, exactFrames: opt.ExactFrames,
		capFrames: s.FrameLimit(opt, len(p.Prefill)), hold: opt.HoldAfterFirst}, nil
}

// Exact reports whether the call generates exactly ExactFrames frames.
func (l *Loop) Exact() bool { return l.exactFrames > 0 }

// Limit is the most frames the call can emit.
func (l *Loop) Limit() int {
	if l.Exact() {
		return l.exactFrames
	}
	return l.capFrames
}

// Prefilled records the prefill's time since start; frame 0's time starts now.
func (l *Loop) Prefilled(start time.Time) {
	l.Prefill = time.Since(start)
	l.last = time.Now()
}

// Next reports whether frame s is to be made. When not, Stop says why: the
// frame cap (logged, err nil) or a cancelled context (err is ctx's).
func (l *Loop) Next(ctx context.Context, s int) (bool, error) {
	if !l.Exact() && s >= l.capFrames {
		slog.Warn(l.name+": frame cap reached before the talker said EOS", "frames", s, "cap", l.capFrames)
		l.Stop = StopCap
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		l.Stop = StopCancelled
		return false, err
	}
	return true, nil
}

// EOS reports whether group-0 code ends the utterance before its frame.
func (l *Loop) EOS(code int) bool {
	if code == l.eos && !l.Exact() {
		l.Stop = StopEOS
		return true
	}
	return false
}

// Emit sends f on out, or gives up when ctx is cancelled. After the first
// frame it waits for GenerateOptions.HoldAfterFirst when that is set.
func (l *Loop) Emit(ctx context.Context, out chan<- Frame, f Frame) error {
	select {
	case out <- f:
	case <-ctx.Done():
		l.Stop = StopCancelled
		return ctx.Err()
	}
	if l.Frames == 0 && l.hold != nil {
		t := time.Now()
		select {
		case <-l.hold:
		case <-ctx.Done():
			l.Stop = StopCancelled
			return ctx.Err()
		}
		l.last = l.last.Add(time.Since(t)) // the hold is not the LM's time
	}
	return nil
}

// Sent counts a frame whose codes are out and times it from the previous
// one; it reports whether ExactFrames are reached (Stop is then StopExact).
func (l *Loop) Sent() bool {
	now := time.Now()
	l.Frames++
	l.FrameTimes = append(l.FrameTimes, now.Sub(l.last))
	l.last = now
	if l.Exact() && l.Frames == l.exactFrames {
		l.Stop = StopExact
		return true
	}
	return false
}

// Cancelled ends the call on a cancelled context a backend saw itself.
func (l *Loop) Cancelled(err error) (Result, error) {
	l.Stop = StopCancelled
	return l.Result, err
}
