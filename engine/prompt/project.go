package prompt

import (
	"math"
	"runtime"
	"sync"
)

// projector computes P(id) = fc2(SiLU(fc1(E[id]) + b1)) + b2 in float32 from
// the stored (bf16) weights, as the official float32 run does (lm spec §3,
// pitfall 10.3: a plain MLP with biases, not SwiGLU).
type projector struct {
	emb      table     // talker.model.text_embedding [text vocab, textH]
	w1, b1   []float32 // linear_fc1 [textH, textH], [textH]
	w2, b2   []float32 // linear_fc2 [H, textH], [H]
	textH, h int
}

// project returns one H-row per id (ids are range-checked by the caller).
// Tokens are independent, so they are spread over the CPU cores.
func (p *projector) project(ids []int) [][]float32 {
	out := make([][]float32, len(ids))
	slab := make([]float32, len(ids)*p.h)
	for i := range out {
		out[i] = slab[i*p.h : (i+1)*p.h : (i+1)*p.h]
	}
	workers := min(runtime.GOMAXPROCS(0), len(ids))
	if workers <= 1 {
		p.projectRange(ids, out)
		return out
	}
	var wg sync.WaitGroup
	per := (len(ids) + workers - 1) / workers
	for start := 0; start < len(ids); start += per {
		end := min(start+per, len(ids))
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.projectRange(ids[start:end], out[start:end])
		}()
	}
	wg.Wait()
	return out
}

func (p *projector) projectRange(ids []int, out [][]float32) {
	x := make([]float32, p.textH)
	hid := make([]float32, p.textH)
	for i, id := range ids {
		clear(x)
		p.emb.addRow(id, x)
		matVec(p.w1, p.b1, x, hid)
		for j, v := range hid {
			hid[j] = silu(v)
		}
		matVec(p.w2, p.b2, hid, out[i])
	}
}

// matVec sets y = W x + b for W stored row-major [len(y), len(x)]. Four
// partial sums keep the float32 rounding error low on 2048-long rows.
func matVec(w, b, x, y []float32) {
	n := len(x)
	for r := range y {
		row := w[r*n : (r+1)*n : (r+1)*n]
		var s0, s1, s2, s3 float32
		j := 0
		for ; j+4 <= n; j += 4 {
			s0 += row[j] * x[j]
			s1 += row[j+1] * x[j+1]
			s2 += row[j+2] * x[j+2]
			s3 += row[j+3] * x[j+3]
		}
		for ; j < n; j++ {
			s0 += row[j] * x[j]
		}
		y[r] = (s0 + s1) + (s2 + s3) + b[r]
	}
}

func silu(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }
