package cudacodec

/*
#include "loader.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"talkbox/engine/codec"
)

// hostWeights fills the C description of the decoder with pointers into the
// CPU decoder's own (pinned) weight slices, so nothing is copied on the host
// before tbc_create uploads them.
type hostWeights struct {
	w      *C.tbc_weights
	pinner runtime.Pinner
	err    error
}

// f pins a slice and returns its C pointer (nil for an empty slice, which
// the library reports as a missing tensor). n is the length the library will
// read; a shorter slice is an error rather than an out-of-bounds read.
func (h *hostWeights) f(v []float32, n int, what string) *C.float {
	if len(v) == 0 {
		return nil
	}
	if len(v) < n && h.err == nil {
		h.err = fmt.Errorf("cudacodec: %s has %d values, want %d", what, len(v), n)
		return nil
	}
	h.pinner.Pin(&v[0])
	return (*C.float)(unsafe.Pointer(&v[0]))
}

func (h *hostWeights) conv(c codec.HostConv, what string) C.tbc_conv {
	return C.tbc_conv{w: h.f(c.W, c.Out*c.K*c.In, what), b: h.f(c.B, c.Out, what),
		in: C.int(c.In), out: C.int(c.Out), k: C.int(c.K), dil: C.int(c.Dil)}
}

func (h *hostWeights) linear(l codec.HostLinear, what string) C.tbc_conv {
	return h.conv(codec.HostConv{W: l.W, B: l.B, In: l.In, Out: l.Out, K: 1, Dil: 1}, what)
}

func (h *hostWeights) trans(t codec.HostTransConv, what string) C.tbc_transconv {
	return C.tbc_transconv{w: h.f(t.W, t.Stride*t.Out*t.Taps*t.In, what), b: h.f(t.B, t.Stride*t.Out, what),
		in: C.int(t.In), out: C.int(t.Out), stride: C.int(t.Stride), taps: C.int(t.Taps)}
}

func (h *hostWeights) snake(s codec.HostSnake, ch int, what string) C.tbc_snake {
	return C.tbc_snake{a: h.f(s.A, ch, what), ib: h.f(s.IB, ch, what)}
}

// newHostWeights describes d for the library. Call unpin when tbc_create
// has returned.
func newHostWeights(d *codec.Decoder) (*hostWeights, error) {
	cfg := d.Config()
	hw := d.HostWeights()
	switch {
	case len(hw.Codebooks) != C.TBC_GROUPS:
		return nil, fmt.Errorf("cudacodec: %d codebooks, want %d", len(hw.Codebooks), C.TBC_GROUPS)
	case len(hw.Layers) > C.TBC_MAX_LAYERS || len(hw.Upsample) > C.TBC_MAX_UP || len(hw.Blocks) > C.TBC_MAX_BLOCKS:
		return nil, fmt.Errorf("cudacodec: %d layers, %d upsample stages, %d vocoder blocks exceed the library's %d/%d/%d",
			len(hw.Layers), len(hw.Upsample), len(hw.Blocks), C.TBC_MAX_LAYERS, C.TBC_MAX_UP, C.TBC_MAX_BLOCKS)
	}
	h := &hostWeights{w: new(C.tbc_weights)}
	w := h.w
	cb, hid, lat := hw.CodebookVecDim, cfg.HiddenSize, cfg.LatentDim
	attn, kv := cfg.NumAttentionHeads*cfg.HeadDim, cfg.NumKeyValueHeads*cfg.HeadDim
	w.codebook_size, w.cb_dim, w.codebook_dim = C.int(cfg.CodebookSize), C.int(cb), C.int(cfg.CodebookDim)
	w.latent, w.hidden, w.heads, w.kv_heads = C.int(lat), C.int(hid), C.int(cfg.NumAttentionHeads), C.int(cfg.NumKeyValueHeads)
	w.head_dim, w.intermediate, w.layers = C.int(cfg.HeadDim), C.int(cfg.IntermediateSize), C.int(len(hw.Layers))
	w.window, w.rms_eps = C.int(cfg.SlidingWindow), C.double(cfg.RMSNormEps)
	w.n_up, w.n_blocks = C.int(len(hw.Upsample)), C.int(len(hw.Blocks))
	for q, book := range hw.Codebooks {
		w.codebooks[q] = h.f(book, cfg.CodebookSize*cb, fmt.Sprintf("codebook %d", q))
	}
	w.proj_first = h.f(hw.ProjFirst.W, cfg.CodebookDim*cb, "rvq_first.output_proj")
	w.proj_rest = h.f(hw.ProjRest.W, cfg.CodebookDim*cb, "rvq_rest.output_proj")
	w.pre_conv = h.conv(hw.PreConv, "pre_conv")
	w.in_proj_w, w.in_proj_b = h.f(hw.InProj.W, hid*lat, "input_proj"), h.f(hw.InProj.B, hid, "input_proj")
	w.out_proj_w, w.out_proj_b = h.f(hw.OutProj.W, lat*hid, "output_proj"), h.f(hw.OutProj.B, lat, "output_proj")
	w.final_norm = h.f(hw.FinalNorm, hid, "pre_transformer.norm")
	w.inv_freq = h.f(hw.InvFreq, cfg.HeadDim/2, "rope")
	for i, l := range hw.Layers {
		p := fmt.Sprintf("pre_transformer layer %d", i)
		w.layer[i] = C.tbc_layer{
			in_norm: h.f(l.InNorm, hid, p), post_norm: h.f(l.PostNorm, hid, p),
			attn_scale: h.f(l.AttnScale, hid, p), mlp_scale: h.f(l.MLPScale, hid, p),
			q: h.f(l.Q.W, attn*hid, p), k: h.f(l.K.W, kv*hid, p), v: h.f(l.V.W, kv*hid, p), o: h.f(l.O.W, hid*attn, p),
			gate: h.f(l.Gate.W, cfg.IntermediateSize*hid, p), up: h.f(l.Up.W, cfg.IntermediateSize*hid, p),
			down: h.f(l.Down.W, hid*cfg.IntermediateSize, p),
		}
	}
	for i, u := range hw.Upsample {
		p := fmt.Sprintf("upsample %d", i)
		w.up[i] = C.tbc_upsample{up: h.trans(u.Up, p),
			dw: h.f(u.DW, u.Ch*7, p), dw_b: h.f(u.DWB, u.Ch, p), ln_w: h.f(u.LNW, u.Ch, p), ln_b: h.f(u.LNB, u.Ch, p),
			pw1_w: h.f(u.PW1.W, u.PW1.Out*u.PW1.In, p), pw1_b: h.f(u.PW1.B, u.PW1.Out, p),
			pw2_w: h.f(u.PW2.W, u.PW2.Out*u.PW2.In, p), pw2_b: h.f(u.PW2.B, u.PW2.Out, p),
			gamma: h.f(u.Gamma, u.Ch, p), pw_hidden: C.int(u.PW1.Out)}
	}
	w.voc0 = h.conv(hw.Voc0, "decoder.0")
	ch := hw.Voc0.Out
	for b, blk := range hw.Blocks {
		p := fmt.Sprintf("decoder.%d", b+1)
		cb := C.tbc_block{act: h.snake(blk.Act, ch, p), up: h.trans(blk.Up, p)}
		for u, un := range blk.Units {
			cb.units[u] = C.tbc_unit{act1: h.snake(un.Act1, blk.Up.Out, p), act2: h.snake(un.Act2, blk.Up.Out, p),
				conv1: h.conv(un.Conv1, p), conv2: h.conv(un.Conv2, p)}
		}
		w.block[b] = cb
		ch = blk.Up.Out
	}
	w.final_act = h.snake(hw.Final, ch, "final snake")
	w.final_conv = h.conv(hw.FinalCv, "final conv")
	if h.err != nil {
		h.pinner.Unpin()
		return nil, h.err
	}
	return h, nil
}

func (h *hostWeights) unpin() { h.pinner.Unpin() }
