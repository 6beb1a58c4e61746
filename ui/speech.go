package ui

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode"

	"talkbox/app/audio"
	"talkbox/engine"
)

// timelineCap bounds the per-chunk timeline kept for the panel.
const timelineCap = 512

// utterance is one Speak: the text split into sentences, synthesised one
// after another into a single chunk stream that one Play consumes. Its
// figures are atomics written by its goroutines and read by the UI ticker.
type utterance struct {
	id        uint64
	text      string
	sentences []string
	req       engine.Request // Text is filled per sentence
	eng       Engine
	player    Player
	playOpt   audio.PlayOptions

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when synthesis and playback have both ended

	submitted     time.Time // Speak pressed
	submittedMono int64     // audio.Now() at Speak, to compare with the ring's first-sound stamp

	firstChunk   atomic.Int64 // ns after submit + 1; 0 = none yet
	lastChunk    atomic.Int64 // ns after submit of the latest chunk
	synthEnd     atomic.Int64 // ns after submit when the last sentence finished; 0 = running
	frames       atomic.Int64
	samples      atomic.Int64
	sentenceDone atomic.Int32
	timeline     [timelineCap]atomic.Int64 // chunk arrival, ns after submit
	timelineLen  atomic.Int32

	// Written by run before done closes; read after done only.
	pcm      []float32
	result   audio.Result
	err      error // synthesis or playback failure (not cancellation)
	stopped  bool  // cancelled by Stop or a newer Speak
	stats    []*engine.Stats
	finished time.Duration
}

func newUtterance(id uint64, text string, req engine.Request, eng Engine, player Player, opt audio.PlayOptions) *utterance {
	ctx, cancel := context.WithCancel(context.Background())
	return &utterance{
		id: id, text: text, sentences: SplitSentences(text), req: req, eng: eng, player: player, playOpt: opt,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		submitted: time.Now(), submittedMono: audio.Now(),
	}
}

// run waits for the previous utterance to wind down (the ring has a single
// producer), then synthesises sentence after sentence into one stream while
// the player plays it: sentence k+1 is synthesised while k is still playing
// from the ring, so there is no gap between them.
func (u *utterance) run(prev *utterance) {
	defer close(u.done)
	if prev != nil {
		<-prev.done
	}
	stream := make(chan engine.Chunk, 16)
	playDone := make(chan struct{})
	go func() {
		defer close(playDone)
		u.result, u.err = u.player.Play(u.ctx, stream, u.playOpt)
	}()
	synthErr := u.synthesize(stream)
	close(stream)
	<-playDone
	u.finished = time.Since(u.submitted)
	switch {
	case u.ctx.Err() != nil:
		u.stopped, u.err = true, nil
	case synthErr != nil:
		u.err = synthErr
	}
	u.cancel()
}

// synthesize feeds every sentence's chunks into stream. Intermediate Final
// chunks are passed on as ordinary chunks so the player sees one stream.
func (u *utterance) synthesize(stream chan<- engine.Chunk) error {
	defer func() {
		if u.synthEnd.Load() == 0 {
			u.synthEnd.Store(int64(time.Since(u.submitted)))
		}
	}()
	for i, s := range u.sentences {
		req := u.req
		req.Text = s
		ch, err := u.eng.Synthesize(u.ctx, req)
		if err != nil {
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		if err := u.forward(ch, stream); err != nil {
			if u.ctx.Err() != nil {
				return u.ctx.Err()
			}
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		u.sentenceDone.Store(int32(i + 1))
	}
	return nil
}

// forward copies one sentence's chunks into stream and records figures.
func (u *utterance) forward(ch <-chan engine.Chunk, stream chan<- engine.Chunk) error {
	defer drainLater(ch)
	for {
		var c engine.Chunk
		var ok bool
		select {
		case <-u.ctx.Done():
			return u.ctx.Err()
		case c, ok = <-ch:
		}
		if !ok {
			return errors.New("engine closed the stream without a final chunk")
		}
		if len(c.PCM) > 0 {
			u.recordChunk(c)
		}
		if c.Stats != nil {
			u.stats = append(u.stats, c.Stats)
		}
		final, err := c.Final, c.Err
		c.Final, c.Err = false, nil
		if len(c.PCM) > 0 {
			select {
			case stream <- c:
			case <-u.ctx.Done():
				return u.ctx.Err()
			}
		}
		if err != nil {
			return err
		}
		if final {
			return nil
		}
	}
}

func (u *utterance) recordChunk(c engine.Chunk) {
	at := int64(time.Since(u.submitted))
	u.firstChunk.CompareAndSwap(0, at+1)
	u.lastChunk.Store(at)
	u.pcm = append(u.pcm, c.PCM...)
	u.samples.Add(int64(len(c.PCM)))
	frames := c.Frames
	if frames <= 0 {
		frames = 1
	}
	u.frames.Add(int64(frames))
	if n := u.timelineLen.Load(); n < timelineCap {
		u.timeline[n].Store(at)
		u.timelineLen.Store(n + 1)
	}
}

// drainLater empties an abandoned engine channel so the engine's sender
// never blocks after a cancel; it stops once the engine closes it.
func drainLater(ch <-chan engine.Chunk) {
	go func() {
		for range ch {
		}
	}()
}

// figures is a snapshot for the latency panel.
type figures struct {
	TTFC        time.Duration // -1 = not yet
	FirstSound  time.Duration // -1 = not yet
	RTF         float64       // synthesis wall so far / audio so far; 0 = not yet
	FramesPerS  float64
	Frames      int64
	Audio       time.Duration
	Underruns   uint64
	Silent      time.Duration
	Buffered    time.Duration
	Held        bool
	Sentence    int
	Sentences   int
	Timeline    []time.Duration
	Elapsed     time.Duration
	Synthesised bool // every sentence done
}

// snapshot reads the atomics (and the player's, for this utterance only).
func (u *utterance) snapshot(live audio.Live) figures {
	f := figures{TTFC: -1, FirstSound: -1, Sentences: len(u.sentences)}
	elapsed := time.Since(u.submitted)
	f.Elapsed = elapsed
	if v := u.firstChunk.Load(); v > 0 {
		f.TTFC = time.Duration(v - 1)
	}
	f.Frames = u.frames.Load()
	f.Audio = time.Duration(float64(u.samples.Load()) / audio.SampleRate * float64(time.Second))
	wall := elapsed
	if end := u.synthEnd.Load(); end > 0 {
		wall = time.Duration(end)
		f.Synthesised = true
	}
	if f.Audio > 0 {
		f.RTF = wall.Seconds() / f.Audio.Seconds()
		f.FramesPerS = float64(f.Frames) / wall.Seconds()
	}
	f.Sentence = int(u.sentenceDone.Load())
	n := int(u.timelineLen.Load())
	f.Timeline = make([]time.Duration, n)
	for i := range n {
		f.Timeline[i] = time.Duration(u.timeline[i].Load())
	}
	if live.Tag == u.id {
		if live.FirstSound > 0 {
			f.FirstSound = time.Duration(live.FirstSound - u.submittedMono)
		}
		f.Underruns, f.Silent, f.Buffered, f.Held = live.Underruns, live.Silent, live.Buffered, live.Held
	}
	return f
}

// expectedSeconds guesses the audio length of text for the prebuffer
// policy: about 14 Latin characters or 4.5 CJK characters per second.
func expectedSeconds(text string) float64 {
	var latin, cjk int
	for _, r := range text {
		switch {
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
			cjk++
		case !unicode.IsSpace(r):
			latin++
		}
	}
	return float64(latin)/14 + float64(cjk)/4.5
}
