// Package audio plays PCM chunks from the engine through a malgo device.
//
// One bridge goroutine (Player.Play) receives chunks and writes them into a
// lock-free single-producer single-consumer ring; the device callback is the
// only consumer. Control (flush, new utterance, playback gate, speed,
// volume) travels from the producer side to the consumer through atomics
// only, so the real-time callback never takes a lock or allocates Go memory.
//
// The ring holds the audio as synthesised. Speed (a pitch-keeping
// time-stretch, engine/tempo) and volume are applied by the consumer as it
// reads, so a change is heard within one callback rather than after the
// seconds of audio buffered ahead.
package audio

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"talkbox/app/settings"
	"talkbox/engine/tempo"
)

// Speed and volume bounds of the player: speech at half to twice its
// speed, and up to 150% volume (samples past full scale are clipped). The
// settings file keeps values in the same bounds, so they are defined there.
const (
	MinSpeed  = settings.MinSpeed
	MaxSpeed  = settings.MaxSpeed
	MaxVolume = settings.MaxVolume / 100.0
)

// stretchBlock is how much input the consumer hands the time-stretch at a
// time: small, so the input it holds back stays a few pitch periods.
const stretchBlock = 256

// control is an immutable snapshot published by the producer side and read
// once per callback. A pointer swap keeps the fields consistent with each
// other without a lock on the real-time thread.
type control struct {
	utterance uint64 // bumps on Begin; the consumer resets its per-utterance counters
	flushTo   uint64 // the consumer moves its read counter up to this value
	ended     bool   // the utterance's stream is complete: it ends at end
	end       uint64
}

// Ring is a single-producer single-consumer float32 ring buffer.
//
// Read and write positions are monotonic 64-bit counters (index = counter &
// mask), each published only after the copy it covers. Only the consumer
// moves the read side, also when flushing.
type Ring struct {
	buf  []float32
	mask uint64

	w atomic.Uint64 // samples written (producer)
	r atomic.Uint64 // samples consumed (consumer)

	ctl  atomic.Pointer[control]
	gate atomic.Uint64 // utterance allowed to play (prebuffer hold until it equals ctl.utterance)

	// paused makes Fill output silence without consuming: the read counter
	// stays where it is, so resuming continues with the very next sample.
	paused atomic.Bool

	speed atomic.Uint64 // float64 bits of the playback speed (1 = as synthesised)
	gain  atomic.Uint64 // float64 bits of the volume factor (1 = as synthesised)
	// tail is set while the time-stretch holds audio of this utterance that
	// has left the ring but not reached the device yet.
	tail atomic.Bool

	// Consumer-private state: only Fill touches these.
	seenUtterance  uint64
	started        bool
	pendingCount   uint64 // padded callbacks not yet known to be a gap inside the stream
	pendingSilence uint64
	st             *tempo.Stretcher
	stretching     bool    // audio goes through st (speed is, or was until st drained, not 1)
	tailDone       bool    // st.End was called for the end of this utterance
	curGain        float32 // the volume the last callback ended at
	base           uint64  // read counter at the current utterance's first sample

	// Consumer-published per-utterance figures.
	statsUtterance atomic.Uint64 // utterance the figures below belong to
	played         atomic.Uint64 // real samples handed to the device
	consumed       atomic.Uint64 // samples of the stream read from the ring (the time-stretch's input)
	underruns      atomic.Uint64 // padded callbacks inside the stream
	silent         atomic.Uint64 // silent samples inside the stream
	firstSound     atomic.Int64  // clock() of the first callback that copied real samples; 0 = none yet

	clock func() int64 // monotonic nanoseconds; replaceable in tests
}

