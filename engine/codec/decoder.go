package codec

import (
	"errors"
	"fmt"

	"talkbox/engine/backend"
	"talkbox/engine/codec/gemm"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
)

// ConvNeXt and vocoder constants fixed by the architecture (not in config).
const (
	convNeXtKernel = 7
	vocoderKernel  = 7
	preConvKernel  = 3
	layerNormEps   = 1e-6
	codebookEps    = 1e-5
)

// resDilations are the dilations of the three residual units of each vocoder block.
var resDilations = [3]int{1, 3, 9}

// Decoder holds the speech-tokenizer decoder weights, converted once into the
// layouts the kernels use. It is read-only after New, so any number of
// streams may share it.
type Decoder struct {
	cfg        model.CodecDecoderConfig
	sampleRate int
	spf        int // samples per frame

	codebooks [][]float32 // per quantizer: [codebookSize][cbDim], embedding_sum / clamp(usage)
	cbDim     int
	projFirst linear // rvq_first.output_proj, cbDim -> codebook_dim
	projRest  linear // rvq_rest.output_proj
	preConv   conv

	inProj, outProj linear
	layers          []tfLayer
	finalNorm       []float32
	rope            rope

	upsample []upStage
	voc0     conv
	blocks   []vocBlock
	final    snake
	finalCv  conv

	blockFrames int // frames per internal sub-push, bounds scratch memory
}

type linear struct {
	w       *gemm.Matrix // [out][in]
	b       []float32
	in, out int
}

type conv struct {
	w          *gemm.Matrix // [out][k·in], tap by tap
	b          []float32
	in, out, k int
	dil        int
	off        []int // where tap j starts in the input rows: j·dil·in
}

type transConv struct {
	w                *gemm.Matrix // [s·out][taps·in]
	b                []float32    // [s·out]
	in, out, s, taps int
}

type snake struct{ a, ib []float32 }

type tfLayer struct {
	inNorm, postNorm    []float32
	q, k, v, o          linear
	attnScale, mlpScale []float32
	gate, up, down      linear
}

type upStage struct {
	up  transConv
	cnx convNeXt
}

type convNeXt struct {
	dw, dwB  []float32 // depthwise [C][7]
	lnW, lnB []float32
	pw1, pw2 linear
	gamma    []float32
	ch       int
}

type resUnit struct {
	act1, act2   snake
	conv1, conv2 conv
}

type vocBlock struct {
	act   snake
	up    transConv
	units [3]resUnit
}

// New builds the decoder of an opened checkpoint. It first checks every
// decoder tensor name and shape (model.CheckTensors), so a mismatched
// checkpoint fails with one error listing all problems.
func New(m *model.Model) (*Decoder, error) {
	if m == nil || m.Codec == nil || m.CodecFile == nil {
		return nil, fmt.Errorf("%w: codec: the checkpoint has no speech_tokenizer (load it with model.Options{RequireCodec: true})", model.ErrIncompleteCheckpoint)
	}
	return NewFromFile(m.Codec, m.CodecFile)
}

// NewFromFile builds the decoder from a config and its weight file.
func NewFromFile(cfg *model.CodecConfig, f *safetensors.File) (*Decoder, error) {
	if err := model.CheckTensors(f, model.CodecDecoderTensors(cfg)); err != nil {
		return nil, err
	}
	return newDecoder(cfg, fileSource(f))
}

