package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/cores"
)

// frameBuffer lets the LM run ahead of the codec by a few frames, so the
// codec of frame k overlaps the LM work of frame k+1 without unbounded memory.
const frameBuffer = 8

// slowChunkFrames is the chunk size after the first when the LM and the
// codec share the CPU and frames reach the codec slower than they play (the
// LM or the codec behind real time): the listener waits on synthesis
// whatever the chunk size, so each push decodes several frames and reads
// the codec's weights once for all of them. Dev VM,
// 0.6B int8, 12 frames end to end: chunks of 1, 2, 4 frames gave RTF
// 2.41-2.80, 2.24-2.36, 2.18-2.28 (codec 113-132, 93-94, 78-80 ms a frame).
// A machine that keeps up keeps the requested size, so its first chunks
// follow each other without a gap.
const slowChunkFrames = 4

// framePace tracks how fast frames reach the codec, from frame 1 on (frame 0
// comes after the prefill, and frame 1 may have waited for the first chunk).
type framePace struct {
	frame  time.Duration // audio per frame
	first  time.Time     // when frame 1 arrived
	frames int           // frames after frame 1
	last   time.Time
}

func (p *framePace) arrived(index int) {
	now := time.Now()
	switch {
	case index == 1:
		p.first = now
	case index > 1:
		p.frames++
		p.last = now
	}
}

// slow reports whether frames have been coming slower than real time.
func (p *framePace) slow() bool {
	return p.frames > 0 && p.last.Sub(p.first) > time.Duration(p.frames)*p.frame
}

// stream is one utterance flowing through LM and codec. It runs two
// goroutines: the LM producing frames, and the codec turning them into PCM
// chunks on out. out is closed after the final chunk.
type stream struct {
	lm    backend.LM
	codec backend.Codec
	// openCodec and releaseCodec, when set, hand out and take back a codec
	// stream (the engine reuses one); otherwise a fresh stream is made and closed.
	openCodec    func() (backend.CodecStream, error)
	releaseCodec func(backend.CodecStream)
	prompt       backend.Prompt
	opt          backend.GenerateOptions
	chunkFrames  int
	start        time.Time
	prepare      time.Duration // tokenizer + prompt builder, before start of the LM
	device       string
	// trimSamples drops this many samples from the start of the audio (ICL
	// voice clone decodes the reference codes as context and cuts them).
	contextCodes []backend.Codes
	// sharedCores: the LM and the codec run on the same CPU cores. The LM
	// then waits after its first frame until the first chunk is decoded (its
	// next frame beside the first decode slowed that about 2x: TTFC), and
	// each later push holds a core for the codec (cores.Occupy).
	sharedCores bool
}