// NewRing makes a ring holding at least capacity samples (rounded up to a
// power of two).
func NewRing(capacity int) (*Ring, error) {
	if capacity <= 0 || capacity > 1<<30 {
		return nil, fmt.Errorf("audio: ring capacity %d out of range (1..2^30)", capacity)
	}
	n := 1
	for n < capacity {
		n <<= 1
	}
	st, err := tempo.New(SampleRate, 1)
	if err != nil {
		return nil, err
	}
	rg := &Ring{buf: make([]float32, n), mask: uint64(n - 1), clock: monotonicNanos, st: st, curGain: 1}
	rg.ctl.Store(&control{})
	rg.speed.Store(math.Float64bits(1))
	rg.gain.Store(math.Float64bits(1))
	return rg, nil
}

// close frees the time-stretch; call it once no callback can run.
func (rg *Ring) close() { rg.st.Close() }

// SetSpeed sets the playback speed, clamped to what the time-stretch of
// this build allows within [MinSpeed, MaxSpeed]; safe from any goroutine.
// It takes effect on the next callback, also for audio already buffered.
func (rg *Ring) SetSpeed(speed float64) {
	lo, hi := max(MinSpeed, tempo.MinSpeed), min(MaxSpeed, tempo.MaxSpeed)
	if math.IsNaN(speed) {
		speed = 1
	}
	rg.speed.Store(math.Float64bits(min(max(speed, lo), hi)))
}

// SpeedSupported reports whether this build changes speed (libsonic is
// there; -tags nosonic plays at speed 1 only).
func SpeedSupported() bool { return tempo.MaxSpeed >= MaxSpeed && tempo.MinSpeed <= MinSpeed }

// Speed is the playback speed in effect.
func (rg *Ring) Speed() float64 { return math.Float64frombits(rg.speed.Load()) }

// SetVolume sets the volume factor (0 silent, 1 as synthesised, at most
// MaxVolume); safe from any goroutine. The next callback ramps to it.
func (rg *Ring) SetVolume(v float64) {
	if math.IsNaN(v) {
		v = 1
	}
	rg.gain.Store(math.Float64bits(min(max(v, 0), MaxVolume)))
}

// Volume is the volume factor in effect.
func (rg *Ring) Volume() float64 { return math.Float64frombits(rg.gain.Load()) }

var clockBase = time.Now()

// monotonicNanos is nanoseconds on the monotonic clock since process start;
// never 0 after the first instant, so 0 can mean "not yet".
func monotonicNanos() int64 { return int64(time.Since(clockBase)) + 1 }

// Cap is the ring's capacity in samples.
func (rg *Ring) Cap() int { return len(rg.buf) }

// Buffered is the number of samples written but not yet consumed, not
// counting what a pending flush will drop.
func (rg *Ring) Buffered() int {
	r := max(rg.r.Load(), rg.ctl.Load().flushTo)
	w := rg.w.Load()
	if w < r {
		return 0
	}
	return int(w - r)
}

// Written is the producer's monotonic write counter.
func (rg *Ring) Written() uint64 { return rg.w.Load() }

// Write copies as many samples as fit and returns how many it copied.
// Producer only.
func (rg *Ring) Write(p []float32) int {
	w := rg.w.Load()
	free := uint64(len(rg.buf)) - (w - rg.r.Load())
	n := uint64(len(p))
	if n > free {
		n = free
	}
	for i := uint64(0); i < n; {
		idx := (w + i) & rg.mask
		k := copy(rg.buf[idx:], p[i:n])
		i += uint64(k)
	}
	rg.w.Store(w + n) // publish after the copy
	return int(n)
}

// update swaps in a new control value derived from the current one; safe
// from any goroutine (Stop on the UI side and the bridge may both flush).
func (rg *Ring) update(f func(c control) control) control {
	for {
		old := rg.ctl.Load()
		nc := f(*old)
		if rg.ctl.CompareAndSwap(old, &nc) {
			return nc
		}
	}
}

// Begin drops whatever is buffered and starts a new utterance: the consumer
// resets the per-utterance figures, and playback is held until Release.
// It returns the new utterance number.
func (rg *Ring) Begin() uint64 {
	c := rg.update(func(c control) control {
		c.utterance++
		c.ended = false
		if w := rg.w.Load(); w > c.flushTo {
			c.flushTo = w
		}
		return c
	})
	return c.utterance
}

