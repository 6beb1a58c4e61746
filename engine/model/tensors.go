package model

import (
	"errors"
	"fmt"
	"strings"

	"talkbox/engine/safetensors"
)

// TensorSpec is one tensor a model needs, with its exact shape.
type TensorSpec struct {
	Name  string
	Shape []int
}

// ErrIncompleteCheckpoint is wrapped when tensors are missing or mis-shaped.
var ErrIncompleteCheckpoint = errors.New("incomplete checkpoint")

func spec(name string, shape ...int) TensorSpec { return TensorSpec{Name: name, Shape: shape} }

// The language model's tensor names. The checks below, both backends'
// loaders (engine/cpu, engine/cuda) and the prompt builder read them here.
const (
	// TalkerStack and PredictorStack prefix the two decoder stacks' tensors
	// (LayerPrefix, StackNorm).
	TalkerStack    = "talker.model."
	PredictorStack = "talker.code_predictor.model."

	TensorTextEmbedding  = "talker.model.text_embedding.weight"
	TensorTextFC1        = "talker.text_projection.linear_fc1.weight"
	TensorTextFC1Bias    = "talker.text_projection.linear_fc1.bias"
	TensorTextFC2        = "talker.text_projection.linear_fc2.weight"
	TensorTextFC2Bias    = "talker.text_projection.linear_fc2.bias"
	TensorCodecEmbedding = "talker.model.codec_embedding.weight" // talker codec embedding C, [vocab, H]
	TensorCodecHead      = "talker.codec_head.weight"            // group-0 head, [vocab, H]
	// TensorMTPProj and TensorMTPProjBias exist when the predictor is
	// narrower than the talker (1.7B): talker-width rows enter it through them.
	TensorMTPProj     = "talker.code_predictor.small_to_mtp_projection.weight"
	TensorMTPProjBias = "talker.code_predictor.small_to_mtp_projection.bias"
)

// Tensor names inside one Qwen3 decoder layer, after LayerPrefix.
const (
	LayerInputNorm = "input_layernorm.weight"
	LayerPostNorm  = "post_attention_layernorm.weight"
	LayerQ         = "self_attn.q_proj.weight"
	LayerK         = "self_attn.k_proj.weight"
	LayerV         = "self_attn.v_proj.weight"
	LayerO         = "self_attn.o_proj.weight"
	LayerQNorm     = "self_attn.q_norm.weight"
	LayerKNorm     = "self_attn.k_norm.weight"
	LayerGate      = "mlp.gate_proj.weight"
	LayerUp        = "mlp.up_proj.weight"
	LayerDown      = "mlp.down_proj.weight"
)

// LayerPrefix is the name prefix of layer l of a stack (TalkerStack or PredictorStack).
func LayerPrefix(stack string, l int) string { return fmt.Sprintf("%slayers.%d.", stack, l) }

// StackNorm is a stack's final RMSNorm weight.
func StackNorm(stack string) string { return stack + "norm.weight" }

// PredictorEmbedding is the code predictor's embedding of group g+1 (g = 0..14), [predictor vocab, H].
func PredictorEmbedding(g int) string {
	return fmt.Sprintf("%scodec_embedding.%d.weight", PredictorStack, g)
}

// PredictorHead is the code predictor's head of group g+1 (g = 0..14), [predictor vocab, predictor hidden].
func PredictorHead(g int) string { return fmt.Sprintf("talker.code_predictor.lm_head.%d.weight", g) }

func qwen3Layer(prefix string, hidden, inter, heads, kvHeads, headDim int) []TensorSpec {
	return []TensorSpec{
		spec(prefix+LayerInputNorm, hidden),
		spec(prefix+LayerPostNorm, hidden),
		spec(prefix+LayerQ, heads*headDim, hidden),
		spec(prefix+LayerK, kvHeads*headDim, hidden),
		spec(prefix+LayerV, kvHeads*headDim, hidden),
		spec(prefix+LayerO, hidden, heads*headDim),
		spec(prefix+LayerQNorm, headDim),
		spec(prefix+LayerKNorm, headDim),
		spec(prefix+LayerGate, inter, hidden),
		spec(prefix+LayerUp, inter, hidden),
		spec(prefix+LayerDown, hidden, inter),
	}
}