func newDecoder(cc *model.CodecConfig, src tensorSource) (*Decoder, error) {
	c := cc.Decoder
	if err := checkConfig(c); err != nil {
		return nil, err
	}
	d := &Decoder{cfg: c, spf: c.SamplesPerFrame(), sampleRate: cc.OutputSampleRate, cbDim: c.CodebookDim / 2}
	if d.sampleRate == 0 {
		d.sampleRate = 24000
	}
	l := &loader{src: src}

	for _, part := range []string{"rvq_first", "rvq_rest"} {
		n := 1
		if part == "rvq_rest" {
			n = c.NumQuantizers - 1
		}
		for q := 0; q < n; q++ {
			p := fmt.Sprintf("quantizer.%s.vq.layers.%d._codebook.", part, q)
			sum := l.get(p+"embedding_sum", c.CodebookSize, d.cbDim)
			usage := l.get(p+"cluster_usage", c.CodebookSize)
			if l.err != nil {
				break
			}
			for i := 0; i < c.CodebookSize; i++ {
				u := max(usage[i], codebookEps)
				for j := 0; j < d.cbDim; j++ {
					sum[i*d.cbDim+j] /= u
				}
			}
			d.codebooks = append(d.codebooks, sum)
		}
	}
	d.projFirst = l.conv1x1("quantizer.rvq_first.output_proj", d.cbDim, c.CodebookDim)
	d.projRest = l.conv1x1("quantizer.rvq_rest.output_proj", d.cbDim, c.CodebookDim)
	d.preConv = l.conv("pre_conv.conv", c.CodebookDim, c.LatentDim, preConvKernel, 1, true)

	attn, kv := c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim
	d.inProj = l.linear("pre_transformer.input_proj", c.HiddenSize, c.LatentDim, true)
	d.outProj = l.linear("pre_transformer.output_proj", c.LatentDim, c.HiddenSize, true)
	d.finalNorm = l.get("pre_transformer.norm.weight", c.HiddenSize)
	for i := 0; i < c.NumHiddenLayers; i++ {
		p := fmt.Sprintf("pre_transformer.layers.%d.", i)
		d.layers = append(d.layers, tfLayer{
			inNorm:    l.get(p+"input_layernorm.weight", c.HiddenSize),
			postNorm:  l.get(p+"post_attention_layernorm.weight", c.HiddenSize),
			q:         l.linear(p+"self_attn.q_proj", attn, c.HiddenSize, false),
			k:         l.linear(p+"self_attn.k_proj", kv, c.HiddenSize, false),
			v:         l.linear(p+"self_attn.v_proj", kv, c.HiddenSize, false),
			o:         l.linear(p+"self_attn.o_proj", c.HiddenSize, attn, false),
			attnScale: l.get(p+"self_attn_layer_scale.scale", c.HiddenSize),
			mlpScale:  l.get(p+"mlp_layer_scale.scale", c.HiddenSize),
			gate:      l.linear(p+"mlp.gate_proj", c.IntermediateSize, c.HiddenSize, false),
			up:        l.linear(p+"mlp.up_proj", c.IntermediateSize, c.HiddenSize, false),
			down:      l.linear(p+"mlp.down_proj", c.HiddenSize, c.IntermediateSize, false),
		})
	}
	d.rope = newRope(c.HeadDim, c.RopeTheta)

	L := c.LatentDim
	for i, r := range c.UpsamplingRatios {
		p := fmt.Sprintf("upsample.%d.", i)
		d.upsample = append(d.upsample, upStage{
			up: l.transConv(p+"0", L, L, r, r),
			cnx: convNeXt{ch: L,
				dw: l.get(p+"1.dwconv.conv.weight", L, 1, convNeXtKernel), dwB: l.get(p+"1.dwconv.conv.bias", L),
				lnW: l.get(p+"1.norm.weight", L), lnB: l.get(p+"1.norm.bias", L),
				pw1: l.linear(p+"1.pwconv1", 4*L, L, true), pw2: l.linear(p+"1.pwconv2", L, 4*L, true),
				gamma: l.get(p+"1.gamma", L)},
		})
	}

	ch := c.DecoderDim
	d.voc0 = l.conv("decoder.0.conv", L, ch, vocoderKernel, 1, true)
	for b, r := range c.UpsampleRates {
		p := fmt.Sprintf("decoder.%d.block.", b+1)
		out := ch / 2
		blk := vocBlock{act: l.snake(p+"0", ch), up: l.transConv(p+"1", ch, out, 2*r, r)}
		for u, dil := range resDilations {
			up := fmt.Sprintf("%s%d.", p, u+2)
			blk.units[u] = resUnit{
				act1: l.snake(up+"act1", out), conv1: l.conv(up+"conv1.conv", out, out, vocoderKernel, dil, true),
				act2: l.snake(up+"act2", out), conv2: l.conv(up+"conv2.conv", out, out, 1, 1, true),
			}
		}
		d.blocks = append(d.blocks, blk)
		ch = out
	}
	n := len(c.UpsampleRates)
	d.final = l.snake(fmt.Sprintf("decoder.%d", n+1), ch)
	d.finalCv = l.conv(fmt.Sprintf("decoder.%d.conv", n+2), ch, 1, vocoderKernel, 1, true)
	if l.err != nil {
		return nil, l.err
	}
	d.blockFrames = d.framesPerBlock()
	return d, nil
}

