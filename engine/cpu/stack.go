package cpu

import (
	"context"
	"math"

	"talkbox/engine/cores"
	"talkbox/engine/f32vec"
	"talkbox/engine/swiglu"
)

// layer is one Qwen3 decoder block. q/k/v and gate/up are fused into single
// matrices at load so each needs one product per step.
type layer struct {
	inNorm, postNorm []float32
	qkv              *weight // rows: q (heads·hd), k (kv·hd), v (kv·hd)
	o                *weight
	qNorm, kNorm     []float32
	gateUp           *weight // rows: gate (inter), up (inter)
	down             *weight
}

// stack is a decoder transformer (the talker or the code predictor).
type stack struct {
	hidden, inter, heads, kvHeads, headDim int
	eps                                    float32
	layers                                 []layer
	norm                                   []float32
	rope                                   *rope
}

func (s *stack) qDim() int  { return s.heads * s.headDim }
func (s *stack) kvDim() int { return s.kvHeads * s.headDim }

// kvCache holds keys and values per layer, [pos, kv·hd] row-major; n is the
// number of positions filled.
type kvCache struct {
	k, v [][]float32
	n    int
}

func newKVCache(layers int) *kvCache {
	return &kvCache{k: make([][]float32, layers), v: make([][]float32, layers)}
}

// reset empties the cache, keeping its storage for the next utterance/frame.
func (c *kvCache) reset() {
	for l := range c.k {
		c.k[l], c.v[l] = c.k[l][:0], c.v[l][:0]
	}
	c.n = 0
}

// workspace is per-call scratch, kept across calls so steps do not allocate.
type workspace struct {
	h, qkv, attn, tmp, gu, act, scores []float32
}

// forward runs all layers over n new rows x ([n, hidden], updated in place to
// the last layer's output, before the final norm) at positions
// cache.n .. cache.n+n-1, appending their keys and values to cache. It checks
// ctx between layers so a long prefill stops promptly.
func (s *stack) forward(ctx context.Context, k prods, x []float32, n int, cache *kvCache, ws *workspace) error {
	pos0 := cache.n
	s.rope.ensure(pos0 + n)
	H, qd, kvd := s.hidden, s.qDim(), s.kvDim()
	width := qd + 2*kvd
	ws.h = grow(ws.h, n*H)
	ws.qkv = grow(ws.qkv, n*width)
	ws.attn = grow(ws.attn, n*qd)
	ws.tmp = grow(ws.tmp, n*H)
	ws.gu = grow(ws.gu, n*2*s.inter)
	ws.act = grow(ws.act, n*s.inter)
	ws.scores = grow(ws.scores, pos0+n)
	for li := range s.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		L := &s.layers[li]
		rmsNormRows(ws.h, x, L.inNorm, n, s.eps)
		k.mul(L.qkv, nil, ws.h, n, ws.qkv)
		for i := 0; i < n; i++ {
			row := ws.qkv[i*width : (i+1)*width]
			for hh := 0; hh < s.heads; hh++ {
				q := row[hh*s.headDim : (hh+1)*s.headDim]
				rmsNorm(q, q, L.qNorm, s.eps)
				s.rope.apply(q, pos0+i)
			}
			kk := row[qd : qd+kvd]
			for hh := 0; hh < s.kvHeads; hh++ {
				kh := kk[hh*s.headDim : (hh+1)*s.headDim]
				rmsNorm(kh, kh, L.kNorm, s.eps)
				s.rope.apply(kh, pos0+i)
			}
			cache.k[li] = append(cache.k[li], kk...)
			cache.v[li] = append(cache.v[li], row[qd+kvd:width]...)
		}
		s.attention(ws, k.threads, cache.k[li], cache.v[li], n, pos0, width)
		k.mul(L.o, nil, ws.attn, n, ws.tmp)
		addInto(x[:n*H], ws.tmp[:n*H])

		rmsNormRows(ws.h, x, L.postNorm, n, s.eps)
		k.mul(L.gateUp, nil, ws.h, n, ws.gu)
		I := s.inter
		// Split over the cores in pieces of whole rows or row segments
		// (each element computed as alone, so the result does not change).
		parallelFor(k.threads, n*I, 256, func(lo, hi int) {
			for e := lo; e < hi; {
				i, j := e/I, e%I
				end := min(hi-e, I-j)
				g := ws.gu[i*2*I:]
				swiglu.Apply(ws.act[e:e+end], g[j:j+end], g[I+j:I+j+end])
				e += end
			}
		})
		k.mul(L.down, nil, ws.act, n, ws.tmp)
		addInto(x[:n*H], ws.tmp[:n*H])
	}
	cache.n = pos0 + n
	return nil
}

// attention is causal grouped-query attention for the n new rows: row i (at
// position pos0+i) attends to positions 0..pos0+i; each kv head serves
// heads/kvHeads query heads. Softmax in float64 for the sum. The (row, head)
// pairs are split over threads goroutines; each pair is computed as alone,
// so the result does not depend on the split.
func (s *stack) attention(ws *workspace, threads int, keys, vals []float32, n, pos0, width int) {
	hd, kvd := s.headDim, s.kvDim()
	group := s.heads / s.kvHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	perPair := (pos0 + n) * hd // multiply-adds of one (row, head), at most
	parallelFor(threads, n*s.heads, max(1, minParallelWork/perPair), func(lo, hi int) {
		sc := make([]float32, pos0+n)
		for p := lo; p < hi; p++ {
			i, hh := p/s.heads, p%s.heads
			last := pos0 + i
			q := ws.qkv[i*width+hh*hd : i*width+(hh+1)*hd]
			kvOff := (hh / group) * hd
			sc := sc[:last+1]
			mx := float32(math.Inf(-1))
			for t := 0; t <= last; t++ {
				v := f32vec.Dot(q, keys[t*kvd+kvOff:t*kvd+kvOff+hd]) * scale
				sc[t] = v
				mx = max(mx, v)
			}
			var sum float64
			for t := range sc {
				e := math.Exp(float64(sc[t] - mx))
				sc[t] = float32(e)
				sum += e
			}
			inv := float32(1 / sum)
			out := ws.attn[i*s.qDim()+hh*hd : i*s.qDim()+(hh+1)*hd]
			clear(out)
			for t, w := range sc {
				f32vec.AddScaled(out, vals[t*kvd+kvOff:t*kvd+kvOff+hd], w*inv)
			}
		}
	})
}

// minParallelWork is the least work (multiply-adds, or elements) worth a
// goroutine: below it the hand-off costs more than it saves.
const minParallelWork = 1 << 15

// parallelFor runs fn over [0, n) on up to threads goroutines, sharing the
// cores with the codec (engine/cores), in chunks of at least minChunk items.
func parallelFor(threads, n, minChunk int, fn func(lo, hi int)) {
	if threads <= 1 || n <= minChunk {
		fn(0, n)
		return
	}
	cores.For(n, minChunk, threads, fn)
}

func addInto(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
