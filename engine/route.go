package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// lmRoute picks where an utterance's language model runs when the engine
// has a batch (Options.Streams > 1 on the GPU): the single-stream LM (the
// decode kernel, fastest for one utterance) or the batch.
//
// The single-stream LM takes an utterance only when it is the only one in
// flight and stays so for soloWait after it starts. Beside a batch the
// decode kernel, which holds every SM, slows the batch's steps and codec
// launches, and an utterance on it prefills alone instead of with the
// batch's admissions. On an H100 (0.6B, 125 frames each), 16 utterances
// started together ran at RTF 0.123-0.124 each with one of them on the
// decode kernel and 0.090-0.091 with all 16 in the batch (first chunk p95
// 63-77 -> 27 ms); 64: 0.285 -> 0.252 (186 -> 78-80 ms). A burst's requests
// arrive close together (each prepares its prompt first; waits of 1 and
// 2 ms gave the same figures), and a lone utterance pays soloWait on its
// first chunk and nothing after.
//
// soloWait is how long an utterance that starts alone waits for company
// before it takes the single-stream LM.
const soloWait = time.Millisecond

type lmRoute struct {
	single   sync.Mutex    // held by the utterance on the single-stream LM
	inflight atomic.Int32  // utterances started and not finished
	arrived  chan struct{} // an utterance started (capacity 1)
	soloWait time.Duration
}

// init readies a zero lmRoute (a zero one sends every utterance that finds
// the single-stream LM free there at once).
func (r *lmRoute) init(soloWait time.Duration) {
	r.arrived = make(chan struct{}, 1)
	r.soloWait = soloWait
}

// begin counts an utterance in flight; end when it has finished.
func (r *lmRoute) begin() {
	r.inflight.Add(1)
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

func (r *lmRoute) end() { r.inflight.Add(-1) }

// takeSingle reports whether a begun utterance runs on the single-stream LM,
// holding r.single if so (the caller unlocks it when the utterance ends).
func (r *lmRoute) takeSingle() bool {
	if r.inflight.Load() > 1 || !r.single.TryLock() {
		return false
	}
	t := time.NewTimer(r.soloWait)
	defer t.Stop()
	for r.inflight.Load() == 1 {
		select {
		case <-t.C:
			return true
		case <-r.arrived:
		}
	}
	r.single.Unlock()
	return false
}
