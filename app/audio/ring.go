// Package audio plays PCM chunks from the engine through a malgo device.
//
// One bridge goroutine (Player.Play) receives chunks and writes them into a
// lock-free single-producer single-consumer ring; the device callback is the
// only consumer. Control (flush, new utterance, playback gate) travels from
// the producer side to the consumer through atomics only, so the real-time
// callback never takes a lock or allocates.
package audio

import (
	"fmt"
	"sync/atomic"
	"time"
)

// control is an immutable snapshot published by the producer side and read
// once per callback. A pointer swap keeps the fields consistent with each
// other without a lock on the real-time thread.
type control struct {
	utterance uint64 // bumps on Begin; the consumer resets its per-utterance counters
	flushTo   uint64 // the consumer moves its read counter up to this value
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

	// Consumer-private state: only Fill touches these.
	seenUtterance  uint64
	started        bool
	pendingCount   uint64 // padded callbacks not yet known to be a gap inside the stream
	pendingSilence uint64

	// Consumer-published per-utterance figures.
	statsUtterance atomic.Uint64 // utterance the figures below belong to
	played         atomic.Uint64 // real samples handed to the device
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
	rg := &Ring{buf: make([]float32, n), mask: uint64(n - 1), clock: monotonicNanos}
	rg.ctl.Store(&control{})
	return rg, nil
}

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
		if w := rg.w.Load(); w > c.flushTo {
			c.flushTo = w
		}
		return c
	})
	return c.utterance
}

// Release lets the consumer play the given utterance (end of prebuffering).
func (rg *Ring) Release(utterance uint64) { rg.gate.Store(utterance) }

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
	if c.utterance != rg.seenUtterance {
		rg.seenUtterance = c.utterance
		rg.started = false
		rg.pendingCount, rg.pendingSilence = 0, 0
		rg.played.Store(0)
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
	}
	if rg.paused.Load() {
		// A pause is not a gap in the stream: nothing is counted.
		clear(out)
		return
	}
	n := 0
	if rg.gate.Load() == c.utterance {
		avail := rg.w.Load() - r
		want := uint64(len(out))
		if avail < want {
			want = avail
		}
		for i := uint64(0); i < want; {
			idx := (r + i) & rg.mask
			k := copy(out[i:want], rg.buf[idx:])
			i += uint64(k)
		}
		n = int(want)
		rg.r.Store(r + want) // publish after the copy
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
	if n < len(out) {
		clear(out[n:])
		if rg.started {
			rg.pendingCount++
			rg.pendingSilence += uint64(len(out) - n)
		}
	}
}

// RingStats are the consumer's figures for the current utterance.
type RingStats struct {
	Utterance  uint64
	Played     uint64 // real samples handed to the device
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
		Underruns:  rg.underruns.Load(),
		Silent:     rg.silent.Load(),
		FirstSound: rg.firstSound.Load(),
	}
}

// Now is the clock the ring stamps FirstSound with (monotonic nanoseconds).
func Now() int64 { return monotonicNanos() }
