package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/cores"
)

// fakeLM emits n frames whose codes encode their index, with a delay each.
type fakeLM struct {
	n     int
	delay time.Duration
}

func (f *fakeLM) Generate(ctx context.Context, p backend.Prompt, o backend.GenerateOptions, out chan<- backend.Frame) (backend.Result, error) {
	var res backend.Result
	for i := 0; i < f.n; i++ {
		select {
		case <-ctx.Done():
			res.Stop = backend.StopCancelled
			return res, ctx.Err()
		case <-time.After(f.delay):
		}
		var c backend.Codes
		c[0] = int32(i)
		out <- backend.Frame{Index: i, Codes: c}
		res.Frames++
		res.FrameTimes = append(res.FrameTimes, f.delay)
	}
	res.Stop = backend.StopEOS
	return res, nil
}
func (f *fakeLM) Device() string { return "fake" }
func (f *fakeLM) Close() error   { return nil }

// fakeCodec emits samples equal to each frame's group-0 code.
type fakeCodec struct{ failAt int }

type fakeStream struct {
	c    *fakeCodec
	seen int
}

func (c *fakeCodec) NewStream() (backend.CodecStream, error) { return &fakeStream{c: c}, nil }
func (c *fakeCodec) SamplesPerFrame() int                    { return 4 }
func (c *fakeCodec) SampleRate() int                         { return 50 } // 12.5 frames/s * 4
func (s *fakeStream) Close() error                           { return nil }
func (s *fakeStream) Push(frames []backend.Codes) ([]float32, error) {
	var pcm []float32
	for _, f := range frames {
		if s.c.failAt > 0 && s.seen == s.c.failAt {
			return nil, errors.New("boom")
		}
		s.seen++
		for j := 0; j < 4; j++ {
			pcm = append(pcm, float32(f[0]))
		}
	}
	return pcm, nil
}

func collect(t *testing.T, ch <-chan Chunk) []Chunk {
	t.Helper()
	var out []Chunk
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, c)
		case <-timeout:
			t.Fatal("pipeline did not finish")
		}
	}
}

func runStream(ctx context.Context, s *stream) <-chan Chunk {
	ch := make(chan Chunk, 2)
	s.start = time.Now()
	go s.run(ctx, ch)
	return ch
}

func TestPipelineChunksInOrderFirstChunkOneFrame(t *testing.T) {
	s := &stream{lm: &fakeLM{n: 10}, codec: &fakeCodec{}, chunkFrames: 4}
	chunks := collect(t, runStream(context.Background(), s))
	final := chunks[len(chunks)-1]
	if !final.Final || final.Err != nil || final.Stats == nil {
		t.Fatalf("final chunk %+v", final)
	}
	body := chunks[:len(chunks)-1]
	wantSizes := []int{1, 4, 4, 1}
	if len(body) != len(wantSizes) {
		t.Fatalf("%d chunks, want %d", len(body), len(wantSizes))
	}
	next := 0
	for i, c := range body {
		if c.Frames != wantSizes[i] || c.FirstFrame != next || len(c.PCM) != 4*c.Frames {
			t.Errorf("chunk %d: %+v", i, c)
		}
		for j, v := range c.PCM {
			if int(v) != next+j/4 {
				t.Fatalf("chunk %d sample %d = %v, frames out of order", i, j, v)
			}
		}
		next += c.Frames
	}
	st := final.Stats
	if st.Frames != 10 || st.AudioSeconds != 0.8 || st.TTFC <= 0 || st.RTF <= 0 || st.Stop != backend.StopEOS {
		t.Errorf("stats %+v", st)
	}
}

func TestPipelineCancelStopsAndReports(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{lm: &fakeLM{n: 1000, delay: time.Millisecond}, codec: &fakeCodec{}, chunkFrames: 1}
	ch := runStream(ctx, s)
	<-ch
	cancel()
	chunks := collect(t, ch)
	final := chunks[len(chunks)-1]
	if !final.Final || !errors.Is(final.Err, ErrCancelled) || final.Stats.Stop != backend.StopCancelled {
		t.Fatalf("final after cancel: %+v err=%v", final, final.Err)
	}
	if final.Stats.Frames >= 1000 {
		t.Error("cancel did not stop the LM")
	}
}