// LMTensors lists every tensor of model.safetensors that inference needs
// (docs/design/qwen3-tts-lm.md §1.4; the speaker encoder too for Base models).
func LMTensors(c *Config) []TensorSpec {
	t := c.Talker
	cp := t.CodePredictor
	H := t.HiddenSize
	out := []TensorSpec{
		spec(TensorTextEmbedding, t.TextVocabSize, t.TextHiddenSize),
		spec(TensorTextFC1, t.TextHiddenSize, t.TextHiddenSize),
		spec(TensorTextFC1Bias, t.TextHiddenSize),
		spec(TensorTextFC2, H, t.TextHiddenSize),
		spec(TensorTextFC2Bias, H),
		spec(TensorCodecEmbedding, t.VocabSize, H),
		spec(StackNorm(TalkerStack), H),
		spec(TensorCodecHead, t.VocabSize, H),
		spec(StackNorm(PredictorStack), cp.HiddenSize),
	}
	for l := 0; l < t.NumHiddenLayers; l++ {
		out = append(out, qwen3Layer(LayerPrefix(TalkerStack, l), H, t.IntermediateSize, t.NumAttentionHeads, t.NumKeyValueHeads, t.HeadDim)...)
	}
	for l := 0; l < cp.NumHiddenLayers; l++ {
		out = append(out, qwen3Layer(LayerPrefix(PredictorStack, l), cp.HiddenSize, cp.IntermediateSize, cp.NumAttentionHeads, cp.NumKeyValueHeads, cp.HeadDim)...)
	}
	for g := 0; g < t.NumCodeGroups-1; g++ {
		out = append(out, spec(PredictorEmbedding(g), cp.VocabSize, H), spec(PredictorHead(g), cp.VocabSize, cp.HiddenSize))
	}
	if cp.HiddenSize != H {
		out = append(out, spec(TensorMTPProj, cp.HiddenSize, H), spec(TensorMTPProjBias, cp.HiddenSize))
	}
	if c.TTSModelType == TypeBase && c.SpeakerEncoder != nil {
		out = append(out, SpeakerEncoderTensors(c.SpeakerEncoder)...)
	}
	return out
}

// SpeakerEncoderTensors lists the ECAPA-TDNN tensors
// (docs/design/qwen3-tts-codec.md §6).
func SpeakerEncoderTensors(s *SpeakerEncCfg) []TensorSpec {
	if len(s.EncChannels) != 5 || len(s.EncKernelSizes) != 5 || s.EncRes2NetScale <= 0 {
		return []TensorSpec{spec("speaker_encoder (config: enc_channels/enc_kernel_sizes must have 5 entries)")}
	}
	ch, k := s.EncChannels, s.EncKernelSizes
	p := "speaker_encoder."
	out := []TensorSpec{
		spec(p+"blocks.0.conv.weight", ch[0], s.MelDim, k[0]), spec(p+"blocks.0.conv.bias", ch[0]),
	}
	for b := 1; b <= 3; b++ {
		bp := fmt.Sprintf("%sblocks.%d.", p, b)
		sub := ch[b] / s.EncRes2NetScale
		out = append(out,
			spec(bp+"tdnn1.conv.weight", ch[b], ch[b-1], 1), spec(bp+"tdnn1.conv.bias", ch[b]),
			spec(bp+"tdnn2.conv.weight", ch[b], ch[b], 1), spec(bp+"tdnn2.conv.bias", ch[b]),
			spec(bp+"se_block.conv1.weight", s.EncSEChannels, ch[b], 1), spec(bp+"se_block.conv1.bias", s.EncSEChannels),
			spec(bp+"se_block.conv2.weight", ch[b], s.EncSEChannels, 1), spec(bp+"se_block.conv2.bias", ch[b]))
		for r := 0; r < s.EncRes2NetScale-1; r++ {
			out = append(out,
				spec(fmt.Sprintf("%sres2net_block.blocks.%d.conv.weight", bp, r), sub, sub, k[b]),
				spec(fmt.Sprintf("%sres2net_block.blocks.%d.conv.bias", bp, r), sub))
		}
	}
	out = append(out,
		spec(p+"mfa.conv.weight", ch[4], ch[1]+ch[2]+ch[3], k[4]), spec(p+"mfa.conv.bias", ch[4]),
		spec(p+"asp.tdnn.conv.weight", s.EncAttentionChannels, 3*ch[4], 1), spec(p+"asp.tdnn.conv.bias", s.EncAttentionChannels),
		spec(p+"asp.conv.weight", ch[4], s.EncAttentionChannels, 1), spec(p+"asp.conv.bias", ch[4]),
		spec(p+"fc.weight", s.EncDim, 2*ch[4], 1), spec(p+"fc.bias", s.EncDim))
	return out
}

// CodecDecoderTensors lists the speech-tokenizer decoder tensors
// (docs/design/qwen3-tts-codec.md §2).
func CodecDecoderTensors(c *CodecConfig) []TensorSpec {
	d := c.Decoder
	cbDim := d.CodebookDim / 2
	p := "decoder."
	var out []TensorSpec
	for _, part := range []string{"rvq_first", "rvq_rest"} {
		n := 1
		if part == "rvq_rest" {
			n = d.NumQuantizers - 1
		}
		for q := 0; q < n; q++ {
			cb := fmt.Sprintf("%squantizer.%s.vq.layers.%d._codebook.", p, part, q)
			out = append(out, spec(cb+"embedding_sum", d.CodebookSize, cbDim), spec(cb+"cluster_usage", d.CodebookSize))
		}
		out = append(out, spec(p+"quantizer."+part+".output_proj.weight", d.CodebookDim, cbDim, 1))
	}
	out = append(out,
		spec(p+"pre_conv.conv.weight", d.LatentDim, d.CodebookDim, 3), spec(p+"pre_conv.conv.bias", d.LatentDim),
		spec(p+"pre_transformer.input_proj.weight", d.HiddenSize, d.LatentDim), spec(p+"pre_transformer.input_proj.bias", d.HiddenSize),
		spec(p+"pre_transformer.output_proj.weight", d.LatentDim, d.HiddenSize), spec(p+"pre_transformer.output_proj.bias", d.LatentDim),
		spec(p+"pre_transformer.norm.weight", d.HiddenSize))
	attn := d.NumAttentionHeads * d.HeadDim
	kv := d.NumKeyValueHeads * d.HeadDim
	for l := 0; l < d.NumHiddenLayers; l++ {
		lp := fmt.Sprintf("%spre_transformer.layers.%d.", p, l)
		out = append(out,
			spec(lp+"input_layernorm.weight", d.HiddenSize), spec(lp+"post_attention_layernorm.weight", d.HiddenSize),
			spec(lp+"self_attn.q_proj.weight", attn, d.HiddenSize), spec(lp+"self_attn.k_proj.weight", kv, d.HiddenSize),
			spec(lp+"self_attn.v_proj.weight", kv, d.HiddenSize), spec(lp+"self_attn.o_proj.weight", d.HiddenSize, attn),
			spec(lp+"self_attn_layer_scale.scale", d.HiddenSize), spec(lp+"mlp_layer_scale.scale", d.HiddenSize),
			spec(lp+"mlp.gate_proj.weight", d.IntermediateSize, d.HiddenSize), spec(lp+"mlp.up_proj.weight", d.IntermediateSize, d.HiddenSize),
			spec(lp+"mlp.down_proj.weight", d.HiddenSize, d.IntermediateSize))
	}
	for i, r := range d.UpsamplingRatios {
		up := fmt.Sprintf("%supsample.%d.", p, i)
		L := d.LatentDim
		out = append(out,
			spec(up+"0.conv.weight", L, L, r), spec(up+"0.conv.bias", L),
			spec(up+"1.dwconv.conv.weight", L, 1, 7), spec(up+"1.dwconv.conv.bias", L),
			spec(up+"1.norm.weight", L), spec(up+"1.norm.bias", L),
			spec(up+"1.pwconv1.weight", 4*L, L), spec(up+"1.pwconv1.bias", 4*L),
			spec(up+"1.pwconv2.weight", L, 4*L), spec(up+"1.pwconv2.bias", L), spec(up+"1.gamma", L))
	}
	out = append(out, spec(p+"decoder.0.conv.weight", d.DecoderDim, d.LatentDim, 7), spec(p+"decoder.0.conv.bias", d.DecoderDim))
	ch := d.DecoderDim
	for b, r := range d.UpsampleRates {
		bp := fmt.Sprintf("%sdecoder.%d.block.", p, b+1)
		outCh := ch / 2
		out = append(out, spec(bp+"0.alpha", ch), spec(bp+"0.beta", ch),
			spec(bp+"1.conv.weight", ch, outCh, 2*r), spec(bp+"1.conv.bias", outCh))
		for u := 2; u <= 4; u++ {
			un := fmt.Sprintf("%s%d.", bp, u)
			out = append(out,
				spec(un+"act1.alpha", outCh), spec(un+"act1.beta", outCh), spec(un+"act2.alpha", outCh), spec(un+"act2.beta", outCh),
				spec(un+"conv1.conv.weight", outCh, outCh, 7), spec(un+"conv1.conv.bias", outCh),
				spec(un+"conv2.conv.weight", outCh, outCh, 1), spec(un+"conv2.conv.bias", outCh))
		}
		ch = outCh
	}
	n := len(d.UpsampleRates)
	out = append(out,
		spec(fmt.Sprintf("%sdecoder.%d.alpha", p, n+1), ch), spec(fmt.Sprintf("%sdecoder.%d.beta", p, n+1), ch),
		spec(fmt.Sprintf("%sdecoder.%d.conv.weight", p, n+2), 1, ch, 7), spec(fmt.Sprintf("%sdecoder.%d.conv.bias", p, n+2), 1))
	return out
}

// CheckTensors verifies that f holds every tensor in want with the exact shape
// and a float dtype. It reports every problem in one error that wraps
// ErrIncompleteCheckpoint and names the file and each tensor.
func CheckTensors(f *safetensors.File, want []TensorSpec) error {
	var missing, wrong []string
	for _, w := range want {
		info, ok := f.Info(w.Name)
		if !ok {
			missing = append(missing, w.Name)
			continue
		}
		switch {
		case !equalShape(info.Shape, w.Shape):
			wrong = append(wrong, fmt.Sprintf("%s has shape %v, want %v", w.Name, info.Shape, w.Shape))
		case info.DType == safetensors.I64:
			wrong = append(wrong, fmt.Sprintf("%s is %s, want a float type", w.Name, info.DType))
		}
	}
	if len(missing) == 0 && len(wrong) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", f.Path)
	if len(missing) > 0 {
		fmt.Fprintf(&b, " %d missing tensor(s): %s;", len(missing), FirstFew(missing, ", "))
	}
	if len(wrong) > 0 {
		fmt.Fprintf(&b, " %d wrong tensor(s): %s;", len(wrong), FirstFew(wrong, "; "))
	}
	return fmt.Errorf("%w: %s", ErrIncompleteCheckpoint, strings.TrimSuffix(b.String(), ";"))
}

// MaxListed is how many problems an error message names before it counts
// the rest: a broken checkpoint can miss thousands of tensors.
const MaxListed = 5

// FirstFew joins the first MaxListed items and says how many were left out.
func FirstFew(items []string, sep string) string {
	if len(items) <= MaxListed {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s%s… and %d more", strings.Join(items[:MaxListed], sep), sep, len(items)-MaxListed)
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
