package cudacodec

import (
	"errors"
	"sync"

	"talkbox/engine/backend"
)

// merger turns the pushes that streams make at the same time into shared
// launches: continuous batching at push boundaries, with no goroutine of its
// own. A push that finds no launch running leads: it runs a launch of every
// push waiting, the frames they all still need up to the shortest one's
// remainder (at most maxPushFrames), answers the pushes that are complete,
// and takes the pushes that arrived meanwhile into the next launch. Once its
// own push is answered it hands the lead to a push still waiting, so no
// stream decodes for others after its own frames are done. A lone push thus
// runs at once on its own goroutine, as it would without a merger.
type merger struct {
	spf    int
	launch launchFunc

	mu      sync.Mutex
	queue   []*pushReq // arrived, not yet in a launch
	pending []*pushReq // in launches, not complete (the leader's)
	leading bool
	stopped bool

	// The leader's buffers, reused.
	slots []int32
	codes []backend.Codes
	out   []float32
}

// launchFunc decodes T frames for each of len(slots) streams: codes [n][T],
// out [n][T·spf].
type launchFunc func(slots []int32, codes []backend.Codes, T int, out []float32) error

type pushReq struct {
	slot   int
	frames []backend.Codes
	out    []float32
	next   int           // frames decoded so far
	done   chan error    // the push's result
	lead   chan struct{} // this push's goroutine is to lead
}

var errStopped = errors.New("cudacodec: pool closed")

func newMerger(spf int, launch launchFunc) *merger { return &merger{spf: spf, launch: launch} }

// push decodes frames for slot into out and waits for the result. A slot
// has at most one push in flight (its stream serialises them).
func (m *merger) push(slot int, frames []backend.Codes, out []float32) error {
	r := &pushReq{slot: slot, frames: frames, out: out, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return errStopped
	}
	m.queue = append(m.queue, r)
	lead := !m.leading
	m.leading = true
	m.mu.Unlock()
	for !lead {
		select {
		case err := <-r.done:
			return err
		case <-r.lead:
			lead = true
		}
	}
	m.lead(r)
	return <-r.done
}

// stop makes later pushes fail; the pool has no stream left when it stops.
func (m *merger) stop() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
}

// lead runs launches until own is answered, then passes the lead on (or
// drops it when nothing waits).
func (m *merger) lead(own *pushReq) {
	for {
		m.mu.Lock()
		m.pending = append(m.pending, m.queue...)
		clear(m.queue)
		m.queue = m.queue[:0]
		if own.next == len(own.frames) || len(m.pending) == 0 {
			if len(m.pending) > 0 {
				m.pending[0].lead <- struct{}{}
			} else {
				m.leading = false
			}
			m.mu.Unlock()
			return
		}
		pending := m.pending
		m.mu.Unlock()
		m.runOnce(pending)
		m.mu.Lock()
		kept := m.pending[:0]
		for _, r := range m.pending {
			if r.next < len(r.frames) {
				kept = append(kept, r)
			}
		}
		clear(m.pending[len(kept):])
		m.pending = kept
		m.mu.Unlock()
	}
}

// runOnce makes one launch for the pushes in pending (the leader's alone
// touches them) and answers those it completes or that fail.
func (m *merger) runOnce(pending []*pushReq) {
	T := maxPushFrames
	for _, r := range pending {
		T = min(T, len(r.frames)-r.next)
	}
	m.slots, m.codes = m.slots[:0], m.codes[:0]
	for _, r := range pending {
		m.slots = append(m.slots, int32(r.slot))
		m.codes = append(m.codes, r.frames[r.next:r.next+T]...)
	}
	n := len(pending) * T * m.spf
	if cap(m.out) < n {
		m.out = make([]float32, n)
	}
	m.out = m.out[:n]
	err := m.launch(m.slots, m.codes, T, m.out)
	for i, r := range pending {
		if err != nil {
			r.next = len(r.frames) // answered: it leaves the pending pushes
			r.done <- err
			continue
		}
		copy(r.out[r.next*m.spf:], m.out[i*T*m.spf:(i+1)*T*m.spf])
		if r.next += T; r.next == len(r.frames) {
			r.done <- nil
		}
	}
}