func TestPipelineCodecErrorEndsUtterance(t *testing.T) {
	s := &stream{lm: &fakeLM{n: 50}, codec: &fakeCodec{failAt: 3}, chunkFrames: 1}
	chunks := collect(t, runStream(context.Background(), s))
	final := chunks[len(chunks)-1]
	if final.Err == nil || len(chunks) != 4 {
		t.Fatalf("want 3 audio chunks then a failed final, got %d chunks, err %v", len(chunks), final.Err)
	}
}

// resettable is a fake GPU-like stream that counts resets.
type resettable struct {
	fakeStream
	resets, closes int
}

func (r *resettable) Reset() error { r.resets++; r.seen = 0; return nil }
func (r *resettable) Close() error { r.closes++; return nil }

type resettableCodec struct {
	fakeCodec
	made []*resettable
}

func (c *resettableCodec) NewStream() (backend.CodecStream, error) {
	r := &resettable{fakeStream: fakeStream{c: &c.fakeCodec}}
	c.made = append(c.made, r)
	return r, nil
}

// A resettable codec stream is made once and reset for every later
// utterance (a new GPU stream would capture its graphs again); Close frees it.
func TestEngineReusesResettableCodecStream(t *testing.T) {
	c := &resettableCodec{}
	e := &Engine{codec: c, lm: &fakeLM{n: 3}}
	for i := 0; i < 3; i++ {
		s := &stream{lm: e.lm, codec: c, chunkFrames: 1, openCodec: e.takeCodecStream, releaseCodec: e.keepCodecStream}
		if final := collect(t, runStream(context.Background(), s)); final[len(final)-1].Err != nil {
			t.Fatal(final[len(final)-1].Err)
		}
	}
	if len(c.made) != 1 || c.made[0].resets != 2 || c.made[0].closes != 0 {
		t.Fatalf("streams made %d, resets %d, closes %d; want 1, 2, 0", len(c.made), c.made[0].resets, c.made[0].closes)
	}
	e.Close()
	if c.made[0].closes != 1 {
		t.Error("Close did not free the kept stream")
	}
}

// slowCodec counts the frames it decodes, taking a while for each.
type slowCodec struct {
	fakeCodec
	mu      sync.Mutex
	decoded int
}

type slowStream struct{ c *slowCodec }

func (c *slowCodec) NewStream() (backend.CodecStream, error) { return slowStream{c}, nil }
func (s slowStream) Close() error                            { return nil }
func (s slowStream) Push(frames []backend.Codes) ([]float32, error) {
	time.Sleep(5 * time.Millisecond)
	s.c.mu.Lock()
	s.c.decoded += len(frames)
	s.c.mu.Unlock()
	return make([]float32, 4*len(frames)), nil
}

func (c *slowCodec) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decoded
}

// TestPipelineCancelSkipsQueuedFrames: after a cancel, the frames the LM had
// queued ahead of the codec are dropped, not decoded, so the engine is free
// within one codec step (a server frees a disconnected client's slot so).
func TestPipelineCancelSkipsQueuedFrames(t *testing.T) {
	codec := &slowCodec{}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{lm: &fakeLM{n: 1000}, codec: codec, chunkFrames: 1}
	ch := runStream(ctx, s)
	<-ch // the first chunk: the LM has run ahead by now
	time.Sleep(20 * time.Millisecond)
	cancel()
	atCancel := codec.count()
	t0 := time.Now()
	collect(t, ch)
	if extra := codec.count() - atCancel; extra > 1 {
		t.Errorf("%d frames decoded after the cancel; want at most the one in progress", extra)
	}
	if d := time.Since(t0); d > 100*time.Millisecond {
		t.Errorf("stream ended %v after the cancel", d)
	}
}

// holdingLM emits two frames and, between them, waits on HoldAfterFirst,
// noting whether the first chunk had been decoded by then.
type holdingLM struct {
	codec        *hookCodec
	held         bool
	decodedFirst bool
}