func (l *loader) conv1x1(name string, in, out int) linear {
	return newLinear(l.get(name+".weight", out, in, 1), out, in, nil)
}

// ErrBadCodecConfig is wrapped when decoder_config cannot describe a decoder.
var ErrBadCodecConfig = errors.New("codec: unsupported decoder config")

func checkConfig(c model.CodecDecoderConfig) error {
	switch {
	case c.NumQuantizers != backend.NumGroups:
		return fmt.Errorf("%w: num_quantizers %d, want %d", ErrBadCodecConfig, c.NumQuantizers, backend.NumGroups)
	case c.CodebookDim%2 != 0:
		return fmt.Errorf("%w: codebook_dim %d is odd", ErrBadCodecConfig, c.CodebookDim)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("%w: head_dim %d is odd (rotate-half RoPE)", ErrBadCodecConfig, c.HeadDim)
	case c.NumKeyValueHeads <= 0 || c.NumAttentionHeads%c.NumKeyValueHeads != 0:
		return fmt.Errorf("%w: %d heads are not a multiple of %d key/value heads", ErrBadCodecConfig, c.NumAttentionHeads, c.NumKeyValueHeads)
	case c.SlidingWindow < 1:
		return fmt.Errorf("%w: sliding_window %d", ErrBadCodecConfig, c.SlidingWindow)
	case c.RopeTheta <= 0 || c.RMSNormEps <= 0:
		return fmt.Errorf("%w: rope_theta and rms_norm_eps must be positive", ErrBadCodecConfig)
	case c.IntermediateSize <= 0:
		return fmt.Errorf("%w: intermediate_size %d", ErrBadCodecConfig, c.IntermediateSize)
	}
	for _, r := range append(append([]int(nil), c.UpsamplingRatios...), c.UpsampleRates...) {
		if r < 1 {
			return fmt.Errorf("%w: upsampling factor %d", ErrBadCodecConfig, r)
		}
	}
	if c.DecoderDim%(1<<len(c.UpsampleRates)) != 0 {
		return fmt.Errorf("%w: decoder_dim %d does not halve %d times", ErrBadCodecConfig, c.DecoderDim, len(c.UpsampleRates))
	}
	return nil
}

// framesPerBlock picks how many frames one internal pass handles so that the
// largest activation (rows × channels of one stage's output) stays near
// 8 MiB (11 frames for the released decoder, hundreds for the tiny one).
// Results do not depend on it.
func (d *Decoder) framesPerBlock() int {
	rate := 1
	for _, r := range d.cfg.UpsamplingRatios {
		rate *= r
	}
	worst := rate * max(d.cfg.LatentDim, d.voc0.out)
	for _, b := range d.blocks {
		rate *= b.up.s
		worst = max(worst, rate*b.up.out)
	}
	return max(1, (8<<20)/4/max(1, worst))
}

// SamplesPerFrame is the number of output samples per code frame (1920).
func (d *Decoder) SamplesPerFrame() int { return d.spf }

// SampleRate is the output rate in Hz (24000).
func (d *Decoder) SampleRate() int { return d.sampleRate }

// Config returns the decoder config the weights were built for.
func (d *Decoder) Config() model.CodecDecoderConfig { return d.cfg }
