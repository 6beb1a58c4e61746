package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"talkbox/engine/backend"
)

// marks writes frames 0..n-1 as x (near a push) or . (not).
func marks(n int, near func(int) bool) string {
	s := make([]byte, n)
	for i := range s {
		s[i] = '.'
		if near(i) {
			s[i] = 'x'
		}
	}
	return string(s)
}

func nearFrames(w *codecWindow, n int) string { return marks(n, w.near) }

func TestCodecWindowNamesTheFramesAfterEachChunk(t *testing.T) {
	const frame = 2500 * time.Microsecond
	w := newCodecWindow()
	if got := nearFrames(w, 12); got != "xxxxxxxxxxxx" {
		t.Errorf("before any plan: %s, want every frame", got)
	}
	// Chunks of 8 ending on frames 7, 15, ...: nothing timed, so every frame.
	w.plan(8, 7, frame)
	if got := nearFrames(w, 18); got != "xxxxxxxxxxxxxxxxxx" {
		t.Errorf("untimed chunks of 8: %s, want every frame", got)
	}
	// Pushes of 1 and 2 frames timed: 8 from the 2-frame push's 1.4 ms, 5.6 ms.
	w.pushed(1, 2*time.Millisecond)
	w.pushed(2, 1400*time.Microsecond)
	w.plan(8, 7, frame)
	if got, want := nearFrames(w, 18), "xxx.....xxx.....xx"; got != want {
		t.Errorf("chunks of 8 from a push of 2: %s, want %s", got, want)
	}
	// A push of 8 frames took 6 ms: the three frames after each chunk's end.
	w.pushed(8, 6*time.Millisecond)
	w.plan(8, 7, frame)
	if got, want := nearFrames(w, 26), "xxx.....xxx.....xxx.....xx"; got != want {
		t.Errorf("6 ms pushes of 8: %s, want %s", got, want)
	}
	// No frame time yet: every frame.
	w.plan(8, 7, 0)
	if got := nearFrames(w, 10); got != "xxxxxxxxxx" {
		t.Errorf("unknown frame time: %s", got)
	}
	// A push far longer than a chunk: capped at maxPushSpan frames.
	w.pushed(8, time.Second)
	w.plan(8, 7, frame)
	if got, want := nearFrames(w, 16), "xxxx....xxxx...."; got != want {
		t.Errorf("long pushes: %s, want %s", got, want)
	}
	// Fixed chunks of 4 from frame 1 (ends 4, 8, ...), pushes shorter than a frame.
	w.pushed(4, time.Millisecond)
	w.plan(4, (1+4-1)%4, frame)
	if got, want := nearFrames(w, 13), ".x...x...x..."; got != want {
		t.Errorf("1 ms pushes of 4: %s, want %s", got, want)
	}
	// A push as long as its chunk: every frame.
	w.pushed(2, 5*time.Millisecond)
	w.plan(2, 1, frame)
	if got := nearFrames(w, 6); got != "xxxxxx" {
		t.Errorf("pushes as long as their chunk: %s", got)
	}
}

// askingLM asks CodecNear for each frame before it makes it, as the CUDA LM
// does when it submits a frame, and waits a frame time between frames.
type askingLM struct {
	n     int
	delay time.Duration
	asked []bool
}

func (f *askingLM) Generate(ctx context.Context, p backend.Prompt, o backend.GenerateOptions, out chan<- backend.Frame) (backend.Result, error) {
	var res backend.Result
	if o.CodecNear == nil {
		return res, fmt.Errorf("no CodecNear in the options")
	}
	for i := 0; i < f.n; i++ {
		time.Sleep(f.delay)
		f.asked = append(f.asked, o.CodecNear(i))
		out <- backend.Frame{Index: i}
		res.Frames++
	}
	res.Stop = backend.StopEOS
	return res, nil
}
func (f *askingLM) Device() string { return "fake" }
func (f *askingLM) Close() error   { return nil }

func TestPipelineTellsTheLMWhichFramesRunBesidePushes(t *testing.T) {
	lm := &askingLM{n: 14, delay: 30 * time.Millisecond}
	s := &stream{lm: lm, codec: &fakeCodec{}, chunkFrames: 4}
	chunks := collect(t, runStream(context.Background(), s))
	if final := chunks[len(chunks)-1]; final.Err != nil {
		t.Fatal(final.Err)
	}
	// Chunks: frame 0, then 1-4, 5-8, 9-12, 13. Until the LM's frame time
	// is known (frame 2 on) every frame is near; after that, with the
	// instant pushes of one frame scaled to four, only the first frame after
	// each chunk's end.
	got := marks(len(lm.asked), func(i int) bool { return lm.asked[i] })
	if want := "xxx..x...x...x"; got != want {
		t.Errorf("frames near a push: %s, want %s", got, want)
	}
}
