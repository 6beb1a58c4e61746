package hub

import (
	"time"
)

// Event says what a Progress report is about.
type Event int

const (
	EventListing     Event = iota // asking the Hub for the file list
	EventFileStart                // a download begins; FileDone > 0 when it resumes a .part
	EventBytes                    // bytes arrived (reports are at most ~10 per second)
	EventVerifying                // hashing a file already on disk
	EventFileDone                 // a file was downloaded, verified and moved into place
	EventFileSkipped              // a file was already complete
	EventRetry                    // a transient failure; Note says what and when it resumes
	EventDone                     // every file is complete
)

// Progress is one report from Pull. Byte counts cover the whole pull: Done
// includes files that were already on disk, Downloaded only what came over
// the network in this pull.
type Progress struct {
	Event     Event
	Repo      string
	File      string // repo-relative path of the current file ("" while listing)
	FileIndex int    // 1-based position of File among FileCount files
	FileCount int
	FileDone  int64 // bytes of File present so far
	FileSize  int64
	Done      int64 // bytes present over all files
	Total     int64 // bytes of all files
	// Downloaded counts bytes received in this pull; Rate is its recent speed
	// in bytes per second (0 until a few reports have arrived).
	Downloaded int64
	Rate       float64
	ETA        time.Duration // time left at Rate; -1 when unknown
	Note       string        // EventRetry: the reason
}

// Fraction is Done/Total in [0,1].
func (p Progress) Fraction() float64 {
	if p.Total <= 0 {
		return 0
	}
	return min(1, float64(p.Done)/float64(p.Total))
}

// reportInterval spaces EventBytes reports; the UI and terminal do not
// redraw faster than this anyway.
const reportInterval = 100 * time.Millisecond

// reporter keeps the running Progress and forwards it, rate-limited for
// EventBytes, to the caller's callback.
type reporter struct {
	fn       func(Progress)
	p        Progress
	meter    rateMeter
	lastSent time.Time
	now      func() time.Time
}

func newReporter(fn func(Progress), repo string) *reporter {
	return &reporter{fn: fn, p: Progress{Repo: repo, ETA: -1}, now: time.Now}
}

// send stamps rate and ETA and calls the callback.
func (r *reporter) send(e Event) {
	if r.fn == nil {
		return
	}
	t := r.now()
	r.p.Event = e
	r.p.Rate = r.meter.rate()
	r.p.ETA = -1
	if r.p.Rate > 0 {
		r.p.ETA = time.Duration(float64(r.p.Total-r.p.Done) / r.p.Rate * float64(time.Second))
	}
	r.lastSent = t
	r.fn(r.p)
	r.p.Note = ""
}

// received accounts for n new bytes of the current file.
func (r *reporter) received(n int64) {
	r.p.FileDone += n
	r.p.Done += n
	r.p.Downloaded += n
	t := r.now()
	r.meter.add(t, r.p.Downloaded)
	if t.Sub(r.lastSent) >= reportInterval {
		r.send(EventBytes)
	}
}

// present accounts for n bytes found on disk (a resumed .part).
func (r *reporter) present(n int64) {
	r.p.FileDone += n
	r.p.Done += n
}

// rewind takes back bytes of the current file that have to be fetched again
// (a .part the server would not resume, or a failed check).
func (r *reporter) rewind() {
	r.p.Done -= r.p.FileDone
	r.p.FileDone = 0
}

// rateMeter measures throughput over the last few seconds, so the ETA
// follows the link's current speed rather than its average since the start.
type rateMeter struct {
	samples []rateSample // spaced at least sampleSpacing apart, oldest first
	cur     rateSample   // the latest report
}

type rateSample struct {
	t time.Time
	n int64
}

const (
	rateWindow    = 5 * time.Second
	sampleSpacing = 50 * time.Millisecond // bounds the window to ~100 samples
)

func (m *rateMeter) add(t time.Time, total int64) {
	m.cur = rateSample{t, total}
	if k := len(m.samples); k > 0 && t.Sub(m.samples[k-1].t) < sampleSpacing {
		return
	}
	m.samples = append(m.samples, m.cur)
	cut := 0
	for cut < len(m.samples)-2 && t.Sub(m.samples[cut].t) > rateWindow {
		cut++
	}
	if cut > 0 {
		m.samples = append(m.samples[:0], m.samples[cut:]...)
	}
}

// rate is bytes per second over the window; 0 with too little to go on.
func (m *rateMeter) rate() float64 {
	if len(m.samples) == 0 {
		return 0
	}
	first := m.samples[0]
	dt := m.cur.t.Sub(first.t).Seconds()
	if dt < 0.05 {
		return 0
	}
	return float64(m.cur.n-first.n) / dt
}
