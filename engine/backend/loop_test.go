package backend

import (
	"context"
	"errors"
	"testing"
	"time"

	"talkbox/engine/sample"
)

func loopFor(t *testing.T, opt GenerateOptions) *Loop {
	t.Helper()
	s, err := NewSpec(releasedTalker(), 16)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, s.Hidden)
	opt.Talker, opt.Predictor = sample.Greedy(), sample.Greedy()
	l, err := s.Start("test", Prompt{Prefill: [][]float32{row, row}, TTSPad: row}, opt, make(chan Frame))
	if err != nil {
		t.Fatal(err)
	}
	l.Prefilled(time.Now())
	return l
}

// run drives a loop as a backend does, the talker saying g0(s) for frame s.
func run(ctx context.Context, l *Loop, g0 func(int) int) error {
	out := make(chan Frame, 64)
	for s := 0; ; s++ {
		if ok, err := l.Next(ctx, s); !ok {
			return err
		}
		if l.EOS(g0(s)) {
			return nil
		}
		if err := l.Emit(ctx, out, Frame{Index: s}); err != nil {
			return err
		}
		if l.Sent() {
			return nil
		}
	}
}

func TestLoopStops(t *testing.T) {
	never := func(int) int { return 7 }
	eosAt3 := func(s int) int {
		if s == 3 {
			return 2150
		}
		return 7
	}
	for _, c := range []struct {
		name   string
		opt    GenerateOptions
		g0     func(int) int
		stop   StopReason
		frames int
	}{
		{"EOS ends before its frame", GenerateOptions{}, eosAt3, StopEOS, 3},
		{"the caller's cap", GenerateOptions{MaxFrames: 5}, never, StopCap, 5},
		{"the positions left cap", GenerateOptions{}, never, StopCap, 14},
		{"ExactFrames ignores EOS", GenerateOptions{ExactFrames: 6}, eosAt3, StopExact, 6},
	} {
		l := loopFor(t, c.opt)
		if err := run(context.Background(), l, c.g0); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if l.Stop != c.stop || l.Frames != c.frames || len(l.FrameTimes) != c.frames || l.PrefillRows != 2 {
			t.Errorf("%s: stop %s after %d frames (%d times, %d rows); want %s after %d", c.name, l.Stop, l.Frames,
				len(l.FrameTimes), l.PrefillRows, c.stop, c.frames)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := loopFor(t, GenerateOptions{})
	if err := run(ctx, l, never); !errors.Is(err, context.Canceled) || l.Stop != StopCancelled {
		t.Errorf("cancelled: %v, stop %s", err, l.Stop)
	}
	if _, err := l.Cancelled(context.Canceled); l.Stop != StopCancelled || err == nil {
		t.Error("Cancelled did not mark the result")
	}
}

func TestLoopStartRefuses(t *testing.T) {
	s, err := NewSpec(releasedTalker(), 16)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, s.Hidden)
	p := Prompt{Prefill: [][]float32{row}, TTSPad: row}
	g := GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy()}
	if _, err := s.Start("test", p, g, nil); err == nil {
		t.Error("nil channel accepted")
	}
	if _, err := s.Start("test", Prompt{TTSPad: row}, g, make(chan Frame)); !errors.Is(err, ErrBadPrompt) {
		t.Errorf("empty prompt: %v", err)
	}
}

// TestHoldAfterFirstFrame: Emit waits after the first frame until the hold
// is released, leaves the wait out of the frame's time, never waits again,
// and gives up on a cancelled context.
func TestHoldAfterFirstFrame(t *testing.T) {
	hold := make(chan struct{})
	l := loopFor(t, GenerateOptions{ExactFrames: 3, HoldAfterFirst: hold})
	const wait = 60 * time.Millisecond
	go func() {
		time.Sleep(wait)
		close(hold)
	}()
	start := time.Now()
	if err := run(context.Background(), l, func(int) int { return 0 }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < wait {
		t.Errorf("generation took %v: the first frame was not held for %v", took, wait)
	}
	if l.Frames != 3 || l.FrameTimes[0] >= wait/2 {
		t.Errorf("frames %d, first frame time %v: the hold counted as LM time", l.Frames, l.FrameTimes[0])
	}

	ctx, cancel := context.WithCancel(context.Background())
	l = loopFor(t, GenerateOptions{ExactFrames: 3, HoldAfterFirst: make(chan struct{})})
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := run(ctx, l, func(int) int { return 0 }); !errors.Is(err, context.Canceled) || l.Stop != StopCancelled || l.Frames != 0 {
		t.Errorf("cancelled during the hold: err %v, stop %s, frames %d", err, l.Stop, l.Frames)
	}
}
