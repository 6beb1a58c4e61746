package cudacodec

import (
	"errors"
	"sync"
	"time"

	"talkbox/engine/backend"
)

// merger turns the pushes that streams make at the same time into shared
// launches: continuous batching at push boundaries, with no goroutine of its
// own. A push that finds no launch running leads: it runs a launch of every
// push waiting, the frames they all still need up to the shortest one's
// remainder (at most maxPushFrames), answers the pushes that are complete,
// and takes the pushes that arrived meanwhile into the next launch. Once its
// own push is answered it hands the lead to a push still waiting, so no
// stream decodes for others after its own frames are done.
//
// Before a launch the leader waits, up to gather, for a push from every
// stream that holds a slot (open). The batched LM hands all its streams
// their frames at once, but their pushes arrive one by one; launching the
// first alone cost a whole extra launch a frame (a 1-stream launch is a
// third of a 16-stream one). A lone stream's push (open 1) runs at once.
type merger struct {
	spf    int
	launch launchFunc
	gather time.Duration

	mu      sync.Mutex
	queue   []*pushReq // arrived, not yet in a launch
	pending []*pushReq // in launches, not complete (the leader's)
	open    int        // streams holding a slot
	leading bool
	stopped bool
	arrived chan struct{} // a push arrived or a stream left (the gathering leader's wake-up)

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

// gatherWait is the longest a launch waits for the pool's other streams'
// pushes. The pushes of one batched step arrive within tens of
// microseconds; a stream that holds a slot but is not decoding (between
// utterance stages) costs each launch this much.
const gatherWait = 300 * time.Microsecond

func newMerger(spf int, launch launchFunc, gather time.Duration) *merger {
	return &merger{spf: spf, launch: launch, gather: gather, arrived: make(chan struct{}, 1)}
}

// join and leave count the streams that hold a slot: the pushes a launch
// gathers for.
func (m *merger) join() {
	m.mu.Lock()
	m.open++
	m.mu.Unlock()
}

func (m *merger) leave() {
	m.mu.Lock()
	m.open--
	m.mu.Unlock()
	m.wake()
}

func (m *merger) wake() {
	select {
	case m.arrived <- struct{}{}:
	default:
	}
}

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
	if !lead {
		m.wake()
	}
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
		m.take()
		if own.next == len(own.frames) || len(m.pending) == 0 {
			if len(m.pending) > 0 {
				m.pending[0].lead <- struct{}{}
			} else {
				m.leading = false
			}
			m.mu.Unlock()
			return
		}
		if len(m.pending) < m.open && m.gather > 0 {
			m.mu.Unlock()
			m.awaitPushes()
			m.mu.Lock()
			m.take()
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

// take moves the pushes that arrived into the leader's pending ones (m.mu
// held). A slot has one push in flight at most, so len(m.pending) is the
// number of streams with frames to decode.
func (m *merger) take() {
	m.pending = append(m.pending, m.queue...)
	clear(m.queue)
	m.queue = m.queue[:0]
}

// awaitPushes returns once every open stream has a push in, or after
// m.gather.
func (m *merger) awaitPushes() {
	t := time.NewTimer(m.gather)
	defer t.Stop()
	for {
		select {
		case <-m.arrived:
			m.mu.Lock()
			all := len(m.pending)+len(m.queue) >= m.open
			m.mu.Unlock()
			if all {
				return
			}
		case <-t.C:
			return
		}
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
