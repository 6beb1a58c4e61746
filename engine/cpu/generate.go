package cpu

import (
	"context"
	"errors"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/sample"
)

// Generate runs the frame loop (docs/design/qwen3-tts-lm.md §5): prefill all
// prompt rows in one batched pass, then per frame pick group 0 from the talker
// logits, run the code predictor for groups 1..15, send the frame, and feed
// the sum of the 16 code embeddings plus the text row back into the talker.
// Result.FrameTimes[s] is the wall time between sending frame s-1 and frame s
// (for frame 0: from the end of the prefill), what a streaming consumer sees.
func (lm *LM) Generate(ctx context.Context, p backend.Prompt, opt backend.GenerateOptions, out chan<- backend.Frame) (backend.Result, error) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.talker == nil {
		return backend.Result{}, errors.New("cpu: Generate on a closed LM")
	}
	l, err := lm.spec.Start("cpu", p, opt, out)
	if err != nil {
		return backend.Result{}, err
	}
	exact := l.Exact()
	N, H := len(p.Prefill), lm.spec.Hidden
	lm.steps.Talker, lm.steps.Predictor = lm.steps.Talker[:0], lm.steps.Predictor[:0]
	lm.history.Reset()
	lm.talkerCache.reset()

	start := time.Now()
	x := make([]float32, N*H)
	for i, row := range p.Prefill {
		copy(x[i*H:], row)
	}
	if err := lm.talker.forward(ctx, lm.k, x, N, lm.talkerCache, &lm.talkerWS); err != nil {
		return l.Cancelled(err)
	}
	h := make([]float32, H)
	logits := make([]float32, lm.spec.Vocab)
	lm.talkerHead(x[(N-1)*H:], h, logits)
	l.Prefilled(start)

	scratch := make([]float32, lm.spec.Vocab)
	e := make([]float32, H)
	for s := 0; ; s++ {
		if ok, err := l.Next(ctx, s); !ok {
			return l.Result, err
		}
		if opt.OnLogits != nil {
			opt.OnLogits(backend.LogitsEvent{Frame: s, Group: 0, Logits: append([]float32(nil), logits...), Hidden: append([]float32(nil), h...)})
		}
		var codes backend.Codes
		if s < len(opt.TeacherCodes) {
			codes[0] = opt.TeacherCodes[s][0]
		} else {
			g0, err := lm.pickGroup0(logits, scratch, s, opt, exact)
			if err != nil {
				return l.Result, err
			}
			codes[0] = int32(g0)
		}
		if l.EOS(int(codes[0])) {
			return l.Result, nil
		}
		lm.history.Add(codes[0])

		t0 := time.Now()
		if err := lm.predict(ctx, h, &codes, s, opt); err != nil {
			return l.Cancelled(err)
		}
		lm.steps.Predictor = append(lm.steps.Predictor, time.Since(t0))

		if err := l.Emit(ctx, out, backend.Frame{Index: s, Codes: codes}); err != nil {
			return l.Result, err
		}
		if l.Sent() {
			return l.Result, nil
		}

		t0 = time.Now()
		lm.stepInput(e, &codes, s, p)
		if err := lm.talker.forward(ctx, lm.k, e, 1, lm.talkerCache, &lm.talkerWS); err != nil {
			return l.Cancelled(err)
		}
		lm.talkerHead(e, h, logits)
		lm.steps.Talker = append(lm.steps.Talker, time.Since(t0))
	}
}

// talkerHead applies the final norm to the last layer's output x (width H),
// keeping the normed vector in h (it also feeds the code predictor), and the
// codec head to get the group-0 logits.
func (lm *LM) talkerHead(x, h, logits []float32) {
	rmsNorm(h, x[:lm.spec.Hidden], lm.talker.norm, lm.talker.eps)
	lm.k.mul(lm.codecHead, nil, h, 1, logits)
}

// pickGroup0 applies the official processors (repetition penalty over the set
// of past group-0 codes, EOS mask, control-range suppression) to a copy of the
// raw logits and samples. With ExactFrames EOS is masked at every step so
// every emitted frame holds codes the codec can decode.
func (lm *LM) pickGroup0(logits, scratch []float32, s int, opt backend.GenerateOptions, exact bool) (int, error) {
	copy(scratch, logits)
	sample.ApplyRepetitionPenalty(scratch, lm.history, opt.Talker.RepetitionPenalty)
	lm.spec.Rules.Apply(scratch, s, exact)
	return lm.sampler.Pick(scratch, opt.Talker, sample.Uniform(opt.Seed, s, 0))
}

// stepInput builds the next talker input: C(g0) + Σ_{g=1..15} E_g(code g) +
// the text row (trailing[s], then tts_pad).
func (lm *LM) stepInput(e []float32, codes *backend.Codes, s int, p backend.Prompt) {
	copy(e, lm.codecEmb.Row(int(codes[0])))
	for g := 1; g < backend.NumGroups; g++ {
		addInto(e, lm.cpEmb[g-1].Row(int(codes[g])))
	}
	text := p.TTSPad
	if s < len(p.Trailing) {
		text = p.Trailing[s]
	}
	addInto(e, text)
}
