// Package speech runs one Speak of the window without any Fyne: the text
// cut into sentences (engine.SplitSentences), synthesised one after another
// into a single chunk stream that one Play consumes, the prebuffer options
// for that Play, and the live figures the latency panel shows. Package ui
// draws it; this package touches no widget.
package speech

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"talkbox/app/audio"
	"talkbox/engine"
)

// Synthesizer streams one request's PCM chunks; the last chunk has Final
// set, with Stats, and Err on failure. ui.Engine and *engine.Engine
// implement it.
type Synthesizer interface {
	Synthesize(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error)
}

// Player plays one chunk stream; *audio.Player implements it.
type Player interface {
	Play(ctx context.Context, chunks <-chan engine.Chunk, o audio.PlayOptions) (audio.Result, error)
}

// timelineCap bounds the per-chunk timeline kept for the panel.
const timelineCap = 512

// MaxKeptAudio bounds the audio an utterance keeps for the history and Save
// WAV: reading a book aloud would otherwise hold about 350 MB an hour. What
// is kept is whole sentences from the start, and Text says which.
const MaxKeptAudio = 15 * time.Minute

// maxKeptSamples is MaxKeptAudio in samples.
var maxKeptSamples = int(MaxKeptAudio.Seconds() * audio.SampleRate)

// Utterance is one Speak: the text split into sentences, synthesised one
// after another into a single chunk stream that one Play consumes. Its
// figures are atomics written by its goroutines and read by the UI ticker.
type Utterance struct {
	id        uint64
	text      string
	sentences []string
	req       engine.Request // Text is filled per sentence
	eng       Synthesizer
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
	// bufferWait is the time the synthesis spent blocked on a full playback
	// stream (the player's ring was full), and waitSince when the current
	// wait began (ns after submit + 1; 0 = not waiting). RTF leaves it out.
	bufferWait  atomic.Int64
	waitSince   atomic.Int64
	timeline    [timelineCap]atomic.Int64 // chunk arrival, ns after submit
	timelineLen atomic.Int32
	// sent is the samples handed to the player so far, and ends[i] that
	// count once sentence i was all handed over (set before sentenceDone
	// counts it): the playback position falls in sentence i when it is
	// below ends[i] and at or past ends[i-1].
	sent atomic.Int64
	ends []atomic.Int64

	// Written by Run before done closes; read after done only.
	pcm      []float32
	result   audio.Result
	err      error // synthesis or playback failure (not cancellation)
	stopped  bool  // cancelled by Stop or a newer Speak
	stats    []*engine.Stats
	finished time.Duration
	kept     int  // sentences whose audio pcm holds in full
	keptLen  int  // len(pcm) at the end of sentence kept-1
	capped   bool // pcm reached maxKeptSamples: cut back to keptLen, no longer growing
}

// New prepares utterance id (the player's Tag for it) of text; req is the
// request every sentence is sent with (its Text is replaced per sentence).
// lastRTF is the real-time factor the previous utterance measured (<= 0 when
// unknown); with the text's expected length it sets the prebuffer. Nothing
// starts until Run.
func New(id uint64, text string, req engine.Request, eng Synthesizer, player Player, lastRTF float64) *Utterance {
	return newUtterance(id, text, engine.SplitSentences(text), req, eng, player, lastRTF)
}

// NewSentences is New for text already cut into sentences by
// engine.SplitSentences, such as a document read from one of its sentences
// on: text is what Text reports, and sentence i of the figures is
// sentences[i].
func NewSentences(id uint64, text string, sentences []string, req engine.Request, eng Synthesizer, player Player, lastRTF float64) *Utterance {
	return newUtterance(id, text, sentences, req, eng, player, lastRTF)
}

func newUtterance(id uint64, text string, sentences []string, req engine.Request, eng Synthesizer, player Player, lastRTF float64) *Utterance {
	ctx, cancel := context.WithCancel(context.Background())
	opt := audio.PlayOptions{RTF: lastRTF, ExpectedSeconds: expectedSeconds(text), Tag: id}
	return &Utterance{
		id: id, text: text, sentences: sentences, req: req, eng: eng, player: player, playOpt: opt,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), ends: make([]atomic.Int64, len(sentences)),
		submitted: time.Now(), submittedMono: audio.Now(),
	}
}

// Text is the text as typed. Once Done it is the text of the audio kept:
// when a stop or MaxKeptAudio cut the audio short, only the sentences it
// holds (a sentence cut by a stop counts), joined by spaces, so a book
// stopped after a page is kept as that page. Request is the request its
// sentences are sent with.
func (u *Utterance) Text() string {
	select {
	case <-u.done:
	default:
		return u.text
	}
	n := u.kept
	if !u.capped && len(u.pcm) > u.keptLen {
		n++ // the sentence a stop cut
	}
	if n >= len(u.sentences) {
		return u.text
	}
	return strings.Join(u.sentences[:n], " ")
}

func (u *Utterance) Request() engine.Request { return u.req }

// Prebuffer is how much audio the player holds back before it starts.
func (u *Utterance) Prebuffer() time.Duration { return audio.Prebuffer(u.playOpt) }

// Cancel stops synthesis and playback; Done closes once both have ended.
func (u *Utterance) Cancel()               { u.cancel() }
func (u *Utterance) Done() <-chan struct{} { return u.done }

