package cpu

import (
	"fmt"

	"talkbox/engine/linalg"
	"talkbox/engine/model"
	"talkbox/engine/qkernels"
	"talkbox/engine/safetensors"
)

// loader converts checkpoint tensors to float32 once at load. Measured on the
// dev box (2 cores): OpenBLAS sgemv on f32 weights streams ~4 Gparam/s, a Go
// bf16 dot loop ~1.2 Gparam/s and a Go f32 loop ~2.3 Gparam/s, so f32 +
// OpenBLAS wins despite twice the memory (0.6B: ~2.3 GB, 1.7B: ~5.6 GB).
type loader struct {
	f       *safetensors.File
	threads int
	prec    Precision
	err     error
}

// weight wraps a converted matrix in the loader's precision: under Int8 it
// is quantized and the float32 copy dropped, so at most one matrix is held
// in float32 at a time.
func (l *loader) weight(m *linalg.Matrix) *weight {
	if m == nil {
		return nil
	}
	if l.prec == Int8 {
		return &weight{q: qkernels.Quantize(m.W, m.Rows, m.Cols, l.threads)}
	}
	return &weight{f: m}
}

// vec reads a tensor and checks its element count.
func (l *loader) vec(name string, n int) []float32 {
	if l.err != nil {
		return nil
	}
	dst := make([]float32, n)
	if !l.into(dst, name) {
		return nil
	}
	return dst
}

// into converts a tensor of exactly len(dst) elements into dst. BF16 (the
// released dtype) is widened in parallel bands straight from the mapping;
// other float types go through safetensors' copying reader.
func (l *loader) into(dst []float32, name string) bool {
	if l.err != nil {
		return false
	}
	info, ok := l.f.Info(name)
	if !ok {
		l.err = fmt.Errorf("cpu: %s: no tensor %q", l.f.Path, name)
		return false
	}
	if info.Elements() != int64(len(dst)) {
		l.err = fmt.Errorf("cpu: %s: tensor %q has %d elements, want %d", l.f.Path, name, info.Elements(), len(dst))
		return false
	}
	if info.DType == safetensors.BF16 {
		src, err := l.f.BF16(name)
		if err != nil {
			l.err = fmt.Errorf("cpu: %w", err)
			return false
		}
		linalg.ParallelRows(l.threads, len(dst), len(dst), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = safetensors.BF16ToF32(src[i])
			}
		})
		return true
	}
	v, err := l.f.F32(name)
	if err != nil {
		l.err = fmt.Errorf("cpu: %w", err)
		return false
	}
	copy(dst, v)
	return true
}

// mat reads a [rows, cols] weight.
func (l *loader) mat(name string, rows, cols int) *linalg.Matrix {
	v := l.vec(name, rows*cols)
	if v == nil {
		return nil
	}
	return &linalg.Matrix{Rows: rows, Cols: cols, W: v}
}

// fused stacks several [r_i, cols] weights into one [Σr_i, cols] matrix.
func (l *loader) fused(cols int, names []string, rows []int) *linalg.Matrix {
	total := 0
	for _, r := range rows {
		total += r
	}
	m := &linalg.Matrix{Rows: total, Cols: cols, W: make([]float32, total*cols)}
	off := 0
	for i, name := range names {
		if !l.into(m.W[off:off+rows[i]*cols], name) {
			return nil
		}
		off += rows[i] * cols
	}
	return m
}

// stackDims are the sizes shared by the talker and the code predictor.
type stackDims struct {
	hidden, inter, layers, heads, kvHeads, headDim int
	eps, theta                                     float64
}

func (l *loader) stack(prefix string, d stackDims) *stack {
	s := &stack{hidden: d.hidden, inter: d.inter, heads: d.heads, kvHeads: d.kvHeads, headDim: d.headDim,
		eps: float32(d.eps), rope: newRope(d.headDim, d.theta)}
	qd, kvd := d.heads*d.headDim, d.kvHeads*d.headDim
	for i := 0; i < d.layers; i++ {
		p := model.LayerPrefix(prefix, i)
		s.layers = append(s.layers, layer{
			inNorm:   l.vec(p+model.LayerInputNorm, d.hidden),
			postNorm: l.vec(p+model.LayerPostNorm, d.hidden),
			qkv:      l.weight(l.fused(d.hidden, []string{p + model.LayerQ, p + model.LayerK, p + model.LayerV}, []int{qd, kvd, kvd})),
			o:        l.weight(l.mat(p+model.LayerO, d.hidden, qd)),
			qNorm:    l.vec(p+model.LayerQNorm, d.headDim),
			kNorm:    l.vec(p+model.LayerKNorm, d.headDim),
			gateUp:   l.weight(l.fused(d.hidden, []string{p + model.LayerGate, p + model.LayerUp}, []int{d.inter, d.inter})),
			down:     l.weight(l.mat(p+model.LayerDown, d.hidden, d.inter)),
		})
	}
	s.norm = l.vec(model.StackNorm(prefix), d.hidden)
	return s
}

// loadWeights fills lm from the checkpoint. Only what the LM uses is
// converted: the text embedding and text projection belong to the prompt
// builder.
func (lm *LM) loadWeights(m *model.Model) error {
	t := m.Config.Talker
	cp := t.CodePredictor
	l := &loader{f: m.LM, threads: lm.threads, prec: lm.prec}
	lm.talker = l.stack(model.TalkerStack, stackDims{hidden: t.HiddenSize, inter: t.IntermediateSize, layers: t.NumHiddenLayers,
		heads: t.NumAttentionHeads, kvHeads: t.NumKeyValueHeads, headDim: t.HeadDim, eps: t.RMSNormEps, theta: t.RopeTheta})
	lm.codecEmb = l.mat(model.TensorCodecEmbedding, t.VocabSize, t.HiddenSize)
	lm.codecHead = l.weight(l.mat(model.TensorCodecHead, t.VocabSize, t.HiddenSize))
	lm.cp = l.stack(model.PredictorStack, stackDims{hidden: cp.HiddenSize, inter: cp.IntermediateSize,
		layers: cp.NumHiddenLayers, heads: cp.NumAttentionHeads, kvHeads: cp.NumKeyValueHeads, headDim: cp.HeadDim,
		eps: cp.RMSNormEps, theta: cp.RopeTheta})
	for g := 0; g < numPredicted; g++ {
		lm.cpEmb[g] = l.mat(model.PredictorEmbedding(g), cp.VocabSize, t.HiddenSize)
		lm.lmHead[g] = l.weight(l.mat(model.PredictorHead(g), cp.VocabSize, cp.HiddenSize))
	}
	if cp.HiddenSize != t.HiddenSize {
		// 1.7B layout: talker-width rows enter the predictor through a Linear.
		lm.cpProj = l.weight(l.mat(model.TensorMTPProj, cp.HiddenSize, t.HiddenSize))
		lm.cpProjBias = l.vec(model.TensorMTPProjBias, cp.HiddenSize)
	}
	return l.err
}
