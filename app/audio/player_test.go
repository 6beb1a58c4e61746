package audio

import (
	"context"
	"errors"
	"testing"
	"time"

	"talkbox/engine"
)

const frameSamples = 1920 // one 12.5 Hz frame at 24 kHz

// fakeStream emits frames of PCM at rtf × real time (frame i is ready at
// start + (i+1)·80 ms·rtf), then a Final chunk, like the engine's channel.
func fakeStream(ctx context.Context, rtf float64, frames int, failAt int) <-chan engine.Chunk {
	ch := make(chan engine.Chunk, 4)
	go func() {
		defer close(ch)
		start := time.Now()
		per := time.Duration(rtf * float64(80*time.Millisecond))
		for i := 0; i < frames; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(time.Duration(i+1) * per))):
			}
			pcm := make([]float32, frameSamples)
			for k := range pcm {
				pcm[k] = 0.25
			}
			c := engine.Chunk{PCM: pcm, FirstFrame: i, Frames: 1, Since: time.Since(start)}
			if i == failAt {
				c.Final, c.Err = true, errors.New("fake engine failed")
			}
			select {
			case ch <- c:
			case <-ctx.Done():
				return
			}
			if c.Final {
				return
			}
		}
		select {
		case ch <- engine.Chunk{Final: true, Since: time.Since(start)}:
		case <-ctx.Done():
		}
	}()
	return ch
}

func openNull(t *testing.T) *Player {
	t.Helper()
	p, err := Open(Options{ForceNull: true})
	if err != nil {
		t.Fatalf("open null backend: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if !p.NoDevice() || p.Backend() != "null" {
		t.Fatalf("forced null: NoDevice=%v backend=%q", p.NoDevice(), p.Backend())
	}
	return p
}

// Playback on the null device (a real-time clock) with a fake engine: faster
// than real time plays without gaps, slower than real time underruns unless
// the prebuffer policy holds enough audio back.
func TestPlayUnderrunsOnNullDevice(t *testing.T) {
	const frames = 20 // 1.6 s of audio
	cases := []struct {
		name          string
		rtf           float64
		opt           PlayOptions
		wantUnderruns bool
	}{
		{"rtf0.25", 0.25, PlayOptions{}, false}, // 60 ms of slack per frame: gap-free even on a loaded CI machine
		{"rtf1.3-no-prebuffer", 1.3, PlayOptions{}, true},
		{"rtf1.3-prebuffer", 1.3, PlayOptions{RTF: 1.3, ExpectedSeconds: 1.6}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := openNull(t)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			start := Now()
			res, err := p.Play(ctx, fakeStream(ctx, tc.rtf, frames, -1), tc.opt)
			if err != nil {
				t.Fatalf("play: %v", err)
			}
			wantPlayed := time.Duration(frames) * 80 * time.Millisecond
			if res.Played != wantPlayed {
				t.Errorf("played %v, want %v", res.Played, wantPlayed)
			}
			if res.FirstSound == 0 {
				t.Fatal("no first sound recorded")
			}
			firstSound := time.Duration(res.FirstSound - start)
			t.Logf("rtf %.2f prebuffer %v: first sound after %v, %d underruns, %v silence",
				tc.rtf, res.Prebuffer, firstSound, res.Underruns, res.Silent)
			if tc.wantUnderruns {
				if res.Underruns < 3 || res.Silent < 100*time.Millisecond {
					t.Errorf("rtf %.1f without prebuffer: %d underruns, %v silence; want gaps", tc.rtf, res.Underruns, res.Silent)
				}
			} else if res.Underruns != 0 {
				t.Errorf("%d underruns (%v silence), want 0", res.Underruns, res.Silent)
			}
			if tc.opt.RTF >= 0.9 && firstSound < res.Prebuffer {
				t.Errorf("first sound after %v, before the %v prebuffer could fill", firstSound, res.Prebuffer)
			}
		})
	}
}

// Cancelling mid-stream stops at once, and the next Play on the same player
// starts clean.
func TestPlayCancelThenPlayAgain(t *testing.T) {
	p := openNull(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		res, err = p.Play(ctx, fakeStream(ctx, 0.1, 60, -1), PlayOptions{})
		close(done)
	}()
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Play did not return within 2 s of cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled play returned %v", err)
	}
	if res.Played >= 60*80*time.Millisecond {
		t.Fatalf("played everything (%v) despite Stop", res.Played)
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	res2, err := p.Play(ctx2, fakeStream(ctx2, 0.2, 5, -1), PlayOptions{})
	if err != nil {
		t.Fatalf("second play: %v", err)
	}
	if res2.Played != 5*80*time.Millisecond || res2.Underruns != 0 {
		t.Fatalf("second play: %+v, want 400ms played and no underruns", res2)
	}
}

// An engine error on a chunk ends the stream after its audio and is returned.
func TestPlayReturnsStreamError(t *testing.T) {
	p := openNull(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Play(ctx, fakeStream(ctx, 0.1, 10, 2), PlayOptions{})
	if err == nil || err.Error() != "fake engine failed" {
		t.Fatalf("err = %v, want the engine's error", err)
	}
	if res.Played != 3*80*time.Millisecond {
		t.Fatalf("played %v, want the 3 frames before the error", res.Played)
	}
	empty := make(chan engine.Chunk)
	close(empty)
	if _, err := p.Play(ctx, empty, PlayOptions{}); err != nil {
		t.Fatalf("play after a failed stream: %v", err)
	}
}

func TestPrebufferPolicy(t *testing.T) {
	if d := Prebuffer(PlayOptions{RTF: 0.5, ExpectedSeconds: 10}); d != 0 {
		t.Errorf("rtf 0.5: prebuffer %v, want 0", d)
	}
	if d := Prebuffer(PlayOptions{RTF: 1.5, ExpectedSeconds: 4}); d != 2200*time.Millisecond {
		t.Errorf("rtf 1.5 over 4 s: prebuffer %v, want 2.2s", d)
	}
	if d := Prebuffer(PlayOptions{RTF: 3, ExpectedSeconds: 60}); d != maxPrebuffer {
		t.Errorf("rtf 3 over 60 s: prebuffer %v, want the %v cap", d, maxPrebuffer)
	}
}
