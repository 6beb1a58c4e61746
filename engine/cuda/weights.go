package cuda

/*
#include <stdlib.h>
#include "loader.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"talkbox/engine/backend"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
)

// hostWeights is the tb_weights description handed to tb_create: C memory for
// the structs and pointer tables, bf16 data either in the checkpoint mapping
// or (for non-bf16 files) in pinned Go slices. free releases all of it.
type hostWeights struct {
	w     *C.tb_weights
	cmem  []unsafe.Pointer
	pin   runtime.Pinner
	keep  [][]uint16
	model *model.Model
}

func (h *hostWeights) calloc(n, size int) unsafe.Pointer {
	p := C.calloc(C.size_t(n), C.size_t(size))
	h.cmem = append(h.cmem, p)
	return p
}

func (h *hostWeights) free() {
	h.pin.Unpin()
	for _, p := range h.cmem {
		C.free(p)
	}
	h.cmem, h.keep = nil, nil
}

// tensor returns a pointer to the bf16 data of a checkpoint tensor.
func (h *hostWeights) tensor(name string) (*C.uint16_t, error) {
	f := h.model.LM
	info, raw, err := f.Raw(name)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", f.Path, err)
	}
	var data []uint16
	if info.DType == safetensors.BF16 {
		data, err = f.BF16(name)
	} else {
		var v []float32
		v, err = f.F32(name)
		if err == nil {
			data = make([]uint16, len(v))
			for i, x := range v {
				data[i] = safetensors.F32ToBF16(x)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", f.Path, err)
	}
	if len(data) == 0 || len(raw) == 0 {
		return nil, fmt.Errorf("cuda: %s: tensor %s is empty", f.Path, name)
	}
	h.keep = append(h.keep, data)
	h.pin.Pin(&data[0]) // a no-op for the file mapping, required for converted copies
	return (*C.uint16_t)(unsafe.Pointer(&data[0])), nil
}

func stackDims(hidden, inter, layers, heads, kv, headDim, vocab int, eps, theta float64) C.tb_stack_dims {
	return C.tb_stack_dims{hidden: C.int(hidden), intermediate: C.int(inter), layers: C.int(layers), heads: C.int(heads),
		kv_heads: C.int(kv), head_dim: C.int(headDim), vocab: C.int(vocab), rms_eps: C.float(eps), rope_theta: C.float(theta)}
}

func (h *hostWeights) layers(prefix string, n int) (*C.tb_layer, error) {
	arr := (*C.tb_layer)(h.calloc(n, int(unsafe.Sizeof(C.tb_layer{}))))
	ls := unsafe.Slice(arr, n)
	for l := 0; l < n; l++ {
		p := model.LayerPrefix(prefix, l)
		dst := &ls[l]
		for _, f := range []struct {
			name string
			ptr  **C.uint16_t
		}{
			{model.LayerInputNorm, &dst.input_norm}, {model.LayerPostNorm, &dst.post_norm},
			{model.LayerQ, &dst.q}, {model.LayerK, &dst.k}, {model.LayerV, &dst.v},
			{model.LayerO, &dst.o}, {model.LayerQNorm, &dst.q_norm}, {model.LayerKNorm, &dst.k_norm},
			{model.LayerGate, &dst.gate}, {model.LayerUp, &dst.up}, {model.LayerDown, &dst.down},
		} {
			ptr, err := h.tensor(p + f.name)
			if err != nil {
				return nil, err
			}
			*f.ptr = ptr
		}
	}
	return arr, nil
}

// buildWeights describes m's LM tensors for tb_create. The caller must call
// free once the engine exists (the library copies everything to the GPU).
func buildWeights(m *model.Model, spec backend.Spec) (*hostWeights, error) {
	t := m.Config.Talker
	cp := t.CodePredictor
	h := &hostWeights{model: m}
	h.w = (*C.tb_weights)(h.calloc(1, int(unsafe.Sizeof(C.tb_weights{}))))
	w := h.w
	w.talker = stackDims(t.HiddenSize, t.IntermediateSize, t.NumHiddenLayers, t.NumAttentionHeads, t.NumKeyValueHeads,
		t.HeadDim, t.VocabSize, t.RMSNormEps, t.RopeTheta)
	w.predictor = stackDims(cp.HiddenSize, cp.IntermediateSize, cp.NumHiddenLayers, cp.NumAttentionHeads, cp.NumKeyValueHeads,
		cp.HeadDim, cp.VocabSize, cp.RMSNormEps, cp.RopeTheta)
	w.num_groups = C.int(t.NumCodeGroups)
	w.codec_eos = C.int(spec.Rules.EOS)
	w.suppress_from = C.int(spec.Rules.SuppressFrom)
	w.min_new_tokens = C.int(spec.Rules.MinNewTokens)
	var err error
	fail := func(e error) (*hostWeights, error) { h.free(); return nil, e }
	if w.talker_layers, err = h.layers(model.TalkerStack, t.NumHiddenLayers); err != nil {
		return fail(err)
	}
	if w.predictor_layers, err = h.layers(model.PredictorStack, cp.NumHiddenLayers); err != nil {
		return fail(err)
	}
	for _, f := range []struct {
		name string
		ptr  **C.uint16_t
	}{
		{model.StackNorm(model.TalkerStack), &w.talker_norm}, {model.TensorCodecHead, &w.codec_head},
		{model.TensorCodecEmbedding, &w.codec_embedding}, {model.StackNorm(model.PredictorStack), &w.predictor_norm},
	} {
		if *f.ptr, err = h.tensor(f.name); err != nil {
			return fail(err)
		}
	}
	n := t.NumCodeGroups - 1
	ptrSize := int(unsafe.Sizeof((*C.uint16_t)(nil)))
	heads := (**C.uint16_t)(h.calloc(n, ptrSize))
	embs := (**C.uint16_t)(h.calloc(n, ptrSize))
	hs, es := unsafe.Slice(heads, n), unsafe.Slice(embs, n)
	for g := 0; g < n; g++ {
		if hs[g], err = h.tensor(model.PredictorHead(g)); err != nil {
			return fail(err)
		}
		if es[g], err = h.tensor(model.PredictorEmbedding(g)); err != nil {
			return fail(err)
		}
	}
	w.predictor_heads = heads
	w.predictor_embeddings = embs
	if cp.HiddenSize != t.HiddenSize {
		if w.mtp_proj_weight, err = h.tensor(model.TensorMTPProj); err != nil {
			return fail(err)
		}
		if w.mtp_proj_bias, err = h.tensor(model.TensorMTPProjBias); err != nil {
			return fail(err)
		}
	}
	if err := h.textProjection(t.TextHiddenSize); err != nil {
		return fail(err)
	}
	return h, nil
}

// textProjection describes the talker's text projection for tb_project_text
// when the checkpoint stores all four of its tensors as bf16 (the released
// checkpoints do): the GPU then multiplies exactly the weights the CPU
// prompt builder multiplies. Any other dtype would be rounded to bf16 here,
// so such a projection stays on the CPU (text_hidden 0, LM.CanProjectText
// false).
func (h *hostWeights) textProjection(textH int) error {
	w := h.w
	parts := []struct {
		name string
		ptr  **C.uint16_t
	}{
		{model.TensorTextFC1, &w.text_fc1}, {model.TensorTextFC1Bias, &w.text_fc1_bias},
		{model.TensorTextFC2, &w.text_fc2}, {model.TensorTextFC2Bias, &w.text_fc2_bias},
	}
	for _, p := range parts {
		if info, ok := h.model.LM.Info(p.name); !ok || info.DType != safetensors.BF16 || textH <= 0 {
			return nil
		}
	}
	for _, p := range parts {
		ptr, err := h.tensor(p.name)
		if err != nil {
			return err
		}
		*p.ptr = ptr
	}
	w.text_hidden = C.int(textH)
	return nil
}
