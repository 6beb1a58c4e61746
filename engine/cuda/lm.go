package cuda

/*
#include "loader.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"talkbox/engine/backend"
	"talkbox/engine/model"
	"talkbox/engine/sample"
)

// Options configure the CUDA engine.
type Options struct {
	Device int // CUDA device index
	// MaxPositions is the talker KV-cache length (prefill + frames); 0 means
	// backend.Positions' default. 112 KiB of GPU memory per position.
	MaxPositions int
	// SkipWarmup leaves out the load-time warm-up: for tests that time the
	// first call, and for engine.Open, whose warm-up runs the whole pipeline
	// (the LM's greedy and sampled paths included) once.
	SkipWarmup bool
	// FusedMaxLen is the longest talker context (positions) at which a talker
	// step fuses attention with the O projection; past it the step runs five
	// phases a layer. 0 keeps the library's default (tb_params.fused_max_len,
	// from the H100 context sweep); negative: never fused. For tuning sweeps.
	FusedMaxLen int
	// Prefill picks the prefill path (PrefillTensorCores unless set).
	Prefill Prefill
}

// Prefill is how the prompt runs through the talker.
type Prefill int

const (
	// PrefillTensorCores runs every prompt row at once with tensor-core GEMMs.
	PrefillTensorCores Prefill = C.TB_PREFILL_TENSOR_CORES
	// PrefillPasses runs the cooperative decode kernel over a few rows a
	// pass: the reference the tensor-core path is tested against.
	PrefillPasses Prefill = C.TB_PREFILL_PASSES
)

// params is o as the library's create parameters.
func (o Options) params(maxPositions int) C.tb_params {
	p := C.nl_tb_default_params()
	p.device = C.int(o.Device)
	p.max_positions = C.int(maxPositions)
	p.prefill = C.int(o.Prefill)
	switch {
	case o.FusedMaxLen < 0:
		p.fused_max_len = 0
	case o.FusedMaxLen > 0:
		p.fused_max_len = C.int(o.FusedMaxLen)
	}
	return p
}

// ErrBadPrompt and ErrBadOptions are wrapped by validation errors (the
// backend contract's, shared with the CPU engine).
var (
	ErrBadPrompt  = backend.ErrBadPrompt
	ErrBadOptions = backend.ErrBadOptions
)

// LM is the CUDA language model. Generate calls are serialised; several LMs
// may exist in one process (their GPU work shares one stream per device).
// ProjectText has a lock and a stream of its own, so it runs beside Generate.
type LM struct {
	mu sync.Mutex
	// projMu serialises ProjectText; Close takes it after mu, so e is
	// written only with both held.
	projMu              sync.Mutex
	e                   *C.tb_engine
	device              string
	spec                backend.Spec // limits, group-0 rules and the default frame cap
	grid, threads, smem int
	tokensPerPass       int
	textH               int // text projection width on the GPU; 0: not uploaded
	// reserved: ReserveSMs left SMs to the GPU codec; leaving: whether the
	// next launch leaves them (Generate takes them back for the frames
	// GenerateOptions.CodecNear says the codec is idle).
	reserved, leaving bool
}

// New uploads m's language-model weights (bf16) to the GPU and warms up the
// greedy and sampling paths. It fails with an error wrapping ErrUnavailable
// when the library or a GPU is missing.
func New(m *model.Model, opt Options) (backend.LM, error) {
	return NewLM(m, opt)
}

// NewLM is New with the concrete type (benchmarks use its Bench method).
func NewLM(m *model.Model, opt Options) (*LM, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if m == nil || m.Config == nil || m.LM == nil {
		return nil, errors.New("cuda: no model loaded")
	}
	spec, err := backend.NewSpec(m, opt.MaxPositions)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	var ce C.nl_err
	name, _, _, _, err := deviceInfo(opt.Device)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	hw, err := buildWeights(m, spec)
	if err != nil {
		return nil, err
	}
	params := opt.params(spec.Positions)
	e := C.nl_tb_create(hw.w, &params, &ce)
	textH := int(hw.w.text_hidden)
	hw.free()
	if e == nil {
		return nil, fmt.Errorf("%s: %w", m.Dir, failed("create engine", &ce))
	}
	lm := &LM{e: e, device: name, spec: spec, textH: textH}
	var g, th, sm, mm C.int
	C.nl_tb_geometry(e, &g, &th, &sm, &mm, &ce)
	lm.grid, lm.threads, lm.smem, lm.tokensPerPass = int(g), int(th), int(sm), int(mm)
	if !opt.SkipWarmup {
		if err := lm.Warmup(); err != nil {
			lm.Close()
			return nil, fmt.Errorf("cuda: warm-up: %w", err)
		}
	}
	return lm, nil
}

// Spec is the checkpoint's limits and rules the LM runs with.
func (lm *LM) Spec() backend.Spec { return lm.spec }

// Device names the GPU.
func (lm *LM) Device() string { return lm.device }

// ReserveSMs launches the persistent kernel on at least n fewer SMs, leaving
// them to other streams: kernels of another stream cannot share an SM with it
// (it holds every register), so without free SMs the GPU codec only runs in
// the gaps between frames. n must be at most half the SMs; the library may
// leave more, the fewest at which its launches can switch between both grids
// with the same results (132 SMs: 33 -> 44). Generate leaves them only for
// the frames GenerateOptions.CodecNear names (all when it is nil).
func (lm *LM) ReserveSMs(n int) error {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.e == nil {
		return errors.New("cuda: ReserveSMs on a closed LM")
	}
	var ce C.nl_err
	if C.nl_tb_reserve_sms(lm.e, C.int(n), &ce) != 0 {
		return failed("reserve SMs", &ce)
	}
	var g, th, sm, mm C.int
	C.nl_tb_geometry(lm.e, &g, &th, &sm, &mm, &ce)
	lm.reserved, lm.leaving = n > 0, true
	lm.grid = int(g)
	return nil
}

// Geometry reports the launch shape chosen from the device at load time.
func (lm *LM) Geometry() (grid, threads, smemBytes, tokensPerPass int) {
	return lm.grid, lm.threads, lm.smem, lm.tokensPerPass
}

// leaveSMs makes the next launches leave the reserved SMs or take them all
// and returns the grid they take. Called with mu held.
func (lm *LM) leaveSMs(leave bool) (int, error) {
	var ce C.nl_err
	grid := C.nl_tb_leave_sms(lm.e, C.int(boolInt(leave)), &ce)
	if grid < 0 {
		return 0, failed("leave SMs", &ce)
	}
	lm.leaving = leave
	return int(grid), nil
}

// Close frees the GPU memory. The LM is unusable afterwards.
func (lm *LM) Close() error {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.projMu.Lock()
	defer lm.projMu.Unlock()
	if lm.e != nil {
		C.nl_tb_destroy(lm.e)
		lm.e = nil
	}
	return nil
}

// CanProjectText reports whether ProjectText can run: the checkpoint's text
// projection is on the GPU (it is uploaded when stored as bf16).
func (lm *LM) CanProjectText() bool { return lm.textH > 0 }

// ProjectText computes the talker's text projection fc2(SiLU(fc1 x + b1)) + b2
// on the GPU for rows rows of x (rows x textH floats: looked-up text-embedding
// rows) and returns rows x H floats, in float32 with float32 accumulation.
// It implements prompt.TextProjector. It uses its own lock, CUDA stream and
// buffers, so it may run while another goroutine is inside Generate.
func (lm *LM) ProjectText(x []float32, rows, textH int) ([]float32, error) {
	lm.projMu.Lock()
	defer lm.projMu.Unlock()
	if lm.e == nil {
		return nil, errors.New("cuda: ProjectText on a closed LM")
	}
	if lm.textH == 0 {
		return nil, errors.New("cuda: ProjectText: the text projection is not on the GPU (the checkpoint does not store it as bf16)")
	}
	if textH != lm.textH {
		return nil, fmt.Errorf("cuda: ProjectText: rows of width %d, the text projection takes %d", textH, lm.textH)
	}
	if rows <= 0 || rows > math.MaxInt32/textH {
		return nil, fmt.Errorf("cuda: ProjectText: %d rows, want 1..%d", rows, math.MaxInt32/textH)
	}
	if len(x) != rows*textH {
		return nil, fmt.Errorf("cuda: ProjectText: %d values for %d rows of %d", len(x), rows, textH)
	}
	var ce C.nl_err
	out := make([]float32, rows*lm.spec.Hidden)
	if C.nl_tb_project_text(lm.e, (*C.float)(unsafe.Pointer(&x[0])), C.int(rows), (*C.float)(unsafe.Pointer(&out[0])), &ce) != 0 {
		return nil, failed("project text", &ce)
	}
	return out, nil
}

// Warmup runs a short greedy and a short sampled utterance (the official
// sampling defaults) so the first real request pays no module-load or
// first-launch costs. New runs it unless Options.SkipWarmup is set.
func (lm *LM) Warmup() error {
	p := syntheticPrompt(lm.spec.Hidden, 6, 2, 1)
	out := make(chan backend.Frame, 8)
	talker, predictor := backend.Sampling(model.DefaultGenerationConfig())
	for _, o := range []backend.GenerateOptions{
		{Talker: sample.Greedy(), Predictor: sample.Greedy(), ExactFrames: 2},
		{Talker: talker, Predictor: predictor, ExactFrames: 2, Seed: 1},
	} {
		if _, err := lm.Generate(context.Background(), p, o, out); err != nil {
			return err
		}
		for len(out) > 0 {
			<-out
		}
	}
	return nil
}

// syntheticPrompt makes deterministic finite rows (warm-up and benchmarks only).
func syntheticPrompt(h, rows, trailing int, seed uint64) backend.Prompt {
	s := seed*0x9E3779B97F4A7C15 + 1
	row := func() []float32 {
		r := make([]float32, h)
		for i := range r {
			s ^= s << 13
			s ^= s >> 7
			s ^= s << 17
			r[i] = float32(int64(s>>40)-(1<<23)) / float32(1<<23)
		}
		return r
	}
	p := backend.Prompt{TTSPad: row()}
	for i := 0; i < rows; i++ {
		p.Prefill = append(p.Prefill, row())
	}
	for i := 0; i < trailing; i++ {
		p.Trailing = append(p.Trailing, row())
	}
	return p
}

// sampleOnce runs the GPU sampler alone on logits, with p as the code
// predictor's sampler and draw (seed, frame, group). Tests check that it
// picks exactly what engine/sample picks, with the fast paths the frame loop
// runs and (exact) with the reference forms they fall back to.
func (lm *LM) sampleOnce(logits []float32, p sample.Params, seed uint64, frame, group int, exact bool) (int, error) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.e == nil {
		return -1, errors.New("cuda: sample on a closed LM")
	}
	if len(logits) == 0 {
		return -1, errors.New("cuda: sample needs logits")
	}
	var ce C.nl_err
	ts, ps := cSampler(sample.Greedy()), cSampler(p)
	if C.nl_tb_set_sampling(lm.e, &ts, &ps, C.uint64_t(seed), 0, &ce) != 0 {
		return -1, failed("sampling", &ce)
	}
	var id C.int32_t
	if C.nl_tb_sample(lm.e, (*C.float)(unsafe.Pointer(&logits[0])), C.int(len(logits)), C.int(frame), C.int(group), C.int(boolInt(exact)), &id, &ce) != 0 {
		return -1, failed("sample", &ce)
	}
	return int(id), nil
}

func cSampler(p sample.Params) C.tb_sampler {
	pen := p.RepetitionPenalty
	if pen == 0 {
		pen = 1
	}
	return C.tb_sampler{do_sample: C.int(boolInt(p.DoSample)), temperature: C.float(p.Temperature), top_k: C.int(p.TopK),
		top_p: C.float(p.TopP), repetition_penalty: C.float(pen)}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func flatten(rows [][]float32, h int) []float32 {
	out := make([]float32, 0, len(rows)*h)
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// Generate runs the frame loop with the same semantics as the CPU engine.
// Each frame is one device launch (15 predictor steps, the next input
// embedding and the talker step) with no host synchronisation inside; the
// host learns its 16 codes from one small copy. Without OnLogits the next
// frame is queued before the current one is read, so the GPU never waits for
// the host.
func (lm *LM) Generate(ctx context.Context, p backend.Prompt, opt backend.GenerateOptions, out chan<- backend.Frame) (backend.Result, error) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.e == nil {
		return backend.Result{}, errors.New("cuda: Generate on a closed LM")
	}
	l, err := lm.spec.Start("cuda", p, opt, out)
	if err != nil {
		return backend.Result{}, err
	}
	var ce C.nl_err // the library's message when a call fails
	limit := l.Limit()
	ts, ps := cSampler(opt.Talker), cSampler(opt.Predictor)
	if C.nl_tb_set_sampling(lm.e, &ts, &ps, C.uint64_t(opt.Seed), C.int(boolInt(l.Exact())), &ce) != 0 {
		return l.Result, fmt.Errorf("%w: %w", ErrBadOptions, failed("sampling", &ce))
	}
	start := time.Now()
	g0, err := lm.prefill(p)
	if err != nil {
		return l.Result, err
	}
	l.Prefilled(start)

	depth := 2
	var talkerLogits, hidden, cpLogits []float32
	if opt.OnLogits != nil {
		depth = 1 // the logits buffers hold one frame
		talkerLogits = make([]float32, lm.spec.Vocab)
		hidden = make([]float32, lm.spec.Hidden)
		cpLogits = make([]float32, (backend.NumGroups-1)*lm.spec.PredictorVocab)
		if err := lm.readLogits(talkerLogits, hidden, nil); err != nil {
			return l.Result, err
		}
	}
	if lm.reserved {
		// The next utterance's prefill, and any caller without CodecNear,
		// leave the codec its SMs as before.
		defer func() {
			if !lm.leaving {
				_, _ = lm.leaveSMs(true) // a failure here shows at the next launch
			}
		}()
	}
	submitted := 0
	submit := func(s int) error {
		if lm.reserved {
			if leave := opt.CodecNear == nil || opt.CodecNear(s); leave != lm.leaving {
				if _, err := lm.leaveSMs(leave); err != nil {
					return err
				}
			}
		}
		var tp *C.int32_t
		var tc [backend.NumGroups]C.int32_t
		if s < len(opt.TeacherCodes) {
			for g := range tc {
				tc[g] = C.int32_t(opt.TeacherCodes[s][g])
			}
			tp = &tc[0]
		}
		if C.nl_tb_frame_submit(lm.e, tp, &ce) != 0 {
			return failed(fmt.Sprintf("submit frame %d", s), &ce)
		}
		return nil
	}
	for s := 0; ; s++ {
		if ok, err := l.Next(ctx, s); !ok {
			return l.Result, err
		}
		if opt.OnLogits != nil {
			opt.OnLogits(backend.LogitsEvent{Frame: s, Group: 0, Logits: append([]float32(nil), talkerLogits...), Hidden: append([]float32(nil), hidden...)})
		}
		c0 := int(g0)
		if s < len(opt.TeacherCodes) {
			c0 = int(opt.TeacherCodes[s][0])
		}
		if l.EOS(c0) {
			return l.Result, nil
		}
		for submitted <= s+depth-1 && submitted < limit {
			if err := submit(submitted); err != nil {
				return l.Result, err
			}
			submitted++
		}
		var codes [backend.NumGroups]C.int32_t
		frameOf := func() backend.Frame {
			fr := backend.Frame{Index: s}
			for g := range codes {
				fr.Codes[g] = int32(codes[g])
			}
			return fr
		}
		// The first frame goes out as soon as its codes exist, before the
		// talker step that ends its launch: that step only decides the next
		// frame, and the first chunk of audio is what the user waits for.
		early := s == 0 && opt.OnLogits == nil
		if early {
			if C.nl_tb_frame_codes(lm.e, &codes[0], &ce) != 0 {
				return l.Result, failed(fmt.Sprintf("frame %d", s), &ce)
			}
			if err := l.Emit(ctx, out, frameOf()); err != nil {
				return l.Result, err
			}
		}
		if C.nl_tb_frame_wait(lm.e, &codes[0], &g0, &ce) != 0 {
			return l.Result, failed(fmt.Sprintf("frame %d", s), &ce)
		}
		fr := frameOf()
		if opt.OnLogits != nil {
			if err := lm.readLogits(talkerLogits, hidden, cpLogits); err != nil {
				return l.Result, err
			}
			for g := 1; g < backend.NumGroups; g++ {
				opt.OnLogits(backend.LogitsEvent{Frame: s, Group: g, Logits: append([]float32(nil), cpLogits[(g-1)*lm.spec.PredictorVocab:g*lm.spec.PredictorVocab]...)})
			}
		}
		if !early {
			if err := l.Emit(ctx, out, fr); err != nil {
				return l.Result, err
			}
		}
		if l.Sent() {
			return l.Result, nil
		}
	}
}

// prefill runs the prompt through the talker and returns the first frame's
// group-0 code. Called with mu held.
func (lm *LM) prefill(p backend.Prompt) (C.int32_t, error) {
	var ce C.nl_err
	rows := flatten(p.Prefill, lm.spec.Hidden)
	var trailPtr *C.float
	trail := flatten(p.Trailing, lm.spec.Hidden)
	if len(trail) > 0 {
		trailPtr = (*C.float)(unsafe.Pointer(&trail[0]))
	}
	var g0 C.int32_t
	if C.nl_tb_prefill(lm.e, (*C.float)(unsafe.Pointer(&rows[0])), C.int(len(p.Prefill)), trailPtr, C.int(len(p.Trailing)),
		(*C.float)(unsafe.Pointer(&p.TTSPad[0])), &g0, &ce) != 0 {
		return 0, failed("prefill", &ce)
	}
	return g0, nil
}

func (lm *LM) readLogits(talker, hidden, cp []float32) error {
	ptr := func(v []float32) *C.float {
		if len(v) == 0 {
			return nil
		}
		return (*C.float)(unsafe.Pointer(&v[0]))
	}
	var ce C.nl_err
	if C.nl_tb_read_logits(lm.e, ptr(talker), ptr(hidden), ptr(cp), &ce) != 0 {
		return failed("read logits", &ce)
	}
	return nil
}
