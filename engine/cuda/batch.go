package cuda

/*
#include "loader.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"talkbox/engine/backend"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

// ErrBatchFull is returned by a batched Generate when every stream slot is
// in use; the caller may retry when one frees.
var ErrBatchFull = errors.New("cuda: every batch stream is in use")

// Batcher runs many utterances on one LM's weights at once (continuous
// batching): each step makes one frame for every stream that is waiting for
// one, reading every weight once for all of them (tb_batch_step). A new
// utterance's prefill runs between two steps and it joins the next; one that
// ends or is cancelled leaves without holding up the others. Its LMs (LM())
// are the backend.LM of each utterance; one goroutine owns the library's
// batch and makes every call on it.
type Batcher struct {
	lm   *LM
	b    *C.tb_batch
	cap  int
	spec backend.Spec
	ctl  chan batchMsg
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// NewBatcher makes a batch of up to maxStreams streams (0: as many as the
// library allows, 64) of maxPositions talker positions each (0: 2048, about
// two and a half minutes of audio a stream), sized down to the free GPU
// memory. lm stays the owner of the weights; close the Batcher first.
func NewBatcher(lm *LM, maxStreams, maxPositions int) (*Batcher, error) {
	if lm == nil || lm.e == nil {
		return nil, errors.New("cuda: NewBatcher on a closed LM")
	}
	if maxPositions == 0 {
		maxPositions = min(2048, lm.spec.Positions)
	}
	var ce C.nl_err
	lm.mu.Lock()
	b := C.nl_tb_batch_create(lm.e, C.int(maxStreams), C.int(maxPositions), &ce)
	lm.mu.Unlock()
	if b == nil {
		return nil, failed("create batch", &ce)
	}
	spec := lm.spec
	spec.Positions = maxPositions
	bt := &Batcher{lm: lm, b: b, cap: int(C.nl_tb_batch_capacity(b)), spec: spec,
		ctl: make(chan batchMsg), quit: make(chan struct{}), done: make(chan struct{})}
	go bt.run()
	return bt, nil
}

// Capacity is how many streams run at once.
func (bt *Batcher) Capacity() int { return bt.cap }

// Spec is the rules and limits a batched utterance runs with.
func (bt *Batcher) Spec() backend.Spec { return bt.spec }

// LM is a backend.LM whose utterances run in this batch. Its Close does
// nothing: the Batcher owns the batch.
func (bt *Batcher) LM() backend.LM { return batchLM{bt} }

// Close ends the batch: utterances still running fail.
func (bt *Batcher) Close() error {
	bt.once.Do(func() {
		close(bt.quit)
		<-bt.done
		C.nl_tb_batch_destroy(bt.b)
		bt.b = nil
	})
	return nil
}

// Warmup prepares every step size and runs short greedy and sampled
// utterances through the batch, so no request pays for capturing a step's
// launches.
func (bt *Batcher) Warmup() error {
	if err := bt.send(batchMsg{kind: msgPrepare, s: &batchStream{res: make(chan stepResult, 1)}}).err; err != nil {
		return err
	}
	p := syntheticPrompt(bt.spec.Hidden, 8, 2, 1)
	g := sample.Greedy()
	sampled := sample.Params{DoSample: true, Temperature: 0.9, TopK: 50, TopP: 1, RepetitionPenalty: 1.05}
	for _, o := range []backend.GenerateOptions{{Talker: g, Predictor: g, ExactFrames: 2}, {Talker: sampled, Predictor: sampled, ExactFrames: 2, Seed: 1}} {
		out := make(chan backend.Frame, 2)
		if _, err := bt.LM().Generate(context.Background(), p, o, out); err != nil {
			return err
		}
	}
	return nil
}

type batchLM struct{ bt *Batcher }

func (l batchLM) Device() string     { return l.bt.lm.device + " (batched)" }
func (l batchLM) Spec() backend.Spec { return l.bt.spec }
func (l batchLM) Close() error       { return nil }
func (l batchLM) Generate(ctx context.Context, p backend.Prompt, opt backend.GenerateOptions, out chan<- backend.Frame) (backend.Result, error) {
	return l.bt.generate(ctx, p, opt, out)
}

// The messages a stream sends the batch goroutine.
type msgKind int

const (
	msgAdd     msgKind = iota // admit: prefill, reply with the slot and group 0
	msgFrame                  // make the next frame (teacher codes optional)
	msgLeave                  // free the slot
	msgPrepare                // capture every step size's launches (tb_batch_prepare)
)

type batchMsg struct {
	kind    msgKind
	s       *batchStream
	teacher *backend.Codes
}

// stepResult is one frame of one stream, or why there is none.
type stepResult struct {
	codes  backend.Codes
	g0     int
	logits *backend.LogitsEvent // the talker's (frame events) when asked for
	cp     [][]float32          // the predictor's 15 rows when asked for
	err    error
}

type batchStream struct {
	p      backend.Prompt
	opt    backend.GenerateOptions
	exact  bool
	slot   int
	res    chan stepResult // capacity 1: one frame asked for at a time
	logits bool
}

// run is the batch goroutine: admissions and departures between steps, and
// a step as soon as every admitted stream has asked for its next frame or
// left.
func (bt *Batcher) run() {
	defer close(bt.done)
	active := map[*batchStream]bool{}
	waiting := []*batchStream{}
	teach := map[*batchStream]*backend.Codes{}
	fail := func(err error) {
		for _, s := range waiting {
			s.res <- stepResult{err: err}
		}
		waiting = waiting[:0]
	}
	handle := func(m batchMsg) {
		switch m.kind {
		case msgFrame:
			waiting = append(waiting, m.s)
			if m.teacher != nil {
				teach[m.s] = m.teacher
			}
		case msgPrepare:
			var ce C.nl_err
			var err error
			if C.nl_tb_batch_prepare(bt.b, &ce) != 0 {
				err = failed("prepare batch steps", &ce)
			}
			m.s.res <- stepResult{err: err}
		case msgLeave:
			delete(active, m.s)
			var ce C.nl_err
			if C.nl_tb_batch_remove(bt.b, C.int(m.s.slot), &ce) != 0 {
				m.s.res <- stepResult{err: failed("leave batch", &ce)}
				return
			}
			m.s.res <- stepResult{}
		}
	}
	for {
		var m batchMsg
		if len(active) > 0 && len(waiting) == len(active) {
			// A step is due, but admissions that came meanwhile go first:
			// their listeners wait for a first frame, while the active
			// streams' listeners hold audio and lose only this prefill's
			// time. Stepping first made a burst's later arrivals wait for a
			// step of the earlier ones before their prefill.
			select {
			case m = <-bt.ctl:
			default:
				bt.step(waiting, teach)
				waiting = waiting[:0]
				clear(teach)
				continue
			}
		} else {
			select {
			case m = <-bt.ctl:
			case <-bt.quit:
				fail(errors.New("cuda: batch closed"))
				// Streams still admitted get the same error on their next message.
				for {
					select {
					case m := <-bt.ctl:
						m.s.res <- stepResult{err: errors.New("cuda: batch closed")}
					default:
						return
					}
				}
			}
		}
		if m.kind != msgAdd {
			handle(m)
			continue
		}
		// Admissions that arrive together prefill together (one pass over
		// the weights for all their prompts).
		adds := []*batchStream{m.s}
	more:
		for {
			select {
			case m2 := <-bt.ctl:
				if m2.kind == msgAdd {
					adds = append(adds, m2.s)
				} else {
					handle(m2)
				}
			default:
				break more
			}
		}
		free := bt.cap - len(active)
		for i, s := range adds {
			if i >= free {
				s.res <- stepResult{err: fmt.Errorf("%w (%d streams)", ErrBatchFull, bt.cap)}
			}
		}
		adds = adds[:min(len(adds), free)]
		for i, r := range bt.add(adds) {
			if r.err == nil {
				active[adds[i]] = true
			}
			adds[i].res <- r
		}
	}
}

func floatPtr(v []float32) *C.float {
	if len(v) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&v[0]))
}

// add prefills the streams' prompts together into free slots (one by one
// when that fails, so one stream's bad input fails only that stream).
func (bt *Batcher) add(ss []*batchStream) []stepResult {
	res := make([]stepResult, len(ss))
	if len(ss) == 0 {
		return res
	}
	h := bt.spec.Hidden
	var pin runtime.Pinner
	defer pin.Unpin()
	ptr := func(v []float32) *C.float {
		if len(v) == 0 {
			return nil
		}
		pin.Pin(&v[0])
		return (*C.float)(unsafe.Pointer(&v[0]))
	}
	reqs := make([]C.tb_batch_request, len(ss))
	for i, s := range ss {
		reqs[i] = C.tb_batch_request{rows: ptr(flatten(s.p.Prefill, h)), n: C.int(len(s.p.Prefill)),
			trailing: ptr(flatten(s.p.Trailing, h)), n_trailing: C.int(len(s.p.Trailing)), tts_pad: ptr(s.p.TTSPad),
			talker: cSampler(s.opt.Talker), predictor: cSampler(s.opt.Predictor), seed: C.uint64_t(s.opt.Seed),
			mask_eos: C.int(boolInt(s.exact))}
	}
	slots := make([]C.int, len(ss))
	g0 := make([]C.int32_t, len(ss))
	var ce C.nl_err
	if C.nl_tb_batch_add_many(bt.b, &reqs[0], C.int(len(ss)), &slots[0], &g0[0], &ce) != 0 {
		if len(ss) > 1 {
			for i, s := range ss {
				res[i] = bt.add([]*batchStream{s})[0]
			}
			return res
		}
		if isFull(&ce) {
			res[0].err = fmt.Errorf("%w (%d streams)", ErrBatchFull, bt.cap)
		} else {
			res[0].err = failed("batch prefill", &ce)
		}
		return res
	}
	for i, s := range ss {
		s.slot = int(slots[i])
		res[i].g0 = int(g0[i])
		if s.logits {
			res[i].logits = bt.readLogits(s, false, &res[i])
		}
	}
	return res
}

func isFull(ce *C.nl_err) bool {
	msg := C.GoString(&ce.msg[0])
	return len(msg) >= 10 && msg[:10] == "batch full"
}

// readLogits fetches s's talker logits and hidden state (and, after a step,
// its predictor rows into r.cp).
func (bt *Batcher) readLogits(s *batchStream, predictor bool, r *stepResult) *backend.LogitsEvent {
	tl := make([]float32, bt.spec.Vocab)
	hid := make([]float32, bt.spec.Hidden)
	var cp []float32
	if predictor {
		cp = make([]float32, (backend.NumGroups-1)*bt.spec.PredictorVocab)
	}
	var ce C.nl_err
	if C.nl_tb_batch_read_logits(bt.b, C.int(s.slot), floatPtr(tl), floatPtr(hid), floatPtr(cp), &ce) != 0 {
		r.err = failed("read logits", &ce)
		return nil
	}
	for g := 1; predictor && g < backend.NumGroups; g++ {
		r.cp = append(r.cp, cp[(g-1)*bt.spec.PredictorVocab:g*bt.spec.PredictorVocab])
	}
	return &backend.LogitsEvent{Group: 0, Logits: tl, Hidden: hid}
}

// step makes one frame for each waiting stream and hands each its result.
func (bt *Batcher) step(ws []*batchStream, teach map[*batchStream]*backend.Codes) {
	n := len(ws)
	slots := make([]C.int32_t, n)
	var teacher []C.int32_t
	if len(teach) > 0 {
		teacher = make([]C.int32_t, n*backend.NumGroups)
	}
	for r, s := range ws {
		slots[r] = C.int32_t(s.slot)
		if teacher != nil {
			tc, ok := teach[s]
			for g := 0; g < backend.NumGroups; g++ {
				teacher[r*backend.NumGroups+g] = -1
				if ok {
					teacher[r*backend.NumGroups+g] = C.int32_t(tc[g])
				}
			}
		}
	}
	out := make([]C.int32_t, n*18)
	var tp *C.int32_t
	if teacher != nil {
		tp = &teacher[0]
	}
	var ce C.nl_err
	if C.nl_tb_batch_step(bt.b, &slots[0], C.int(n), tp, &out[0], &ce) != 0 {
		err := failed("batch step", &ce)
		for _, s := range ws {
			s.res <- stepResult{err: err}
		}
		return
	}
	for r, s := range ws {
		o := out[r*18 : (r+1)*18]
		res := stepResult{g0: int(o[16])}
		if o[17] != 0 {
			res.err = errors.New("cuda: frame: no finite logit to sample from")
		}
		for g := range res.codes {
			res.codes[g] = int32(o[g])
		}
		if s.logits && res.err == nil {
			res.logits = bt.readLogits(s, true, &res)
		}
		s.res <- res
	}
}

// send hands the batch goroutine a message and waits for its answer.
func (bt *Batcher) send(m batchMsg) stepResult {
	select {
	case bt.ctl <- m:
	case <-bt.done:
		return stepResult{err: errors.New("cuda: batch closed")}
	}
	return <-m.s.res
}

// generate is one batched utterance with the single-stream engine's
// semantics (the rules of backend.Loop). Frames are made as fast as the
// batch steps and queued for out, so a slow reader never holds up the other
// streams; generate returns once every frame is out.
func (bt *Batcher) generate(ctx context.Context, p backend.Prompt, opt backend.GenerateOptions, out chan<- backend.Frame) (backend.Result, error) {
	l, err := bt.spec.Start("cuda batch", p, opt, out)
	if err != nil {
		return backend.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return l.Cancelled(err)
	}
	s := &batchStream{p: p, opt: opt, exact: l.Exact(), res: make(chan stepResult, 1), logits: opt.OnLogits != nil}
	start := time.Now()
	r := bt.send(batchMsg{kind: msgAdd, s: s})
	if r.err != nil {
		return l.Result, r.err
	}
	l.Prefilled(start)
	leave := func() error { return bt.send(batchMsg{kind: msgLeave, s: s}).err }

	// Frames go out from their own goroutine (emit), so this loop asks for
	// the next frame as soon as one arrives.
	queue := make(chan backend.Frame, l.Limit()+1)
	emitted := make(chan error, 1)
	go func() {
		var err error
		for f := range queue {
			if err != nil {
				continue
			}
			// Not l.Emit: the loop below owns l.
			select {
			case out <- f:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		emitted <- err
	}()
	finish := func(err error) (backend.Result, error) {
		// The slot frees before the last frames are read.
		if lerr := leave(); err == nil {
			err = lerr
		}
		close(queue)
		eerr := <-emitted
		if err == nil && eerr != nil {
			return l.Cancelled(eerr)
		}
		return l.Result, err
	}

	g0 := r.g0
	pending := r.logits
	for s2 := 0; ; s2++ {
		if ok, err := l.Next(ctx, s2); !ok {
			return finish(err)
		}
		if pending != nil {
			ev := *pending
			ev.Frame = s2
			opt.OnLogits(ev)
		}
		c0 := g0
		var tc *backend.Codes
		if s2 < len(opt.TeacherCodes) {
			tc = &opt.TeacherCodes[s2]
			c0 = int(tc[0])
		}
		if l.EOS(c0) {
			return finish(nil)
		}
		r := bt.send(batchMsg{kind: msgFrame, s: s, teacher: tc})
		if r.err != nil {
			return finish(fmt.Errorf("frame %d: %w", s2, r.err))
		}
		for g, row := range r.cp {
			opt.OnLogits(backend.LogitsEvent{Frame: s2, Group: g + 1, Logits: row})
		}
		queue <- backend.Frame{Index: s2, Codes: r.codes}
		g0, pending = r.g0, r.logits
		if l.Sent() {
			return finish(nil)
		}
	}
}

// FrameWeightBytes is what one frame reads of m's weights in bf16: every
// talker layer and the codec head once, the code predictor's layers and one
// of its heads on each of its 15 steps (and the 1.7B's projection). The
// embedding rows a frame looks up are left out (a few KB).
func FrameWeightBytes(m *model.Model) int64 {
	layer := func(h, i, heads, kv int) int64 {
		const hd = 128
		qkv := int64(heads+2*kv) * hd * int64(h)
		o := int64(h) * int64(heads) * hd
		return 2 * (qkv + o + 3*int64(h)*int64(i))
	}
	t := m.Config.Talker
	c := t.CodePredictor
	talker := int64(t.NumHiddenLayers)*layer(t.HiddenSize, t.IntermediateSize, t.NumAttentionHeads, t.NumKeyValueHeads) +
		2*int64(t.VocabSize)*int64(t.HiddenSize)
	step := int64(c.NumHiddenLayers)*layer(c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads) +
		2*int64(c.VocabSize)*int64(c.HiddenSize)
	if c.HiddenSize != t.HiddenSize {
		step += 2 * int64(c.HiddenSize) * int64(t.HiddenSize)
	}
	return talker + int64(backend.NumGroups-1)*step
}
