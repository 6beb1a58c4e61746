package audio

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"talkbox/engine"
)

// ringSamples sizes the ring: a power of two of about 11 s at 24 kHz, room
// for the longest prebuffer plus a sentence synthesised ahead.
const ringSamples = 1 << 18

// maxPrebuffer caps how much audio is held back before playback starts.
const maxPrebuffer = 5 * time.Second

// ErrBusy is returned when Play is called while another Play runs: the ring
// has a single producer.
var ErrBusy = errors.New("audio: a stream is already playing")

// Options open a Player.
type Options struct {
	// ForceNull skips the real device and uses the null backend
	// (also forced by TALKBOX_AUDIO=null).
	ForceNull bool
}

// Player owns the device and the ring; Play is the ring's only producer.
type Player struct {
	ring     *Ring
	out      *output
	fellBack error // why the real device was not used; nil when it was

	busy      atomic.Bool
	utterance atomic.Uint64 // utterance number of the running (or last) Play
	tag       atomic.Uint64 // PlayOptions.Tag of that Play
	released  atomic.Bool   // the prebuffer hold of the current utterance is over
}

// Open starts the playback device at 24 kHz mono f32, falling back to the
// null backend when no device opens.
func Open(o Options) (*Player, error) {
	ring, err := NewRing(ringSamples)
	if err != nil {
		return nil, err
	}
	p := &Player{ring: ring}
	out, fellBack, err := openOutput(ring.Fill, o.ForceNull || NullRequested())
	if err != nil {
		return nil, err
	}
	p.out, p.fellBack = out, fellBack
	return p, nil
}

// NoDevice reports whether audio is being discarded (null backend).
func (p *Player) NoDevice() bool { return p.fellBack != nil }

// FallbackReason says why the real device was not used (nil when it was).
func (p *Player) FallbackReason() error { return p.fellBack }

// Backend names the backend in use ("default" or "null").
func (p *Player) Backend() string { return p.out.backend }

// Close stops the device. Call it after every Play has returned.
func (p *Player) Close() error { return p.out.close() }

// Stop silences the current utterance at once: the consumer drops the
// buffered audio on its next callback, and a pause ends. Cancel Play's
// context as well so the producer stops writing. Safe from any goroutine.
func (p *Player) Stop() {
	p.ring.Flush()
	p.ring.SetPaused(false)
}

// Pause holds playback where it is: the device gets silence and the
// buffered audio waits, sample for sample, until Resume. Synthesis goes on
// filling the ring meanwhile. Safe from any goroutine.
func (p *Player) Pause() { p.ring.SetPaused(true) }

// Resume continues a paused playback with the next unplayed sample.
func (p *Player) Resume() { p.ring.SetPaused(false) }

// Paused reports whether playback is paused.
func (p *Player) Paused() bool { return p.ring.Paused() }

// PlayOptions steer the prebuffer policy.
type PlayOptions struct {
	// RTF is the recent real-time factor (synthesis time / audio time); <= 0
	// when unknown. Below 0.9 playback starts with the first chunk.
	RTF float64
	// ExpectedSeconds estimates the utterance's audio length, used to size
	// the prebuffer when RTF >= 0.9.
	ExpectedSeconds float64
	// Tag is echoed by Live so a caller can tell its own figures from a
	// previous Play's.
	Tag uint64
}

// Prebuffer is how much audio to hold back before starting playback so a
// stream produced at rtf × real time plays without gaps: (rtf−1) of the
// expected duration plus a margin, capped. Zero when synthesis is well ahead
// of real time.
func Prebuffer(o PlayOptions) time.Duration {
	if o.RTF < 0.9 {
		return 0
	}
	d := time.Duration(((o.RTF-1)*o.ExpectedSeconds + 0.2) * float64(time.Second))
	if d > maxPrebuffer {
		d = maxPrebuffer
	}
	if d < 200*time.Millisecond {
		d = 200 * time.Millisecond
	}
	return d
}

// Result summarises one Play.
type Result struct {
	Played     time.Duration // real audio handed to the device
	Underruns  uint64
	Silent     time.Duration // silence inside the stream
	FirstSound int64         // Now() clock of the first audible callback; 0 = none
	Prebuffer  time.Duration // audio held back before starting
}

// Play feeds chunks into the ring until the channel closes, a Final chunk
// arrives or ctx is cancelled, then waits until the device has played what
// was written. A new Play drops whatever the previous one left. A chunk's
// Err is returned after the audio before it has played; cancellation
// flushes at once and returns ctx.Err().
func (p *Player) Play(ctx context.Context, chunks <-chan engine.Chunk, o PlayOptions) (Result, error) {
	if !p.busy.CompareAndSwap(false, true) {
		return Result{}, ErrBusy
	}
	defer p.busy.Store(false)

	utt := p.ring.Begin()
	p.ring.SetPaused(false) // a new utterance always plays
	p.utterance.Store(utt)
	p.tag.Store(o.Tag) // after utterance: Live reads tag first, so a new tag implies the new utterance
	p.released.Store(false)
	hold := Prebuffer(o)
	need := int(hold.Seconds() * SampleRate)
	release := func() {
		if !p.released.Load() {
			p.ring.Release(utt)
			p.released.Store(true)
		}
	}

	var streamErr error
loop:
	for {
		select {
		case <-ctx.Done():
			p.ring.Flush()
			return p.result(utt, hold), ctx.Err()
		case c, ok := <-chunks:
			if !ok {
				break loop
			}
			if err := p.write(ctx, c.PCM, release); err != nil {
				p.ring.Flush()
				return p.result(utt, hold), err
			}
			if p.ring.Buffered() >= need {
				release()
			}
			if c.Err != nil {
				streamErr = c.Err
				break loop
			}
			if c.Final {
				break loop
			}
		}
	}
	release() // end of stream: play what is held, however little
	end := p.ring.Written()
	if err := p.drain(ctx, end); err != nil {
		p.ring.Flush()
		return p.result(utt, hold), err
	}
	return p.result(utt, hold), streamErr
}

// write copies pcm into the ring, waiting briefly whenever it is full;
// audio is never dropped. A full ring releases a held utterance, since
// waiting longer could not start it.
func (p *Player) write(ctx context.Context, pcm []float32, release func()) error {
	for len(pcm) > 0 {
		n := p.ring.Write(pcm)
		pcm = pcm[n:]
		if len(pcm) == 0 {
			return nil
		}
		release()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// drain waits until the consumer has read up to end (or a flush moved it
// past). A device that stops calling back would otherwise hang the caller,
// so it gives up two seconds after the buffered audio should have played.
func (p *Player) drain(ctx context.Context, end uint64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	left := samplesToDuration(end - min(end, p.ring.r.Load()))
	deadline := time.Now().Add(left + 2*time.Second)
	for p.ring.r.Load() < end {
		if p.ring.Paused() {
			// A pause may last any time; the device is not stuck.
			deadline = time.Now().Add(samplesToDuration(end-min(end, p.ring.r.Load())) + 2*time.Second)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("audio: %s backend stopped playing with %v of audio left", p.out.backend, samplesToDuration(end-p.ring.r.Load()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func (p *Player) result(utt uint64, hold time.Duration) Result {
	s := p.ring.Stats()
	if s.Utterance != utt {
		return Result{Prebuffer: hold}
	}
	return Result{
		Played:     samplesToDuration(s.Played),
		Underruns:  s.Underruns,
		Silent:     samplesToDuration(s.Silent),
		FirstSound: s.FirstSound,
		Prebuffer:  hold,
	}
}

// Live is a snapshot for the latency panel, cheap enough for a 10 Hz ticker.
type Live struct {
	Tag        uint64 // PlayOptions.Tag of the Play these figures belong to
	Utterance  uint64
	Playing    bool          // a Play is running
	Held       bool          // prebuffering: playback not started yet
	Paused     bool          // Pause is in effect
	Buffered   time.Duration // audio in the ring
	Played     time.Duration
	Underruns  uint64
	Silent     time.Duration
	FirstSound int64 // Now() clock; 0 = none yet
}

// Live reads the current utterance's figures from atomics.
func (p *Player) Live() Live {
	tag := p.tag.Load()
	utt := p.utterance.Load()
	l := Live{
		Tag:       tag,
		Utterance: utt,
		Playing:   p.busy.Load(),
		Held:      p.busy.Load() && !p.released.Load(),
		Paused:    p.ring.Paused(),
		Buffered:  samplesToDuration(uint64(p.ring.Buffered())),
	}
	if s := p.ring.Stats(); s.Utterance == utt {
		l.Played = samplesToDuration(s.Played)
		l.Underruns = s.Underruns
		l.Silent = samplesToDuration(s.Silent)
		l.FirstSound = s.FirstSound
	}
	return l
}

func samplesToDuration(n uint64) time.Duration {
	return time.Duration(float64(n) / SampleRate * float64(time.Second))
}

// String describes the output for logs.
func (p *Player) String() string {
	if p.fellBack != nil {
		return fmt.Sprintf("%s backend (%v)", p.out.backend, p.fellBack)
	}
	return p.out.backend + " backend"
}