// Release lets the consumer play the given utterance (end of prebuffering).
func (rg *Ring) Release(utterance uint64) { rg.gate.Store(utterance) }

// End marks the current utterance's stream complete at what has been
// written: the consumer then lets the time-stretch give out the last few
// pitch periods it holds back. Producer only.
func (rg *Ring) End() {
	rg.update(func(c control) control {
		c.ended, c.end = true, rg.w.Load()
		return c
	})
}

// Playing reports whether audio up to end has not all reached the device:
// the read counter is short of it, or the time-stretch still holds some.
func (rg *Ring) Playing(end uint64) bool {
	// tail is read first: the consumer raises it before it moves the read
	// counter, so a read counter at end with tail down means all is out.
	tail := rg.tail.Load()
	return rg.r.Load() < end || tail
}

// Flush drops everything written so far; the consumer applies it on its next
// callback. Safe from any goroutine.
func (rg *Ring) Flush() {
	rg.update(func(c control) control {
		if w := rg.w.Load(); w > c.flushTo {
			c.flushTo = w
		}
		return c
	})
}

// SetPaused pauses or resumes the consumer; safe from any goroutine. While
// paused, callbacks are silent, consume nothing and count no underruns.
func (rg *Ring) SetPaused(on bool) { rg.paused.Store(on) }

// Paused reports whether the consumer is paused.
func (rg *Ring) Paused() bool { return rg.paused.Load() }

// Fill is the consumer: it copies buffered samples into out, pads the rest
// with silence and keeps the per-utterance figures. It never allocates,
// blocks or logs, so the device callback can call it.
//
// A padded callback counts as an underrun only once real samples follow it
// in the same utterance: silence after the first sample and before the end
// of the stream. Padding at the end (or after Stop) is never counted.
func (rg *Ring) Fill(out []float32) {
	c := rg.ctl.Load()
	fresh := false
	if c.utterance != rg.seenUtterance {
		fresh = true
		rg.seenUtterance = c.utterance
		rg.started = false
		rg.pendingCount, rg.pendingSilence = 0, 0
		rg.base = max(c.flushTo, rg.r.Load())
		rg.played.Store(0)
		rg.consumed.Store(0)
		rg.underruns.Store(0)
		rg.silent.Store(0)
		rg.firstSound.Store(0)
		rg.statsUtterance.Store(c.utterance)
	}
	r := rg.r.Load()
	if r < c.flushTo {
		r = c.flushTo
		rg.r.Store(r)
		// Audio dropped by a flush ends the current stretch: silence before
		// it is not a gap between two played samples.
		rg.pendingCount, rg.pendingSilence = 0, 0
		fresh = true
	}
	if fresh && (rg.stretching || rg.tailDone) {
		// What the time-stretch holds belongs to the dropped audio.
		_ = rg.st.Discard() // on failure it keeps a few ms of old audio, nothing worse
		rg.stretching, rg.tailDone = false, false
		rg.tail.Store(false)
	}
	if rg.paused.Load() {
		// A pause is not a gap in the stream: nothing is counted.
		clear(out)
		return
	}
	n := 0
	if rg.gate.Load() == c.utterance {
		speed := rg.Speed()
		if rg.stretching || speed != 1 {
			n = rg.fillStretched(out, &r, c, speed)
		}
		if !rg.stretching && n < len(out) {
			n += rg.copyOut(out[n:], &r)
		}
	}
	if n > 0 {
		if !rg.started {
			rg.started = true
			rg.firstSound.Store(rg.clock())
		}
		if rg.pendingCount > 0 {
			rg.underruns.Add(rg.pendingCount)
			rg.silent.Add(rg.pendingSilence)
			rg.pendingCount, rg.pendingSilence = 0, 0
		}
		rg.played.Add(uint64(n))
	}
	if r > rg.base {
		rg.consumed.Store(r - rg.base)
	}
	if n < len(out) {
		clear(out[n:])
		if rg.started {
			rg.pendingCount++
			rg.pendingSilence += uint64(len(out) - n)
		}
	}
	rg.applyGain(out)
}

