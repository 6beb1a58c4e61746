// Package export renders a whole text to an audio file as fast as the
// engine runs (no playback pacing): the text is cut into sentences exactly
// as the window cuts it for speaking (engine.SplitSentences), each sentence
// is synthesised with the same request, and the chunks are encoded as they
// arrive (engine/audioenc: WAV, FLAC or Ogg Opus). The file is written
// through internal/atomicfile, so a failed or cancelled export never leaves
// a partial file under the final name.
package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"talkbox/engine"
	"talkbox/engine/audioenc"
	"talkbox/internal/atomicfile"
)

// Synthesizer streams one request's chunks; *engine.Engine implements it.
type Synthesizer interface {
	Synthesize(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error)
}

// Progress is reported while rendering.
type Progress struct {
	Sentence  int // sentences finished
	Sentences int
	Fraction  float64       // 0..1, by the share of the text's characters finished
	Audio     time.Duration // audio rendered so far
	Elapsed   time.Duration
}

// Job is one export.
type Job struct {
	Engine     Synthesizer
	Request    engine.Request // Text is the whole text; the rest applies to every sentence
	SampleRate int
	Format     audioenc.Format
	// NewEncoder, when set, replaces audioenc.New(w, Format, SampleRate)
	// (the CLI's 32-bit float WAV).
	NewEncoder func(w io.Writer, sampleRate int) (audioenc.Encoder, error)
	// Path is the final file; "-" is standard output; "" renders without
	// writing audio (the CLI's --codes-out alone).
	Path string
	// Progress, when set, is called on the rendering goroutine after every
	// sentence and at most every ProgressEvery in between.
	Progress      func(Progress)
	ProgressEvery time.Duration // default 100 ms
	// Whole sends Request.Text as one request instead of sentence by
	// sentence (it must then be within engine.MaxTextRunes).
	Whole bool
	// OnChunk, when set, sees every chunk with audio (the CLI collects the
	// codes from it).
	OnChunk func(engine.Chunk)
}

// Result describes a finished export.
type Result struct {
	Path      string
	Sentences int
	Samples   int64
	Audio     time.Duration
	Wall      time.Duration
	// RTF is Wall / Audio: below 1 means faster than real time.
	RTF   float64
	Stats []*engine.Stats // one per sentence
}

// ErrNoText is returned for text with nothing to say.
var ErrNoText = errors.New("export: no text to render")

// Sentences is how Render cuts text: the window's rule.
func Sentences(text string) []string { return engine.SplitSentences(text) }

// Render runs the job. Cancelling ctx stops it; the target is then left as
// it was (a previous file of that name stays untouched).
func Render(ctx context.Context, job Job) (Result, error) {
	start := time.Now()
	sentences := Sentences(job.Request.Text)
	if job.Whole && len(sentences) > 0 {
		sentences = []string{job.Request.Text}
	}
	if len(sentences) == 0 {
		return Result{}, ErrNoText
	}
	if job.SampleRate <= 0 {
		return Result{}, fmt.Errorf("export: sample rate %d", job.SampleRate)
	}
	var f output = discard{}
	if job.Path != "" {
		af, err := atomicfile.Create(job.Path, 0o644)
		if err != nil {
			return Result{}, fmt.Errorf("export: %w", err)
		}
		f = af
	}
	newEnc := job.NewEncoder
	if newEnc == nil {
		newEnc = func(w io.Writer, rate int) (audioenc.Encoder, error) { return audioenc.New(w, job.Format, rate) }
	}
	enc, err := newEnc(f, job.SampleRate)
	if err != nil {
		f.Abort()
		return Result{}, fmt.Errorf("export: %w", err)
	}
	// An encoding error must stop the engine at once (a full disk does not
	// wait for the last frame): returning cancels it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &renderer{job: job, start: start, sentences: sentences, res: Result{Path: job.Path, Sentences: len(sentences)}}
	for _, s := range sentences {
		r.totalRunes += utf8.RuneCountInString(s)
	}
	err = r.run(ctx, enc)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		f.Abort()
		return Result{}, err
	}
	if err := f.Commit(); err != nil {
		return Result{}, fmt.Errorf("export: %w", err)
	}
	r.res.Wall = time.Since(start)
	r.res.Audio = samplesDuration(r.res.Samples, job.SampleRate)
	if r.res.Audio > 0 {
		r.res.RTF = r.res.Wall.Seconds() / r.res.Audio.Seconds()
	}
	return r.res, nil
}