func (f *holdingLM) Generate(ctx context.Context, p backend.Prompt, o backend.GenerateOptions, out chan<- backend.Frame) (backend.Result, error) {
	out <- backend.Frame{Index: 0}
	if o.HoldAfterFirst != nil {
		f.held = true
		<-o.HoldAfterFirst
		f.decodedFirst = f.codec.pushes.Load() > 0
	}
	out <- backend.Frame{Index: 1}
	return backend.Result{Frames: 2, Stop: backend.StopEOS}, nil
}
func (f *holdingLM) Device() string { return "fake" }
func (f *holdingLM) Close() error   { return nil }

// hookCodec is fakeCodec running hook before each push and counting the
// pushes that finished.
type hookCodec struct {
	fakeCodec
	hook   func()
	pushes atomic.Int32
}

type hookStream struct {
	backend.CodecStream
	c *hookCodec
}

func (c *hookCodec) NewStream() (backend.CodecStream, error) {
	s, _ := c.fakeCodec.NewStream()
	return hookStream{s, c}, nil
}

func (s hookStream) Push(frames []backend.Codes) ([]float32, error) {
	s.c.hook()
	pcm, err := s.CodecStream.Push(frames)
	s.c.pushes.Add(1)
	return pcm, err
}

// TestPipelineHoldsTheLMUntilTheFirstChunk: with sharedCores (LM and codec on the
// same cores) the LM's second frame waits for the first chunk's decode.
func TestPipelineHoldsTheLMUntilTheFirstChunk(t *testing.T) {
	// Slow pushes: an LM not held would run ahead of the first.
	codec := &hookCodec{hook: func() { time.Sleep(20 * time.Millisecond) }}
	lm := &holdingLM{codec: codec}
	s := &stream{lm: lm, codec: codec, chunkFrames: 1, sharedCores: true}
	chunks := collect(t, runStream(context.Background(), s))
	if final := chunks[len(chunks)-1]; final.Err != nil || final.Stats.Frames != 2 {
		t.Fatalf("final chunk %+v", final)
	}
	if !lm.held || !lm.decodedFirst {
		t.Errorf("LM held %v, first chunk decoded when released %v", lm.held, lm.decodedFirst)
	}
}

// TestPipelineCodecOccupiesACoreBesideTheLM: on shared cores with two of
// them, a push made while the LM runs holds one core, so its loops get no
// helper (the other core is the LM's).
func TestPipelineCodecOccupiesACoreBesideTheLM(t *testing.T) {
	old := cores.SetLimit(2)
	defer cores.SetLimit(old)
	// Each push runs a two-worker loop and notes how many goroutines ran it
	// at once.
	var peaks []int32
	codec := &hookCodec{hook: func() {
		var running, peak atomic.Int32
		cores.For(64, 1, 2, func(lo, hi int) {
			r := running.Add(1)
			if r > peak.Load() {
				peak.Store(r)
			}
			time.Sleep(200 * time.Microsecond)
			running.Add(-1)
		})
		peaks = append(peaks, peak.Load())
	}}
	lm := &fakeLM{n: 4, delay: 20 * time.Millisecond}
	s := &stream{lm: lm, codec: codec, chunkFrames: 1, sharedCores: true}
	collect(t, runStream(context.Background(), s))
	// The first push is made while the LM is held (this fake LM ignores
	// the hold, but the pipeline counts on it), so only later ones occupy.
	if len(peaks) < 3 {
		t.Fatalf("%d pushes", len(peaks))
	}
	for i, p := range peaks[1:] {
		if p != 1 {
			t.Errorf("push %d beside the LM ran its loop on %d goroutines, want 1", i+1, p)
		}
	}
}

// TestPipelineSlowSharedCoresDecodeInLargerChunks: on shared cores, an LM
// slower than real time (fakeCodec's frame is 80 ms of audio) gets chunks of
// slowChunkFrames after the first; one that keeps up gets the size asked.
func TestPipelineSlowSharedCoresDecodeInLargerChunks(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		max   int
	}{{120 * time.Millisecond, slowChunkFrames}, {2 * time.Millisecond, 1}} {
		s := &stream{lm: &fakeLM{n: 11, delay: tc.delay}, codec: &fakeCodec{}, chunkFrames: 1, sharedCores: true}
		chunks := collect(t, runStream(context.Background(), s))
		biggest := 0
		for _, c := range chunks {
			biggest = max(biggest, c.Frames)
		}
		if chunks[0].Frames != 1 || biggest != tc.max {
			t.Errorf("LM at %v a frame: first chunk %d frames, largest %d, want 1 and %d", tc.delay, chunks[0].Frames, biggest, tc.max)
		}
	}
}

