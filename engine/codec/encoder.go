package codec

import (
	"fmt"
	"math"
	"strings"

	"talkbox/engine/backend"
	"talkbox/engine/codec/gemm"
	"talkbox/engine/model"
)

// Encoder is the speech tokenizer's encoder (docs/design/qwen3-tts-codec.md
// §5), audio to codes: the Mimi SEANet conv encoder (24 kHz to 25 Hz), its
// transformer, a stride-2 downsample to 12.5 Hz and the split residual
// quantizer, of which the first encoder_valid_num_quantizers levels are kept.
// It is what turns a voice's reference audio into the codes of an in-context
// (ICL) clone. Read-only after NewEncoder; safe for concurrent use.
type Encoder struct {
	cfg      model.CodecEncoderConfig
	valid    int // codebooks kept (16)
	downRate int // input samples per code frame (1920)

	first   encConv
	stages  []encStage
	last    encConv
	layers  []encLayer
	rope    rope
	down    encConv
	semIn   linear      // input_proj of the semantic quantizer
	acIn    linear      // input_proj of the acoustic quantizer
	books   [][]float32 // per kept level: [codebookSize][dim], embed_sum / max(usage, 1e-5)
	bookDim int
}

// encConv is a causal Conv1d with stride: w [out][k][in].
type encConv struct {
	conv
	stride    int
	replicate bool // pad with the edge sample instead of zeros
}

type encStage struct {
	res  []encResBlock
	down encConv
}

// encResBlock: ELU, conv k, ELU, conv 1, plus the input (no conv shortcut).
type encResBlock struct{ c1, c2 encConv }

type encLayer struct {
	ln1w, ln1b, ln2w, ln2b []float32
	q, k, v, o             linear
	attnScale, mlpScale    []float32
	fc1, fc2               linear
}

// NewEncoder reads encoder.* from the model's speech tokenizer.
func NewEncoder(m *model.Model) (*Encoder, error) {
	if m.Codec == nil || m.CodecFile == nil {
		return nil, fmt.Errorf("%w: %s has no speech_tokenizer/", model.ErrIncompleteCheckpoint, m.Dir)
	}
	ec, err := m.Codec.EncoderConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Dir, err)
	}
	if err := model.CheckTensors(m.CodecFile, model.CodecEncoderTensors(ec)); err != nil {
		return nil, err
	}
	e := &Encoder{cfg: ec, valid: m.Codec.EncoderValidNumQuantizers, downRate: m.Codec.EncodeDownsampleRate,
		rope: newRope(ec.HeadDim, ec.RopeTheta), bookDim: ec.CodebookDim}
	if e.downRate == 0 {
		e.downRate = 1920
	}
	if want := ec.Hop() * 2; e.downRate != want {
		return nil, fmt.Errorf("%w: %s: encode_downsample_rate %d, but the encoder's strides give %d", model.ErrBadConfig, m.Dir, e.downRate, want)
	}
	l := &loader{src: fileSource(m.CodecFile)}
	get := func(name string, shape ...int) []float32 {
		// The encoder's tensors sit under "encoder.", not the decoder's prefix.
		if l.err != nil {
			return make([]float32, prod(shape))
		}
		v, err := l.src(name, shape...)
		if err != nil {
			l.err = err
			return make([]float32, prod(shape))
		}
		return v
	}
	mkConv := func(name string, out, in, k, dil, stride int, bias bool) encConv {
		w := get(name+".weight", out, in, k)
		var b []float32
		if bias {
			b = get(name+".bias", out)
		}
		return encConv{conv: newConv(w, in, out, k, dil, b), stride: stride}
	}
	convs := ec.EncoderConvs()
	next := func(dil, stride int) encConv {
		s := convs[0]
		convs = convs[1:]
		return mkConv(s.Name, s.Out, s.In, s.K, dil, stride, true)
	}
	e.first = next(1, 1)
	for i := len(ec.UpsamplingRatios) - 1; i >= 0; i-- {
		var st encStage
		dil := 1
		for j := 0; j < ec.NumResidualLayers; j++ {
			st.res = append(st.res, encResBlock{c1: next(dil, 1), c2: next(1, 1)})
			dil *= ec.DilationGrowthRate
		}
		st.down = next(1, ec.UpsamplingRatios[i])
		e.stages = append(e.stages, st)
	}
	e.last = next(1, 1)

	H, hd := ec.HiddenSize, ec.HeadDim
	for li := 0; li < ec.NumHiddenLayers; li++ {
		p := fmt.Sprintf("encoder.encoder_transformer.layers.%d.", li)
		lin := func(name string, out, in int) linear {
			return newLinear(get(p+name+".weight", out, in), out, in, nil)
		}
		e.layers = append(e.layers, encLayer{
			ln1w: get(p+"input_layernorm.weight", H), ln1b: get(p+"input_layernorm.bias", H),
			ln2w: get(p+"post_attention_layernorm.weight", H), ln2b: get(p+"post_attention_layernorm.bias", H),
			q: lin("self_attn.q_proj", ec.NumAttentionHeads*hd, H), k: lin("self_attn.k_proj", ec.NumKeyValueHeads*hd, H),
			v: lin("self_attn.v_proj", ec.NumKeyValueHeads*hd, H), o: lin("self_attn.o_proj", H, ec.NumAttentionHeads*hd),
			attnScale: get(p+"self_attn_layer_scale.scale", H), mlpScale: get(p+"mlp_layer_scale.scale", H),
			fc1: lin("mlp.fc1", ec.IntermediateSize, H), fc2: lin("mlp.fc2", H, ec.IntermediateSize),
		})
	}
	dk := ec.DownsampleKernel()
	e.down = mkConv("encoder.downsample.conv", H, H, dk, 1, dk/2, false)
	e.down.replicate = true
	qp := "encoder.quantizer."
	e.semIn = newLinear(get(qp+"semantic_residual_vector_quantizer.input_proj.weight", ec.VQHiddenDim, H, 1), ec.VQHiddenDim, H, nil)
	e.acIn = newLinear(get(qp+"acoustic_residual_vector_quantizer.input_proj.weight", ec.VQHiddenDim, H, 1), ec.VQHiddenDim, H, nil)
	for q := 0; q < e.valid; q++ {
		p := qp + "semantic_residual_vector_quantizer.layers.0.codebook."
		if q > 0 {
			p = fmt.Sprintf("%sacoustic_residual_vector_quantizer.layers.%d.codebook.", qp, q-1)
		}
		sum := get(p+"embed_sum", ec.CodebookSize, ec.CodebookDim)
		usage := get(p+"cluster_usage", ec.CodebookSize)
		book := make([]float32, len(sum))
		for i := 0; i < ec.CodebookSize; i++ {
			u := max(usage[i], codebookEps)
			for d := 0; d < ec.CodebookDim; d++ {
				book[i*ec.CodebookDim+d] = sum[i*ec.CodebookDim+d] / u
			}
		}
		e.books = append(e.books, book)
	}
	if l.err != nil {
		return nil, l.err
	}
	return e, nil
}