// copyOut copies buffered samples as they are and moves the read counter.
func (rg *Ring) copyOut(out []float32, r *uint64) int {
	want := min(rg.w.Load()-*r, uint64(len(out)))
	for i := uint64(0); i < want; {
		idx := (*r + i) & rg.mask
		k := copy(out[i:want], rg.buf[idx:])
		i += uint64(k)
	}
	*r += want
	rg.r.Store(*r) // publish after the copy
	return int(want)
}

// fillStretched fills out through the time-stretch, feeding it from the
// ring a block at a time, and returns how many samples it wrote. Back at
// speed 1 it only empties the stretch and then hands over to copyOut
// (stretching false), so the audio continues sample for sample.
func (rg *Ring) fillStretched(out []float32, r *uint64, c *control, speed float64) int {
	// Raised before the read counter moves; see Playing.
	rg.tail.Store(true)
	rg.stretching = true
	if speed != rg.st.Speed() {
		if speed == 1 {
			// The input held back comes out at the speed it was taken at.
			_ = rg.st.End()
		}
		_ = rg.st.SetSpeed(speed) // in range: SetSpeed clamps to tempo's bounds
	}
	n := rg.st.ReadInto(out)
	if speed == 1 {
		if rg.st.Available() == 0 {
			rg.stretching = false
			rg.tail.Store(false)
		}
		return n
	}
	for n < len(out) {
		avail := rg.w.Load() - *r
		if avail == 0 {
			if !c.ended || *r < c.end || rg.tailDone {
				break // an underrun, or all given out
			}
			_ = rg.st.End()
			rg.tailDone = true
			n += rg.st.ReadInto(out[n:])
			continue
		}
		idx := *r & rg.mask
		k := min(avail, stretchBlock, uint64(len(rg.buf))-idx)
		if rg.st.Write(rg.buf[idx:idx+k]) != nil {
			break // out of memory in the C library: play what there is
		}
		*r += k
		rg.r.Store(*r)
		n += rg.st.ReadInto(out[n:])
	}
	rg.tail.Store(!rg.tailDone || rg.st.Available() > 0)
	return n
}

// applyGain scales out by the volume, ramping from the previous callback's
// volume to the new one across the buffer (no click), and clips to full
// scale. At volume 1 the samples pass untouched.
func (rg *Ring) applyGain(out []float32) {
	to := float32(math.Float64frombits(rg.gain.Load()))
	from := rg.curGain
	if from == 1 && to == 1 {
		return
	}
	rg.curGain = to
	step := (to - from) / float32(len(out))
	for i, v := range out {
		g := to
		if i < len(out)-1 {
			g = from + step*float32(i+1)
		}
		out[i] = min(max(v*g, -1), 1)
	}
}

// RingStats are the consumer's figures for the current utterance.
type RingStats struct {
	Utterance  uint64
	Played     uint64 // real samples handed to the device
	Consumed   uint64 // samples of the stream read so far: Played in the stream's own time, whatever the speed
	Underruns  uint64
	Silent     uint64 // silent samples inside the stream
	FirstSound int64  // monotonic ns (see Now); 0 = nothing played yet
}

// Stats reads the consumer's figures; they belong to Utterance, which lags a
// Begin by at most one callback.
func (rg *Ring) Stats() RingStats {
	return RingStats{
		Utterance:  rg.statsUtterance.Load(),
		Played:     rg.played.Load(),
		Consumed:   rg.consumed.Load(),
		Underruns:  rg.underruns.Load(),
		Silent:     rg.silent.Load(),
		FirstSound: rg.firstSound.Load(),
	}
}

// Now is the clock the ring stamps FirstSound with (monotonic nanoseconds).
func Now() int64 { return monotonicNanos() }
