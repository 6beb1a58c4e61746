package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
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

// maxAutoChunkFrames caps a chunk the engine sizes itself (autoChunk): 640 ms
// of audio. H100, synthetic 0.6B, 10 s utterances (docs/dev/batch.md): a lone
// utterance in chunks of 1, 2, 4, 8, 16 frames gave RTF 0.0357, 0.0343,
// 0.0334, 0.0330, 0.0331, since each GPU push reads the codec's weights once
// for all its frames and leaves the LM more of the GPU (LM 2.83 -> 2.60 ms a
// frame); 16 at once 0.0690 -> 0.0663 at 8, 64 at once 0.1469 -> 0.1426 at 4.
// With autoChunk's sizes: one stream 0.0355 -> 0.0329, 16 at once 0.069-0.070
// -> 0.068, 64 at once unchanged within its run-to-run spread.
const maxAutoChunkFrames = 8

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

// autoChunk is the size of the next chunk when the request leaves it to the
// engine: the largest power of two of frames that the listener's buffer
// covers twice over, up to maxAutoChunkFrames. ahead is the audio sent minus
// the time since the first chunk (what a player that started on the first
// chunk still holds); the factor two leaves room for the codec's push and
// for frames that come late. Until a frame time is known, and whenever the
// buffer is short, it is one frame, so larger chunks never make a listener
// wait. The run loop ends such chunks on multiples of their size.
func (p *framePace) autoChunk(ahead time.Duration) int {
	if p.frames == 0 || ahead <= 0 {
		return 1
	}
	n := maxAutoChunkFrames
	if per := p.perFrame(); per > 0 {
		n = int(min(max(ahead/(2*per), 1), maxAutoChunkFrames))
	}
	return floorPow2(n)
}

// perFrame is the mean time between frames from frame 1 on; 0 while no
// frame after frame 1 has arrived.
func (p *framePace) perFrame() time.Duration {
	if p.frames == 0 {
		return 0
	}
	return p.last.Sub(p.first) / time.Duration(p.frames)
}

// floorPow2 is the largest power of two <= n (n >= 1).
func floorPow2(n int) int { return 1 << (bits.Len(uint(n)) - 1) }

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
	chunkFrames  int // frames a chunk after the first; 0: autoChunk
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
	window := newCodecWindow()
	opt.CodecNear = window.near
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
		firstSent time.Time // when the first chunk went out
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
		took := time.Since(t0)
		window.pushed(len(pending), took)
		codecTime += took
		if err != nil {
			codecErr = fmt.Errorf("codec: %w", err)
			cancel()
			return false
		}
		c := Chunk{PCM: pcm, FirstFrame: firstIdx, Frames: len(pending), Codes: pending, Since: time.Since(s.start)}
		if sent == 0 {
			stats.TTFC = c.Since
			stats.FirstCodec = took
			firstSent = time.Now()
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
		want, auto := s.chunkFrames, s.chunkFrames == 0 && sent > 0
		switch {
		case sent == 0:
			want = 1
		case auto:
			sentAudio := time.Duration(samples) * time.Second / time.Duration(s.codec.SampleRate())
			want = pace.autoChunk(sentAudio - time.Since(firstSent))
		}
		if sent > 0 && s.sharedCores && pace.slow() {
			want = max(want, slowChunkFrames)
		}
		// Where this size's chunks end: on multiples of it (auto), or every
		// want frames from the current chunk's start.
		if auto {
			window.plan(want, want-1, pace.perFrame())
		} else {
			window.plan(want, (firstIdx+want-1)%want, pace.perFrame())
		}
		// A chunk the engine sizes ends on a multiple of its size: the
		// streams of a batch that started together then push the same
		// frames at the same time, and the GPU codec decodes them in one
		// launch (its merger gathers a push from every stream) instead of
		// one launch for each phase.
		if len(pending) >= want || auto && (firstIdx+len(pending))%want == 0 {
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