// SampleRate is the input rate (24 kHz).
func (e *Encoder) SampleRate() int { return e.cfg.SamplingRate }

// FrameSamples is the number of input samples per code frame (1920).
func (e *Encoder) FrameSamples() int { return e.downRate }

// Encode returns the codes of 24 kHz mono audio: ceil(len/1920) frames of
// encoder_valid_num_quantizers codes (16).
func (e *Encoder) Encode(audio []float32) ([]backend.Codes, error) {
	if len(audio) == 0 {
		return nil, fmt.Errorf("speech encoder: no audio")
	}
	if e.valid != backend.NumGroups {
		return nil, fmt.Errorf("speech encoder: %d valid quantizers, the talker takes %d", e.valid, backend.NumGroups)
	}
	lat, T := e.Latent(audio)
	codes := e.quantize(lat, T)
	keep := (len(audio) + e.downRate - 1) / e.downRate
	if keep < len(codes) {
		codes = codes[:keep]
	}
	return codes, nil
}

// Latent runs everything before the quantizer and returns the [T][hidden]
// quantizer input (the golden encode_quantizer_input, time-major).
func (e *Encoder) Latent(audio []float32) ([]float32, int) {
	x, T := audio, len(audio)
	x, T = e.first.causal(x, T)
	for _, st := range e.stages {
		for _, rb := range st.res {
			h, _ := rb.c1.causal(eluCopy(x), T)
			h, _ = rb.c2.causal(eluCopy(h), T)
			for i := range h {
				h[i] += x[i]
			}
			x = h
		}
		x, T = st.down.causal(eluCopy(x), T)
	}
	x, T = e.last.causal(eluCopy(x), T)
	x = e.transformer(x, T)
	return e.down.causal(x, T)
}

