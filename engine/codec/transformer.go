package codec

import "math"

// kvCache keeps the rotated keys and the values of the last window-1
// positions of one layer: all a later query can see through the sliding
// window (it attends to itself and the 71 positions before it).
type kvCache struct {
	k, v []float32 // rows × (kvHeads·headDim), oldest first
	rows int
}

// transformer runs the pre-transformer on T new time-major rows x [T×latent]
// at positions pos..pos+T-1 and returns [T×latent].
func (d *Decoder) transformer(kv []kvCache, pos int, x []float32, T int) []float32 {
	c := d.cfg
	hd, nh, nkv := c.HeadDim, c.NumAttentionHeads, c.NumKeyValueHeads
	kvw := nkv * hd
	win := c.SlidingWindow
	h := d.inProj.apply(x, T)

	cos := make([]float32, T*hd/2)
	sin := make([]float32, T*hd/2)
	for t := 0; t < T; t++ {
		d.rope.tables(pos+t, cos[t*hd/2:(t+1)*hd/2], sin[t*hd/2:(t+1)*hd/2])
	}

	for li := range d.layers {
		ly := &d.layers[li]
		cache := &kv[li]
		hn := rmsNorm(h, ly.inNorm, T, c.RMSNormEps)
		q := ly.q.apply(hn, T)
		k := ly.k.apply(hn, T)
		v := ly.v.apply(hn, T)
		for t := 0; t < T; t++ {
			cs, sn := cos[t*hd/2:(t+1)*hd/2], sin[t*hd/2:(t+1)*hd/2]
			for hh := 0; hh < nh; hh++ {
				d.rope.rotate(q[t*nh*hd+hh*hd:t*nh*hd+(hh+1)*hd], cs, sn)
			}
			for hh := 0; hh < nkv; hh++ {
				d.rope.rotate(k[t*kvw+hh*hd:t*kvw+(hh+1)*hd], cs, sn)
			}
		}
		// Keys seen by this push: the cached past, then the new rows.
		past := cache.rows
		keys := append(append(make([]float32, 0, (past+T)*kvw), cache.k...), k...)
		vals := append(append(make([]float32, 0, (past+T)*kvw), cache.v...), v...)
		att := windowAttention(q, keys, vals, T, past, nh, nkv, hd, win)
		keep := min(win-1, past+T)
		cache.k = append(cache.k[:0], keys[(past+T-keep)*kvw:]...)
		cache.v = append(cache.v[:0], vals[(past+T-keep)*kvw:]...)
		cache.rows = keep

		o := ly.o.apply(att, T)
		addScaled(h, o, ly.attnScale)

		hn = rmsNorm(h, ly.postNorm, T, c.RMSNormEps)
		g := ly.gate.apply(hn, T)
		u := ly.up.apply(hn, T)
		for i := range g {
			g[i] = silu(g[i]) * u[i]
		}
		m := ly.down.apply(g, T)
		addScaled(h, m, ly.mlpScale)
	}
	h = rmsNorm(h, d.finalNorm, T, c.RMSNormEps)
	return d.outProj.apply(h, T)
}

// addScaled does h += scale ⊙ y row by row (LayerScale on a residual branch).
func addScaled(h, y, scale []float32) {
	C := len(scale)
	for i := range h {
		h[i] += scale[i%C] * y[i]
	}
}

// windowAttention is causal sliding-window attention, shared by the decoder
// and the encoder transformers: query row t (of T new rows) sits at position
// past+t of keys/vals and attends to the win positions ending there. Query
// heads share key/value heads in groups of nh/nkv. q holds T rows of nh*hd;
// keys and vals hold past+T rows of nkv*hd. It returns T rows of nh*hd.
func windowAttention(q, keys, vals []float32, T, past, nh, nkv, hd, win int) []float32 {
	scale := float32(1 / math.Sqrt(float64(hd)))
	kvw := nkv * hd
	group := nh / nkv
	att := make([]float32, T*nh*hd)
	parallelRows(T*nh, hd*min(win, past+T), func(i0, i1 int) {
		scores := make([]float32, win)
		for i := i0; i < i1; i++ {
			t, hh := i/nh, i%nh
			kh := hh / group
			qv := q[t*nh*hd+hh*hd : t*nh*hd+(hh+1)*hd]
			last := past + t // index of this position in keys
			first := max(0, last-win+1)
			mx := float32(math.Inf(-1))
			for j := first; j <= last; j++ {
				s := dot(qv, keys[j*kvw+kh*hd:j*kvw+(kh+1)*hd]) * scale
				scores[j-first] = s
				mx = max(mx, s)
			}
			var sum float32
			for j := first; j <= last; j++ {
				e := expf(scores[j-first] - mx)
				scores[j-first] = e
				sum += e
			}
			out := att[t*nh*hd+hh*hd : t*nh*hd+(hh+1)*hd]
			for j := first; j <= last; j++ {
				p := scores[j-first] / sum
				vr := vals[j*kvw+kh*hd : j*kvw+(kh+1)*hd]
				for e := range out {
					out[e] += p * vr[e]
				}
			}
		}
	})
	return att
}