// output is where the encoder writes: an atomic file, or nothing.
type output interface {
	io.Writer
	Commit() error
	Abort() error
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Commit() error               { return nil }
func (discard) Abort() error                { return nil }

type renderer struct {
	job        Job
	start      time.Time
	sentences  []string
	totalRunes int
	doneRunes  int
	curRunes   int   // runes of the sentence being rendered
	curSamples int64 // its samples so far
	res        Result
	lastReport time.Time
}

func (r *renderer) run(ctx context.Context, enc audioenc.Encoder) error {
	every := r.job.ProgressEvery
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	for i, s := range r.sentences {
		req := r.job.Request
		req.Text = s
		ch, err := r.job.Engine.Synthesize(ctx, req)
		if err != nil {
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		r.curRunes = utf8.RuneCountInString(s)
		if err := r.sentence(ctx, ch, enc, every); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		r.doneRunes += utf8.RuneCountInString(s)
		r.curRunes, r.curSamples = 0, 0
		r.report(i + 1)
	}
	return nil
}

// sentence encodes one sentence's chunks. On an error or cancel the rest of
// the engine's channel is drained in the background so its sender never
// blocks.
func (r *renderer) sentence(ctx context.Context, ch <-chan engine.Chunk, enc audioenc.Encoder, every time.Duration) (err error) {
	defer func() {
		if err != nil {
			go func() {
				for range ch {
				}
			}()
		}
	}()
	for {
		var c engine.Chunk
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok = <-ch:
		}
		if !ok {
			return errors.New("engine closed the stream without a final chunk")
		}
		if len(c.PCM) > 0 {
			if err := enc.Write(c.PCM); err != nil {
				return fmt.Errorf("encoding: %w", err)
			}
			r.res.Samples += int64(len(c.PCM))
			r.curSamples += int64(len(c.PCM))
			if r.job.OnChunk != nil {
				r.job.OnChunk(c)
			}
			if time.Since(r.lastReport) >= every {
				r.report(-1)
			}
		}
		if c.Stats != nil {
			r.res.Stats = append(r.res.Stats, c.Stats)
		}
		if c.Err != nil {
			return c.Err
		}
		if c.Final {
			return nil
		}
	}
}

// report sends a Progress; done < 0 keeps the sentence count. Inside a
// sentence the fraction advances by its audio against a guess of its length
// (speechRunesPerSecond), held below the sentence's end until it finishes.
func (r *renderer) report(done int) {
	if r.job.Progress == nil {
		return
	}
	if done < 0 {
		done = len(r.res.Stats)
	}
	r.lastReport = time.Now()
	frac := 1.0
	if r.totalRunes > 0 {
		part := 0.0
		if r.curRunes > 0 {
			expected := float64(r.curRunes) / speechRunesPerSecond
			got := float64(r.curSamples) / float64(r.job.SampleRate)
			part = min(0.9, got/expected) * float64(r.curRunes)
		}
		frac = (float64(r.doneRunes) + part) / float64(r.totalRunes)
	}
	r.job.Progress(Progress{Sentence: done, Sentences: len(r.sentences), Fraction: frac,
		Audio: samplesDuration(r.res.Samples, r.job.SampleRate), Elapsed: time.Since(r.start)})
}

// speechRunesPerSecond is a rough speaking rate for the progress bar only.
const speechRunesPerSecond = 14

func samplesDuration(n int64, rate int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}
