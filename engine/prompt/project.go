package prompt

import (
	"math"
	"runtime"

	"talkbox/engine/linalg"
)

// projector computes P(id) = fc2(SiLU(fc1(E[id]) + b1)) + b2 in float32 from
// the stored (bf16) weights, as the official float32 run does (lm spec §3,
// pitfall 10.3: a plain MLP with biases, not SwiGLU).
type projector struct {
	emb      table         // talker.model.text_embedding [text vocab, textH]
	fc1      linalg.Matrix // linear_fc1 [textH, textH], float32 copy
	fc2      linalg.Matrix // linear_fc2 [H, textH], float32 copy
	b1, b2   []float32     // [textH], [H]
	textH, h int
	k        linalg.Kernels
}

// newKernels are the products the projector runs on: OpenBLAS by default.
// Threads 0 leaves OpenBLAS's process-wide thread count to the LM engine.
func newKernels() linalg.Kernels { return linalg.New(0) }

// project returns one H-row per id (ids are range-checked by the caller).
// Each distinct id is computed once, and all of them go through fc1 as one
// matrix product and through fc2 as another, so the two weights (up to
// 16 MiB + 8 MiB in float32) are streamed once per request instead of once
// per token.
//
// There is deliberately no cache of projected rows across requests: measured
// on the synthetic 0.6B over ten English sentences, a 4096-row cache hit 38%
// of the rows but saved only about 0.5 ms of a 5 ms build, because OpenBLAS's
// gemm costs mostly a fixed packing pass over the weights (n=2 rows take
// 3.4 ms, n=24 take 4.8 ms), not its per-row work.
func (p *projector) project(ids []int) [][]float32 {
	out := make([][]float32, len(ids))
	slab := make([]float32, len(ids)*p.h)
	for i := range out {
		out[i] = slab[i*p.h : (i+1)*p.h : (i+1)*p.h]
	}
	first := make(map[int]int, len(ids)) // id -> its first index in ids
	var distinct []int                   // indices into ids to compute
	var repeats []int                    // indices whose id came earlier
	for i, id := range ids {
		if _, ok := first[id]; ok {
			repeats = append(repeats, i)
			continue
		}
		first[id] = i
		distinct = append(distinct, i)
	}
	if len(distinct) > 0 {
		rows := p.compute(ids, distinct)
		for k, i := range distinct {
			copy(out[i], rows[k*p.h:(k+1)*p.h])
		}
	}
	for _, i := range repeats {
		copy(out[i], out[first[ids[i]]])
	}
	return out
}

// compute runs the MLP on the rows ids[at[0]], ids[at[1]], ... and returns
// them as one [len(at), H] slab.
func (p *projector) compute(ids, at []int) []float32 {
	n := len(at)
	// MatMul gives a row the same bits whatever other rows share the call
	// (engine/linalg tests it, for OpenBLAS at this 2048-wide shape), but a
	// lone row would take the MatVec path, whose sums round differently
	// (measured: up to 1e-6 apart); a duplicate second row keeps every P(id)
	// the same whether it was computed alone or in a batch.
	rows := n
	if n == 1 {
		rows = 2
	}
	rowIDs := make([]int, n)
	for k, i := range at {
		rowIDs[k] = ids[i]
	}
	p.emb.prefetch(rowIDs)
	x := make([]float32, rows*p.textH)
	for k := 0; k < rows; k++ {
		p.emb.addRow(rowIDs[min(k, n-1)], x[k*p.textH:(k+1)*p.textH])
	}
	hid := make([]float32, rows*p.textH)
	p.k.MatMul(&p.fc1, p.b1, x, rows, hid)
	// SiLU costs about 20 multiply-adds per element (the exp).
	linalg.ParallelRows(runtime.GOMAXPROCS(0), rows, 20*len(hid), func(lo, hi int) {
		for j := lo * p.textH; j < hi*p.textH; j++ {
			hid[j] = silu(hid[j])
		}
	})
	y := make([]float32, rows*p.h)
	p.k.MatMul(&p.fc2, p.b2, hid, rows, y)
	return y[:n*p.h]
}

func silu(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }
