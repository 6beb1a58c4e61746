package model

import (
	"encoding/json"
	"fmt"

	"talkbox/internal/errtext"
)

// CodecEncoderConfig is speech_tokenizer/config.json's encoder_config, a
// transformers MimiConfig (qwen3-tts-codec.md §5). Only what the encoder
// reads.
type CodecEncoderConfig struct {
	SamplingRate       int     `json:"sampling_rate"`
	AudioChannels      int     `json:"audio_channels"`
	HiddenSize         int     `json:"hidden_size"`
	NumFilters         int     `json:"num_filters"`
	NumResidualLayers  int     `json:"num_residual_layers"`
	UpsamplingRatios   []int   `json:"upsampling_ratios"` // the encoder strides, reversed
	KernelSize         int     `json:"kernel_size"`
	LastKernelSize     int     `json:"last_kernel_size"`
	ResidualKernelSize int     `json:"residual_kernel_size"`
	DilationGrowthRate int     `json:"dilation_growth_rate"`
	Compress           int     `json:"compress"`
	UseCausalConv      bool    `json:"use_causal_conv"`
	UseConvShortcut    bool    `json:"use_conv_shortcut"`
	PadMode            string  `json:"pad_mode"`
	FrameRate          float64 `json:"_frame_rate"`

	NumHiddenLayers   int     `json:"num_hidden_layers"`
	NumAttentionHeads int     `json:"num_attention_heads"`
	NumKeyValueHeads  int     `json:"num_key_value_heads"`
	HeadDim           int     `json:"head_dim"`
	IntermediateSize  int     `json:"intermediate_size"`
	SlidingWindow     int     `json:"sliding_window"`
	RopeTheta         float64 `json:"rope_theta"`
	NormEps           float64 `json:"norm_eps"`
	HiddenAct         string  `json:"hidden_act"`

	NumQuantizers         int `json:"num_quantizers"`
	NumSemanticQuantizers int `json:"num_semantic_quantizers"`
	CodebookSize          int `json:"codebook_size"`
	CodebookDim           int `json:"codebook_dim"`
	VQHiddenDim           int `json:"vector_quantization_hidden_dimension"`
}

// Hop is the samples per SEANet output step (the product of the strides).
func (e CodecEncoderConfig) Hop() int {
	n := 1
	for _, r := range e.UpsamplingRatios {
		n *= r
	}
	return n
}

// EncoderConfig parses and checks encoder_config. The encoder is what the
// released Mimi layout is: causal convs with zero padding, no conv
// shortcut, ELU, GELU MLP, one semantic quantizer.
func (c *CodecConfig) EncoderConfig() (CodecEncoderConfig, error) {
	var e CodecEncoderConfig
	if len(c.Encoder) == 0 {
		return e, fmt.Errorf("%w: speech_tokenizer/config.json has no encoder_config", ErrBadConfig)
	}
	if err := json.Unmarshal(c.Encoder, &e); err != nil {
		return e, fmt.Errorf("%w: speech_tokenizer encoder_config: %s", ErrBadConfig, errtext.Brief(err))
	}
	if e.HeadDim == 0 && e.NumAttentionHeads > 0 {
		e.HeadDim = e.HiddenSize / e.NumAttentionHeads
	}
	if e.VQHiddenDim == 0 {
		e.VQHiddenDim = e.CodebookDim
	}
	if e.PadMode == "" {
		e.PadMode = "constant"
	}
	bad := func(what string) (CodecEncoderConfig, error) {
		return e, fmt.Errorf("%w: speech_tokenizer encoder_config: %s", ErrBadConfig, what)
	}
	switch {
	case e.AudioChannels != 1 || e.HiddenSize <= 0 || e.NumFilters <= 0 || len(e.UpsamplingRatios) == 0 ||
		e.KernelSize <= 0 || e.LastKernelSize <= 0 || e.ResidualKernelSize <= 0 || e.Compress <= 0 || e.NumResidualLayers < 0:
		return bad("missing or non-positive SEANet sizes")
	case !e.UseCausalConv || e.UseConvShortcut || e.PadMode != "constant":
		return bad(fmt.Sprintf("use_causal_conv %v, use_conv_shortcut %v, pad_mode %q: only the released causal, shortcut-free, zero-padded layout is supported",
			e.UseCausalConv, e.UseConvShortcut, e.PadMode))
	case e.NumHiddenLayers < 0 || e.NumAttentionHeads <= 0 || e.NumKeyValueHeads != e.NumAttentionHeads || e.HeadDim <= 0 ||
		e.HeadDim%2 != 0 || e.IntermediateSize <= 0 || e.SlidingWindow <= 0:
		return bad("transformer sizes (heads, head_dim, window) missing or unsupported (no GQA)")
	case e.HiddenAct != "gelu":
		return bad(fmt.Sprintf("hidden_act %q, want gelu", e.HiddenAct))
	case e.NumSemanticQuantizers != 1 || e.NumQuantizers < c.EncoderValidNumQuantizers || e.CodebookSize <= 0 ||
		e.CodebookDim <= 0 || e.VQHiddenDim != e.CodebookDim:
		return bad("quantizer sizes (one semantic quantizer, enough levels, codebook_dim = vector_quantization_hidden_dimension)")
	case c.EncoderValidNumQuantizers <= 0:
		return bad("encoder_valid_num_quantizers missing")
	}
	if e.DilationGrowthRate <= 0 {
		e.DilationGrowthRate = 1
	}
	if e.RopeTheta == 0 {
		e.RopeTheta = 10000
	}
	if e.NormEps == 0 {
		e.NormEps = 1e-5
	}
	return e, nil
}

// encoderConvLayers walks the SEANet layer list in its registration order and
// calls conv for each convolution: the layer index, the role and the shape.
// Layer indices follow transformers' MimiEncoder: conv, then per stride
// residual blocks, ELU, strided conv; then ELU, last conv.
func (e CodecEncoderConfig) encoderConvLayers(fn func(name string, out, in, k int)) {
	idx := 0
	fn(fmt.Sprintf("encoder.encoder.layers.%d.conv", idx), e.NumFilters, e.AudioChannels, e.KernelSize)
	idx++
	scale := 1
	for i := len(e.UpsamplingRatios) - 1; i >= 0; i-- {
		r := e.UpsamplingRatios[i]
		dim := scale * e.NumFilters
		for j := 0; j < e.NumResidualLayers; j++ {
			p := fmt.Sprintf("encoder.encoder.layers.%d.block.", idx)
			fn(p+"1.conv", dim/e.Compress, dim, e.ResidualKernelSize)
			fn(p+"3.conv", dim, dim/e.Compress, 1)
			idx++
		}
		idx++ // ELU
		fn(fmt.Sprintf("encoder.encoder.layers.%d.conv", idx), 2*dim, dim, 2*r)
		idx++
		scale *= 2
	}
	idx++ // ELU
	fn(fmt.Sprintf("encoder.encoder.layers.%d.conv", idx), e.HiddenSize, scale*e.NumFilters, e.LastKernelSize)
}

// CodecEncoderTensors lists the speech-tokenizer encoder tensors
// (qwen3-tts-codec.md §5) as the released checkpoint names them.
func CodecEncoderTensors(e CodecEncoderConfig) []TensorSpec {
	var out []TensorSpec
	e.encoderConvLayers(func(name string, o, i, k int) {
		out = append(out, spec(name+".weight", o, i, k), spec(name+".bias", o))
	})
	H := e.HiddenSize
	for l := 0; l < e.NumHiddenLayers; l++ {
		p := fmt.Sprintf("encoder.encoder_transformer.layers.%d.", l)
		out = append(out,
			spec(p+"input_layernorm.weight", H), spec(p+"input_layernorm.bias", H),
			spec(p+"post_attention_layernorm.weight", H), spec(p+"post_attention_layernorm.bias", H),
			spec(p+"self_attn.q_proj.weight", e.NumAttentionHeads*e.HeadDim, H),
			spec(p+"self_attn.k_proj.weight", e.NumKeyValueHeads*e.HeadDim, H),
			spec(p+"self_attn.v_proj.weight", e.NumKeyValueHeads*e.HeadDim, H),
			spec(p+"self_attn.o_proj.weight", H, e.NumAttentionHeads*e.HeadDim),
			spec(p+"self_attn_layer_scale.scale", H), spec(p+"mlp_layer_scale.scale", H),
			spec(p+"mlp.fc1.weight", e.IntermediateSize, H), spec(p+"mlp.fc2.weight", H, e.IntermediateSize))
	}
	out = append(out, spec("encoder.downsample.conv.weight", H, H, e.DownsampleKernel()))
	for _, q := range []struct {
		name   string
		layers int
	}{{"semantic", e.NumSemanticQuantizers}, {"acoustic", e.NumQuantizers - e.NumSemanticQuantizers}} {
		p := "encoder.quantizer." + q.name + "_residual_vector_quantizer."
		out = append(out, spec(p+"input_proj.weight", e.VQHiddenDim, H, 1), spec(p+"output_proj.weight", H, e.VQHiddenDim, 1))
		for l := 0; l < q.layers; l++ {
			lp := fmt.Sprintf("%slayers.%d.codebook.", p, l)
			out = append(out, spec(lp+"embed_sum", e.CodebookSize, e.CodebookDim), spec(lp+"cluster_usage", e.CodebookSize),
				spec(lp+"initialized", 1))
		}
	}
	return out
}

// DownsampleKernel is Mimi's downsample conv width, 2·(SEANet rate / frame
// rate) with stride 2 (4 as released: 25 Hz to 12.5 Hz).
func (e CodecEncoderConfig) DownsampleKernel() int {
	if e.FrameRate <= 0 {
		return 4
	}
	return 2 * int(float64(e.SamplingRate)/float64(e.Hop())/e.FrameRate)
}

// EncoderConvs lists the SEANet convolutions in order (name prefix, out, in, k)
// for the encoder's loader.
func (e CodecEncoderConfig) EncoderConvs() []ConvSpec {
	var out []ConvSpec
	e.encoderConvLayers(func(name string, o, i, k int) { out = append(out, ConvSpec{Name: name, Out: o, In: i, K: k}) })
	return out
}

// ConvSpec is one convolution of a layer list.
type ConvSpec struct {
	Name       string
	Out, In, K int
}