// causal applies the conv as transformers' MimiConv1d does with
// use_causal_conv: pad (k-1)·d+1-stride rows on the left and, on the right,
// what completes the last stride, giving ceil(T/stride) rows. The padded
// input is built once; output row t's taps start at padded row t·stride.
func (c *encConv) causal(x []float32, T int) ([]float32, int) {
	span := (c.k-1)*c.dil + 1
	left := span - c.stride
	Tout := (T + c.stride - 1) / c.stride
	y := make([]float32, Tout*c.out)
	if c.k == 1 && c.stride == 1 {
		gemm.NT(y, x, T, c.w, c.b)
		return y, Tout
	}
	// Padded row r is input row r-lead; output t, tap j reads padded row
	// t·stride + j·dil + skip (skip > 0 only when there is no left padding).
	lead, skip := max(left, 0), max(-left, 0)
	rows := max(lead+T, (Tout-1)*c.stride+skip+span)
	ext := make([]float32, rows*c.in)
	copy(ext[lead*c.in:], x[:T*c.in])
	if c.replicate {
		for r := 0; r < rows; r++ {
			if src := r - lead; src < 0 || src >= T {
				src = max(0, min(T-1, src))
				copy(ext[r*c.in:(r+1)*c.in], x[src*c.in:(src+1)*c.in])
			}
		}
	}
	off := make([]int, c.k)
	for j := range off {
		off[j] = (j*c.dil + skip) * c.in
	}
	gemm.Conv(y, ext, Tout, c.stride*c.in, off, c.w, c.b)
	return y, Tout
}

// eluCopy is ELU (alpha 1) into a new slice: the input also feeds a residual.
func eluCopy(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		if v > 0 {
			y[i] = v
		} else {
			y[i] = float32(math.Expm1(float64(v)))
		}
	}
	return y
}

// transformer runs the encoder transformer on T rows: pre-LayerNorm layers
// with causal sliding-window attention (each position sees itself and the
// window-1 before it), RoPE, a GELU MLP and layer scales; no final norm.
func (e *Encoder) transformer(x []float32, T int) []float32 {
	c := e.cfg
	hd, nh := c.HeadDim, c.NumAttentionHeads
	w := nh * hd
	win := c.SlidingWindow
	cos := make([]float32, T*hd/2)
	sin := make([]float32, T*hd/2)
	for t := 0; t < T; t++ {
		e.rope.tables(t, cos[t*hd/2:(t+1)*hd/2], sin[t*hd/2:(t+1)*hd/2])
	}
	h := x
	for li := range e.layers {
		ly := &e.layers[li]
		hn := append([]float32(nil), h...)
		layerNorm(hn, ly.ln1w, ly.ln1b, T, c.NormEps)
		q := ly.q.apply(hn, T)
		k := ly.k.apply(hn, T)
		v := ly.v.apply(hn, T)
		for t := 0; t < T; t++ {
			cs, sn := cos[t*hd/2:(t+1)*hd/2], sin[t*hd/2:(t+1)*hd/2]
			for hh := 0; hh < nh; hh++ {
				e.rope.rotate(q[t*w+hh*hd:t*w+(hh+1)*hd], cs, sn)
				e.rope.rotate(k[t*w+hh*hd:t*w+(hh+1)*hd], cs, sn)
			}
		}
		att := windowAttention(q, k, v, T, 0, nh, nh, hd, win)
		addScaled(h, ly.o.apply(att, T), ly.attnScale)
		hn = append(hn[:0], h...)
		layerNorm(hn, ly.ln2w, ly.ln2b, T, c.NormEps)
		f := ly.fc1.apply(hn, T)
		geluErf(f)
		addScaled(h, ly.fc2.apply(f, T), ly.mlpScale)
	}
	return h
}

// quantize is the split residual quantizer: level 0 quantizes the semantic
// projection of the latent, levels 1.. the acoustic projection, each level
// taking the nearest codebook row (Euclidean) of what the levels before it
// left over.
func (e *Encoder) quantize(lat []float32, T int) []backend.Codes {
	D := e.bookDim
	sem := e.semIn.apply(lat, T)
	ac := e.acIn.apply(lat, T)
	codes := make([]backend.Codes, T)
	parallelRows(T, D*len(e.books)*e.cfg.CodebookSize, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			codes[t][0] = int32(nearest(e.books[0], sem[t*D:(t+1)*D], D))
			res := append([]float32(nil), ac[t*D:(t+1)*D]...)
			for q := 1; q < len(e.books); q++ {
				idx := nearest(e.books[q], res, D)
				codes[t][q] = int32(idx)
				row := e.books[q][idx*D : (idx+1)*D]
				for d := range res {
					res[d] -= row[d]
				}
			}
		}
	})
	return codes
}

// nearest is the index of the codebook row closest to x (the first on ties).
func nearest(book, x []float32, D int) int {
	best, bestD := 0, math.Inf(1)
	for i := 0; i*D < len(book); i++ {
		row := book[i*D : (i+1)*D]
		var s float64
		for d, v := range row {
			diff := float64(x[d]) - float64(v)
			s += diff * diff
		}
		if s < bestD {
			best, bestD = i, s
		}
	}
	return best
}

// String names the encoder's shape, for logs and errors.
func (e *Encoder) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "speech encoder: hidden %d, %d layers, %d codebooks of %dx%d", e.cfg.HiddenSize, len(e.layers), len(e.books), e.cfg.CodebookSize, e.bookDim)
	return s.String()
}
