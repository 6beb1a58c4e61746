package cpu

import (
	"errors"
	"fmt"
	"io/fs"

	"talkbox/engine/linalg"
	"talkbox/engine/model"
	"talkbox/engine/qcache"
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
	// Under Int8: cached holds the matrices read from the weight cache,
	// handed out in load order (fromCache set), and built collects the ones
	// quantized here, in the same order, for saving.
	cached    []*qkernels.Matrix
	fromCache bool
	built     []*qkernels.Matrix
}

// errCacheLayout: the cache holds other shapes than this load asks for
// (the config changed); the matrices are built again.
var errCacheLayout = errors.New("cpu: the weight cache does not match the model's shapes")

// weight returns a rows×cols matrix in the loader's precision: under Int8
// the next cached matrix, or build's float32 matrix quantized (the float32
// copy dropped, so at most one is held at a time); under F32 build's.
func (l *loader) weight(rows, cols int, build func() *linalg.Matrix) *weight {
	if l.err != nil {
		return nil
	}
	if l.prec == Int8 && l.fromCache {
		if len(l.cached) == 0 || l.cached[0].Rows != rows || l.cached[0].Cols != cols {
			l.err = errCacheLayout
			return nil
		}
		q := l.cached[0]
		l.cached = l.cached[1:]
		return &weight{q: q}
	}
	m := build()
	if m == nil {
		return nil
	}
	if l.prec == Int8 {
		q := qkernels.Quantize(m.W, m.Rows, m.Cols, l.threads)
		l.built = append(l.built, q)
		return &weight{q: q}
	}
	return &weight{f: m}
}

// weightMat is weight of the [rows, cols] tensor name.
func (l *loader) weightMat(name string, rows, cols int) *weight {
	return l.weight(rows, cols, func() *linalg.Matrix { return l.mat(name, rows, cols) })
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
			qkv: l.weight(qd+2*kvd, d.hidden, func() *linalg.Matrix {
				return l.fused(d.hidden, []string{p + model.LayerQ, p + model.LayerK, p + model.LayerV}, []int{qd, kvd, kvd})
			}),
			o:     l.weightMat(p+model.LayerO, d.hidden, qd),
			qNorm: l.vec(p+model.LayerQNorm, d.headDim),
			kNorm: l.vec(p+model.LayerKNorm, d.headDim),
			gateUp: l.weight(2*d.inter, d.hidden, func() *linalg.Matrix {
				return l.fused(d.hidden, []string{p + model.LayerGate, p + model.LayerUp}, []int{d.inter, d.inter})
			}),
			down: l.weightMat(p+model.LayerDown, d.hidden, d.inter),
		})
	}
	s.norm = l.vec(model.StackNorm(prefix), d.hidden)
	return s
}

// cacheVersion names the int8 cache layout: the matrices this file builds,
// in this order, quantized by qkernels in blocks of 32. Change it when either
// changes, so old caches are rebuilt.
const cacheVersion = "talkbox cpu int8 v1: qkv and gate|up fused; talker, codec head, predictor, heads, mtp projection; q8 block 32"

// CacheInfo says what the int8 weight cache did at load: Path is the file
// ("" when no cache was used), Hit whether the matrices came from it, Err a
// damaged file (rebuilt) or a failure to write it; a missing or stale cache
// is no error.
type CacheInfo struct {
	Path string
	Hit  bool
	Err  error
}

// loadWeights fills lm from the checkpoint, under Int8 through the weight
// cache in cacheDir when it is set: a cache whose key matches the checkpoint
// is used, anything else (missing, stale, damaged, other shapes) is built
// again and saved.
func (lm *LM) loadWeights(m *model.Model, cacheDir string) error {
	newLoader := func() *loader { return &loader{f: m.LM, threads: lm.threads, prec: lm.prec} }
	if lm.prec != Int8 || cacheDir == "" {
		return lm.fill(m, newLoader())
	}
	key, err := qcache.KeyOf(m.LM, cacheVersion)
	if err != nil {
		lm.cache.Err = err
		return lm.fill(m, newLoader())
	}
	lm.cache.Path = qcache.PathFor(cacheDir, m.LM.Path)
	ms, err := qcache.Load(lm.cache.Path, key)
	if err == nil {
		l := newLoader()
		l.cached, l.fromCache = ms, true
		if err = lm.fill(m, l); err == nil && len(l.cached) == 0 {
			lm.cache.Hit = true
			return nil
		}
		if err == nil {
			err = errCacheLayout
		}
		if !errors.Is(err, errCacheLayout) {
			return err
		}
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, qcache.ErrStale) {
		lm.cache.Err = err
	}
	l := newLoader()
	if err := lm.fill(m, l); err != nil {
		return err
	}
	if err := qcache.Save(lm.cache.Path, key, l.built); err != nil {
		lm.cache.Err = err
	}
	return nil
}

// fill loads every weight through l. Only what the LM uses is converted:
// the text embedding and text projection belong to the prompt builder.
func (lm *LM) fill(m *model.Model, l *loader) error {
	t := m.Config.Talker
	cp := t.CodePredictor
	lm.talker = l.stack(model.TalkerStack, stackDims{hidden: t.HiddenSize, inter: t.IntermediateSize, layers: t.NumHiddenLayers,
		heads: t.NumAttentionHeads, kvHeads: t.NumKeyValueHeads, headDim: t.HeadDim, eps: t.RMSNormEps, theta: t.RopeTheta})
	lm.codecEmb = l.mat(model.TensorCodecEmbedding, t.VocabSize, t.HiddenSize)
	lm.codecHead = l.weightMat(model.TensorCodecHead, t.VocabSize, t.HiddenSize)
	lm.cp = l.stack(model.PredictorStack, stackDims{hidden: cp.HiddenSize, inter: cp.IntermediateSize,
		layers: cp.NumHiddenLayers, heads: cp.NumAttentionHeads, kvHeads: cp.NumKeyValueHeads, headDim: cp.HeadDim,
		eps: cp.RMSNormEps, theta: cp.RopeTheta})
	for g := 0; g < numPredicted; g++ {
		lm.cpEmb[g] = l.mat(model.PredictorEmbedding(g), cp.VocabSize, t.HiddenSize)
		lm.lmHead[g] = l.weightMat(model.PredictorHead(g), cp.VocabSize, cp.HiddenSize)
	}
	lm.cpProj, lm.cpProjBias = nil, nil
	if cp.HiddenSize != t.HiddenSize {
		// 1.7B layout: talker-width rows enter the predictor through a Linear.
		lm.cpProj = l.weightMat(model.TensorMTPProj, cp.HiddenSize, t.HiddenSize)
		lm.cpProjBias = l.vec(model.TensorMTPProjBias, cp.HiddenSize)
	}
	return l.err
}