// Run waits for the previous utterance to wind down (the ring has a single
// producer), then synthesises sentence after sentence into one stream while
// the player plays it: sentence k+1 is synthesised while k is still playing
// from the ring, so there is no gap between them.
func (u *Utterance) Run(prev *Utterance) {
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
func (u *Utterance) synthesize(stream chan<- engine.Chunk) error {
	defer func() {
		if u.synthEnd.Load() == 0 {
			u.synthEnd.Store(int64(time.Since(u.submitted)))
		}
	}()
	for i, s := range u.sentences {
		if u.ctx.Err() != nil {
			return u.ctx.Err() // cancelled: no request for the next sentence
		}
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
		u.ends[i].Store(u.sent.Load())
		if !u.capped {
			u.kept, u.keptLen = i+1, len(u.pcm)
		}
		u.sentenceDone.Store(int32(i + 1))
	}
	return nil
}

// forward copies one sentence's chunks into stream and records figures.
func (u *Utterance) forward(ch <-chan engine.Chunk, stream chan<- engine.Chunk) error {
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
			if err := u.send(stream, c); err != nil {
				return err
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

// send hands c to the player, timing any wait on a full stream: that time
// is the player's pace, not the engine's, and is kept out of the RTF.
func (u *Utterance) send(stream chan<- engine.Chunk, c engine.Chunk) error {
	select {
	case stream <- c:
		u.sent.Add(int64(len(c.PCM)))
		return nil
	default:
	}
	start := time.Since(u.submitted)
	u.waitSince.Store(int64(start) + 1)
	defer func() {
		u.waitSince.Store(0)
		u.bufferWait.Add(int64(time.Since(u.submitted) - start))
	}()
	select {
	case stream <- c:
		u.sent.Add(int64(len(c.PCM)))
		return nil
	case <-u.ctx.Done():
		return u.ctx.Err()
	}
}

func (u *Utterance) recordChunk(c engine.Chunk) {
	at := int64(time.Since(u.submitted))
	u.firstChunk.CompareAndSwap(0, at+1)
	u.lastChunk.Store(at)
	if !u.capped && len(u.pcm)+len(c.PCM) > maxKeptSamples {
		u.capped, u.pcm = true, u.pcm[:u.keptLen]
	}
	if !u.capped {
		u.pcm = append(u.pcm, c.PCM...)
	}
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

// Figures is a snapshot for the latency panel.
type Figures struct {
	TTFC       time.Duration // -1 = not yet
	FirstSound time.Duration // -1 = not yet
	RTF        float64       // synthesis time so far (less BufferWait) / audio so far; 0 = not yet
	BufferWait time.Duration // time synthesis waited on a full playback buffer
	FramesPerS float64
	Frames     int64
	Audio      time.Duration
	Underruns  uint64
	Silent     time.Duration
	Buffered   time.Duration
	Held       bool
	Sentence   int // sentences synthesised
	Sentences  int
	// Playing is the sentence at the playback position (0 until playback
	// has begun): the one to show as being spoken.
	Playing     int
	Timeline    []time.Duration
	Elapsed     time.Duration
	Synthesised bool // every sentence done
}

// Snapshot reads the atomics (and the player's live figures when they
// belong to this utterance). Any goroutine may call it.
func (u *Utterance) Snapshot(live audio.Live) Figures {
	f := Figures{TTFC: -1, FirstSound: -1, Sentences: len(u.sentences)}
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
	f.BufferWait = time.Duration(u.bufferWait.Load())
	if since := u.waitSince.Load(); since > 0 && !f.Synthesised {
		f.BufferWait += max(0, elapsed-time.Duration(since-1))
	}
	wall = max(wall-f.BufferWait, time.Millisecond)
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
		f.Playing = u.playing(int64(math.Round(live.Position.Seconds() * audio.SampleRate)))
		if live.FirstSound > 0 {
			f.FirstSound = time.Duration(live.FirstSound - u.submittedMono)
		}
		f.Underruns, f.Silent, f.Buffered, f.Held = live.Underruns, live.Silent, live.Buffered, live.Held
	}
	return f
}

// playing is the sentence that holds sample played of the stream: the
// first one handed over in full whose end lies past it, else the one being
// synthesised (playback is waiting for it).
func (u *Utterance) playing(played int64) int {
	done := int(u.sentenceDone.Load())
	i := sort.Search(done, func(i int) bool { return u.ends[i].Load() > played })
	return min(i, max(0, len(u.sentences)-1))
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

// Outcome is how an utterance ended.
type Outcome struct {
	Figures  Figures       // final figures, with the player's first sound, underruns and silence
	PCM      []float32     // all audio synthesised, also when stopped or failed part way
	Err      error         // synthesis or playback failure; nil when stopped
	Stopped  bool          // cancelled by Cancel (Stop or a newer Speak)
	Finished time.Duration // Speak to the end of playback
}

// Outcome reports the end of the utterance; call it only after Done.
func (u *Utterance) Outcome() Outcome {
	f := u.Snapshot(audio.Live{})
	if u.result.FirstSound > 0 {
		f.FirstSound = time.Duration(u.result.FirstSound - u.submittedMono)
	}
	f.Underruns, f.Silent = u.result.Underruns, u.result.Silent
	return Outcome{Figures: f, PCM: u.pcm, Err: u.err, Stopped: u.stopped, Finished: u.finished}
}
