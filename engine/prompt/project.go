package prompt

import (
	"log/slog"
	"sync/atomic"

	"talkbox/engine/cores"
	"talkbox/engine/linalg"
	"talkbox/engine/swiglu"
)

// TextProjector runs the text projection on an accelerator: for rows rows of
// x (rows x textH floats, looked-up text-embedding rows) it returns rows x H
// floats of fc2(SiLU(fc1 x + b1)) + b2, computed in float32 from the same
// weights. A row's result should not depend on the other rows of the call.
// It reads x only during the call, the result becomes the caller's, and it
// must be safe for concurrent use. engine/cuda's LM is one.
type TextProjector interface {
	ProjectText(x []float32, rows, textH int) ([]float32, error)
}

// projector computes P(id) = fc2(SiLU(fc1(E[id]) + b1)) + b2 in float32 from
// the stored (bf16) weights, as the official float32 run does
// (docs/design/qwen3-tts-lm.md §10.3: a plain MLP with biases, not SwiGLU).
//
// With an accelerator set (Builder.SetTextProjector: the CUDA LM does it) the
// MLP runs there: on the GPU host the CPU products took about 7 ms of a
// 23 ms time to first audio. The CPU path stays the reference, the fallback
// when the accelerator fails, and what New uses for P(tts_bos/eos/pad).
type projector struct {
	emb      table         // talker.model.text_embedding [text vocab, textH]
	fc1      linalg.Matrix // linear_fc1 [textH, textH], float32 copy
	fc2      linalg.Matrix // linear_fc2 [H, textH], float32 copy
	b1, b2   []float32     // [textH], [H]
	textH, h int
	k        linalg.Kernels
	accel    atomic.Pointer[accelerator] // nil: the CPU
}

// accelerator boxes a TextProjector for atomic.Pointer.
type accelerator struct{ p TextProjector }

// newKernels are the products the projector runs on: OpenBLAS by default.
// Threads 0 leaves OpenBLAS's process-wide thread count to the LM engine.
func newKernels() linalg.Kernels { return linalg.New(0) }

// project returns one H-row per id (ids are range-checked by the caller).
// Each distinct id is computed once, and all of them go through fc1 as one
// matrix product and through fc2 as another (on the CPU or in one
// accelerator call), so the two weights (up to 16 MiB + 8 MiB in float32)
// are streamed once per request instead of once per token.
//
// There is deliberately no cache of projected rows across requests: measured
// on the synthetic 0.6B over ten English sentences, a 4096-row cache hit 38%
// of the rows but saved only about 0.5 ms of a 5 ms build, because OpenBLAS's
// gemm costs mostly a fixed packing pass over the weights (n=2 rows take
// 3.4 ms, n=24 take 4.8 ms), not its per-row work. With the GPU doing the
// products such a cache would save even less.
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
	rowIDs := make([]int, n)
	for k, i := range at {
		rowIDs[k] = ids[i]
	}
	p.emb.prefetch(rowIDs)
	// One spare row for the CPU's lone-row case below.
	x := make([]float32, n*p.textH, (n+1)*p.textH)
	for k, id := range rowIDs {
		p.emb.addRow(id, x[k*p.textH:(k+1)*p.textH])
	}
	if a := p.accel.Load(); a != nil {
		// The accelerator's sums do not depend on the batch (engine/cuda:
		// one accumulator per row), so no duplicate row is needed there. A
		// failure falls back to the CPU: the prompt stays right, and the
		// log says why it was slower (Build's callers expect errors about
		// the request, not about a device).
		y, err := a.p.ProjectText(x, n, p.textH)
		if err == nil && len(y) == n*p.h {
			return y
		}
		if err == nil {
			slog.Warn("prompt: text projection accelerator returned the wrong size; using the CPU", "values", len(y), "want", n*p.h)
		} else {
			slog.Warn("prompt: text projection accelerator failed; using the CPU", "err", err)
		}
	}
	return p.mlp(x, n)
}

// mlp is the CPU path of compute: the MLP on the n rows of x, which may
// have spare capacity for one row.
func (p *projector) mlp(x []float32, n int) []float32 {
	// MatMul gives a row the same bits whatever other rows share the call
	// (engine/linalg tests it, for OpenBLAS at this 2048-wide shape), but a
	// lone row would take the MatVec path, whose sums round differently
	// (measured: up to 1e-6 apart); a duplicate second row keeps every P(id)
	// the same whether it was computed alone or in a batch.
	rows := n
	if n == 1 {
		rows = 2
		x = append(x, x...)
	}
	hid := make([]float32, rows*p.textH)
	p.k.MatMul(&p.fc1, p.b1, x, rows, hid)
	// SiLU costs about 20 multiply-adds per element (the exp).
	linalg.ParallelRows(cores.Limit(), rows, 20*len(hid), func(lo, hi int) {
		for j := lo * p.textH; j < hi*p.textH; j++ {
			hid[j] = swiglu.Silu(hid[j])
		}
	})
	y := make([]float32, rows*p.h)
	p.k.MatMul(&p.fc2, p.b2, hid, rows, y)
	return y[:n*p.h]
}
