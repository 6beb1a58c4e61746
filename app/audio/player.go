package audio

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	ring      *Ring
	forceNull bool

	devMu    sync.Mutex // guards the fields below: the device can be changed while playing
	out      *output
	fellBack error  // why the real device was not used; nil when it was
	chosen   string // the device asked for by name; "" = the system default
	// list and open reach the system's devices; tests replace them.
	list func() ([]Output, error)
	open func(dev *Output, fill func([]float32), forceNull bool) (*output, error, error)

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
	p := &Player{ring: ring, forceNull: o.ForceNull || NullRequested(), list: listOutputs, open: openOutput}
	out, fellBack, err := p.open(nil, ring.Fill, p.forceNull)
	if err != nil {
		return nil, err
	}
	p.out, p.fellBack = out, fellBack
	return p, nil
}

// NoDevice reports whether audio is being discarded (null backend).
func (p *Player) NoDevice() bool {
	p.devMu.Lock()
	defer p.devMu.Unlock()
	return p.fellBack != nil
}

// FallbackReason says why the real device was not used (nil when it was).
func (p *Player) FallbackReason() error {
	p.devMu.Lock()
	defer p.devMu.Unlock()
	return p.fellBack
}

// Backend names the backend in use ("default" or "null").
func (p *Player) Backend() string {
	p.devMu.Lock()
	defer p.devMu.Unlock()
	if p.out == nil {
		return "closed"
	}
	return p.out.backend
}

// Outputs lists the playback devices; none while audio is forced off
// (TALKBOX_AUDIO=null), since then no device is ever opened.
func (p *Player) Outputs() ([]Output, error) {
	if p.forceNull {
		return nil, nil
	}
	return p.list()
}

// Output is the device asked for by name ("" = the system default).
func (p *Player) Output() string {
	p.devMu.Lock()
	defer p.devMu.Unlock()
	return p.chosen
}

// UseOutput moves playback to the device called name ("" = the system
// default), also in the middle of an utterance: the buffered audio goes on
// from the next sample on the new device. A device the system does not
// list gives an error wrapping ErrNoOutput and changes nothing; one that
// is listed but fails to open leaves playback on the system default (or
// the null backend, as at Open) and returns why. It may block while the
// devices open, so call it off the UI goroutine.
func (p *Player) UseOutput(name string) error {
	var dev *Output
	if name != "" {
		list, err := p.Outputs()
		if err != nil {
			return err
		}
		o, err := FindOutput(list, name)
		if err != nil {
			return err
		}
		dev = &o
	}
	p.devMu.Lock()
	defer p.devMu.Unlock()
	if p.out == nil {
		return errors.New("audio: player closed")
	}
	// One consumer at a time: the old device stops before the new starts.
	closeErr := p.out.close()
	out, fellBack, err := p.open(dev, p.ring.Fill, p.forceNull)
	if err == nil && dev != nil && fellBack != nil {
		// The chosen device failed: back to the default, not straight to null.
		_ = out.close()
		out, fellBack, err = p.open(nil, p.ring.Fill, p.forceNull)
		if err == nil {
			err = fmt.Errorf("audio: %q could not be opened, playing on the system default", name)
		}
		p.out, p.fellBack, p.chosen = out, fellBack, ""
		if out == nil {
			p.out = &output{backend: "none"}
		}
		return errors.Join(err, closeErr)
	}
	if err != nil {
		p.out, p.chosen = &output{backend: "none"}, ""
		return errors.Join(err, closeErr)
	}
	p.out, p.fellBack, p.chosen = out, fellBack, name
	return closeErr
}

// Close stops the device. Call it after every Play has returned.
func (p *Player) Close() error {
	p.devMu.Lock()
	defer p.devMu.Unlock()
	var err error
	if p.out != nil {
		err = p.out.close()
		p.out = nil
	}
	p.ring.close()
	return err
}

// SetSpeed sets the playback speed (MinSpeed..MaxSpeed, pitch kept; only
// 1 in a build without libsonic); it applies within one device callback,
// also to audio already buffered. Safe from any goroutine.
func (p *Player) SetSpeed(speed float64) { p.ring.SetSpeed(speed) }

// Speed is the playback speed in effect.
func (p *Player) Speed() float64 { return p.ring.Speed() }

// SetVolume sets the volume factor (0..MaxVolume, 1 = as synthesised);
// it ramps to the new value within one device callback. Safe from any
// goroutine.
func (p *Player) SetVolume(v float64) { p.ring.SetVolume(v) }

// Volume is the volume factor in effect.
func (p *Player) Volume() float64 { return p.ring.Volume() }

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
	p.ring.End()
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

// drain waits until the device has had everything up to end (or a flush
// moved past it). A device that stops calling back would otherwise hang
// the caller, so it gives up when the consumer has taken nothing for two
// seconds while not paused (at half speed a second of buffered audio takes
// two to play, so the wait is judged by progress, not by the amount left).
func (p *Player) drain(ctx context.Context, end uint64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	const stuck = 2 * time.Second
	deadline := time.Now().Add(stuck)
	last := p.ring.r.Load()
	for p.ring.Playing(end) {
		if r := p.ring.r.Load(); r != last || p.ring.Paused() {
			// Progress, or a pause (which may last any time): not stuck.
			last = r
			deadline = time.Now().Add(stuck)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("audio: %s backend stopped playing with %v of audio left", p.Backend(), samplesToDuration(end-min(end, p.ring.r.Load())))
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
	Tag       uint64 // PlayOptions.Tag of the Play these figures belong to
	Utterance uint64
	Playing   bool          // a Play is running
	Held      bool          // prebuffering: playback not started yet
	Paused    bool          // Pause is in effect
	Buffered  time.Duration // audio in the ring, as long as it will take to play
	Played    time.Duration
	// Position is how far playback is into the stream as written, which
	// differs from Played at another speed: what a reader follows.
	Position   time.Duration
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
		// In playing time: at speed 2 a second of synthesised audio lasts half.
		Buffered: samplesToDuration(uint64(float64(p.ring.Buffered()) / p.ring.Speed())),
	}
	if s := p.ring.Stats(); s.Utterance == utt {
		l.Played = samplesToDuration(s.Played)
		l.Position = samplesToDuration(s.Consumed)
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
	p.devMu.Lock()
	defer p.devMu.Unlock()
	if p.out == nil {
		return "closed player"
	}
	if p.fellBack != nil {
		return fmt.Sprintf("%s backend (%v)", p.out.backend, p.fellBack)
	}
	return p.out.backend + " backend"
}
