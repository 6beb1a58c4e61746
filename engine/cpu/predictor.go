package cpu

import (
	"context"

	"talkbox/engine/backend"
	"talkbox/engine/sample"
)

// predict runs the code predictor for one frame (qwen3-tts-lm.md §6): a fresh
// KV cache, position 0 = the talker's post-norm hidden h, position 1 = C(g0),
// then one position per predicted group; lm_head[g-1] at the last position
// gives group g. Codes 1..15 are written into codes. Sampling uses
// opt.Predictor alone: no repetition penalty, no suppression, no EOS (all 2048
// codes are valid).
func (lm *LM) predict(ctx context.Context, h []float32, codes *backend.Codes, s int, opt backend.GenerateOptions) error {
	cp := lm.cp
	D := cp.hidden
	lm.cpCache.reset()
	x := grow(nil, 2*D)
	lm.project(x[:D], h)
	lm.project(x[D:], lm.codecEmb.Row(int(codes[0])))
	n := 2
	normed := make([]float32, D)
	logits := make([]float32, lm.spec.PredictorVocab)
	teacher := s < len(opt.TeacherCodes)
	for g := 1; g < backend.NumGroups; g++ {
		if err := cp.forward(ctx, lm.k, x, n, lm.cpCache, &lm.cpWS); err != nil {
			return err
		}
		rmsNorm(normed, x[(n-1)*D:n*D], cp.norm, cp.eps)
		lm.k.mul(lm.lmHead[g-1], nil, normed, 1, logits)
		if opt.OnLogits != nil {
			opt.OnLogits(backend.LogitsEvent{Frame: s, Group: g, Logits: append([]float32(nil), logits...)})
		}
		if teacher {
			codes[g] = opt.TeacherCodes[s][g]
		} else {
			c, err := lm.sampler.Pick(logits, opt.Predictor, sample.Uniform(opt.Seed, s, g))
			if err != nil {
				return err
			}
			codes[g] = int32(c)
		}
		if g < numPredicted {
			// The next position is group g's own embedding; group 15 is
			// never fed back into the predictor.
			x = x[:D]
			lm.project(x, lm.cpEmb[g-1].Row(int(codes[g])))
			n = 1
		}
	}
	return nil
}

// project maps a talker-width row into the predictor: identity for 0.6B,
// small_to_mtp_projection (W v + b) for 1.7B.
func (lm *LM) project(dst, v []float32) {
	if lm.cpProj == nil {
		copy(dst, v)
		return
	}
	lm.k.mul(lm.cpProj, lm.cpProjBias, v, 1, dst)
}