// TestAutoChunkFollowsTheListenersBuffer: a chunk the engine sizes holds the
// largest power of two of frames that the audio ahead of the listener covers
// twice over, one while the frame time is unknown or the buffer is empty, at
// most maxAutoChunkFrames.
func TestAutoChunkFollowsTheListenersBuffer(t *testing.T) {
	t0 := time.Now()
	pace := func(frames int, per time.Duration) *framePace {
		return &framePace{frame: 80 * time.Millisecond, first: t0, frames: frames, last: t0.Add(time.Duration(frames) * per)}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		p     *framePace
		ahead time.Duration
		want  int
	}{
		{pace(0, 0), time.Second, 1},                                  // no frame time yet
		{pace(4, 10*ms), 0, 1},                                        // the listener is waiting
		{pace(4, 10*ms), -50 * ms, 1},                                 // and has been for a while
		{pace(4, 10*ms), 39 * ms, 1},                                  // 39 ms cover one frame of 10 twice over
		{pace(4, 10*ms), 60 * ms, 2},                                  // 60 / (2 x 10) = 3, down to a power of two
		{pace(4, 10*ms), 80 * ms, 4},                                  // 80 / (2 x 10)
		{pace(4, 10*ms), 150 * ms, 4},                                 // 7.5
		{pace(4, 2500*time.Microsecond), 75 * ms, maxAutoChunkFrames}, // capped
		{pace(4, 60*ms), 80 * ms, 1},                                  // near real time: one frame a chunk
		{pace(10, 60*ms), 280 * ms, 2},                                // until the buffer has grown
	} {
		if got := tc.p.autoChunk(tc.ahead); got != tc.want {
			t.Errorf("frame every %v, %v ahead: chunk of %d frames, want %d", tc.p.perFrame(), tc.ahead, got, tc.want)
		}
	}
}

// TestPipelineAutoChunksGrowWhenAhead: with the chunk size left to the engine
// (0), an LM 40 times faster than real time gets a one-frame first chunk,
// then chunks of up to maxAutoChunkFrames that end on multiples of their
// size (rounded down to a power of two), every frame once and in order, each
// chunk ready before the audio sent before it has played.
func TestPipelineAutoChunksGrowWhenAhead(t *testing.T) {
	const frames = 40
	s := &stream{lm: &fakeLM{n: frames, delay: 2 * time.Millisecond}, codec: &fakeCodec{}, chunkFrames: 0}
	chunks := collect(t, runStream(context.Background(), s))
	biggest, next := 0, 0
	var played time.Duration // audio sent before each chunk, from the first
	for i, c := range chunks {
		if c.Final && len(c.PCM) == 0 {
			continue
		}
		if c.FirstFrame != next {
			t.Fatalf("chunk %d starts at frame %d, want %d", i, c.FirstFrame, next)
		}
		if i > 0 && c.Since-chunks[0].Since > played {
			t.Errorf("chunk %d came %v after the first, when the %v sent before it had played", i, c.Since-chunks[0].Since, played)
		}
		if i > 0 && !c.Final {
			if size := floorPow2(c.Frames); (c.FirstFrame+c.Frames)%size != 0 {
				t.Errorf("chunk %d (frames %d-%d) does not end on a multiple of %d", i, c.FirstFrame, c.FirstFrame+c.Frames-1, size)
			}
		}
		next += c.Frames
		played += time.Duration(c.Frames) * 80 * time.Millisecond
		biggest = max(biggest, c.Frames)
	}
	if next != frames || chunks[0].Frames != 1 || biggest != maxAutoChunkFrames {
		t.Errorf("%d frames, first chunk %d, largest %d; want %d, 1 and %d", next, chunks[0].Frames, biggest, frames, maxAutoChunkFrames)
	}
}