func (s *stream) run(ctx context.Context, out chan<- Chunk) {
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	frames := make(chan backend.Frame, frameBuffer)
	type lmDone struct {
		res backend.Result
		err error
	}
	lmResult := make(chan lmDone, 1)
	opt := s.opt
	unhold := func() {}
	if s.sharedCores {
		hold := make(chan struct{})
		opt.HoldAfterFirst = hold
		unhold = sync.OnceFunc(func() { close(hold) })
		defer unhold()
	}
	go func() {
		defer close(frames)
		res, err := s.lm.Generate(ctx, s.prompt, opt, frames)
		lmResult <- lmDone{res, err}
	}()

	stats := &Stats{Device: s.device, Prepare: s.prepare}
	open, release := s.openCodec, s.releaseCodec
	if open == nil {
		open = s.codec.NewStream
		release = func(cs backend.CodecStream) { cs.Close() }
	}
	codecStream, err := open()
	if err != nil {
		cancel()
		for range frames {
		}
		<-lmResult
		s.finish(ctx, out, stats, fmt.Errorf("codec: %w", err))
		return
	}
	defer release(codecStream)

	var codecErr error
	if len(s.contextCodes) > 0 {
		// Decode the reference codes first so the generated audio has its
		// acoustic left context; their samples are not emitted.
		if _, err := codecStream.Push(s.contextCodes); err != nil {
			codecErr = fmt.Errorf("codec: reference codes: %w", err)
		}
	}

	var (
		pending   []backend.Codes
		firstIdx  int
		codecTime time.Duration
		sent      int
		samples   int
	)
	// flush decodes pending as one chunk. lmRunning is false for the first
	// chunk (on shared cores the LM is held for it) and the last (the LM is
	// done). While the LM computes beside it on the same cores, the push
	// holds one (cores.Occupy) so the LM's helpers leave it to the codec;
	// otherwise the codec's own loops may take every core.
	flush := func(lmRunning bool) bool {
		if len(pending) == 0 || codecErr != nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		t0 := time.Now()
		release := func() {}
		if lmRunning && s.sharedCores {
			release = cores.Occupy()
		}
		pcm, err := codecStream.Push(pending)
		release()
		codecTime += time.Since(t0)
		if err != nil {
			codecErr = fmt.Errorf("codec: %w", err)
			cancel()
			return false
		}
		c := Chunk{PCM: pcm, FirstFrame: firstIdx, Frames: len(pending), Codes: pending, Since: time.Since(s.start)}
		if sent == 0 {
			stats.TTFC = c.Since
			stats.FirstCodec = time.Since(t0)
			unhold()
		}
		select {
		case out <- c:
		case <-ctx.Done():
			return false
		}
		sent++
		samples += len(pcm)
		firstIdx += len(pending)
		pending = nil
		return true
	}
	pace := framePace{frame: time.Second * time.Duration(s.codec.SamplesPerFrame()) / time.Duration(s.codec.SampleRate())}
	for f := range frames {
		// Drain so the LM goroutine can finish; after a cancel the frames
		// it had queued are dropped undecoded, so the engine is free again
		// within one frame instead of decoding up to frameBuffer more.
		if codecErr != nil || ctx.Err() != nil {
			continue
		}
		pending = append(pending, f.Codes)
		pace.arrived(f.Index)
		// The first chunk is the first frame, for the lowest time to first audio.
		want := s.chunkFrames
		switch {
		case sent == 0:
			want = 1
		case s.sharedCores && pace.slow():
			want = max(want, slowChunkFrames)
		}
		if len(pending) >= want {
			if !flush(sent > 0) {
				continue
			}
		}
	}
	flush(false)
	lm := <-lmResult

	stats.Frames = lm.res.Frames
	stats.Prefill = lm.res.Prefill
	stats.Stop = lm.res.Stop
	if len(lm.res.FrameTimes) > 0 {
		stats.FirstFrameLM = lm.res.FrameTimes[0]
	}
	if n := len(lm.res.FrameTimes); n > 0 {
		var sum time.Duration
		for _, d := range lm.res.FrameTimes {
			sum += d
		}
		stats.LMPerFrame = sum / time.Duration(n)
	}
	if stats.Frames > 0 {
		stats.CodecPerFrame = codecTime / time.Duration(stats.Frames)
	}
	stats.AudioSeconds = float64(samples) / float64(s.codec.SampleRate())
	err = codecErr
	if err == nil {
		err = lm.err
	}
	s.finish(ctx, out, stats, err)
}

// finish sends the final chunk, which carries the stats and the error. After a
// cancel the consumer may have stopped reading, so the send then gives up
// after a short wait instead of leaking this goroutine.
func (s *stream) finish(ctx context.Context, out chan<- Chunk, stats *Stats, err error) {
	stats.Wall = time.Since(s.start)
	if stats.AudioSeconds > 0 {
		stats.RTF = stats.Wall.Seconds() / stats.AudioSeconds
	}
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		err = fmt.Errorf("%w: %w", ErrCancelled, err)
		stats.Stop = backend.StopCancelled
	}
	final := Chunk{Final: true, Since: time.Since(s.start), Err: err, Stats: stats}
	if ctx.Err() == nil {
		out <- final
		return
	}
	select {
	case out <- final:
	case <-time.After(2 * time.Second):
	}
}
