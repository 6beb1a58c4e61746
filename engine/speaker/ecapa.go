// Package speaker computes a Base model's x-vector from reference audio: the
// log-mel front end (mel.go) and the ECAPA-TDNN speaker encoder of
// docs/design/qwen3-tts-codec.md §6 (no BatchNorm; every conv reflect-padded
// "same"). The x-vector takes a speaker token's place in the talker prompt.
package speaker

import (
	"fmt"
	"math"

	"talkbox/engine/linalg"
	"talkbox/engine/model"
)

// seBlock is one SE-Res2Net block.
type seBlock struct {
	tdnn1, tdnn2 conv1d
	res2         []conv1d // scale-1 convs over channel chunks
	se1, se2     conv1d
	scale        int
}

// Encoder is an opened speaker encoder. It is safe for concurrent use.
type Encoder struct {
	cfg    model.SpeakerEncCfg
	fb     []float32
	kern   linalg.Kernels
	block0 conv1d
	blocks []seBlock
	mfa    conv1d
	aspTDN conv1d
	aspCv  conv1d
	fc     conv1d
}

// New reads speaker_encoder.* from a Base checkpoint (the loader has checked
// the tensor shapes against the config).
func New(m *model.Model) (*Encoder, error) {
	c := m.Config.SpeakerEncoder
	if c == nil || m.Config.TTSModelType != model.TypeBase {
		return nil, fmt.Errorf("%w: %s is a %s model; only Base models have a speaker encoder", model.ErrIncompleteCheckpoint, m.Dir, m.Config.TTSModelType)
	}
	if len(c.EncChannels) != 5 || len(c.EncKernelSizes) != 5 || len(c.EncDilations) != 5 || c.EncRes2NetScale < 2 || c.MelDim != NumMels {
		return nil, fmt.Errorf("%w: %s: speaker_encoder_config %+v is not the released ECAPA layout (5 blocks, %d mels)", model.ErrBadConfig, m.Dir, *c, NumMels)
	}
	if sr := c.SampleRate; sr != 0 && sr != melRate {
		return nil, fmt.Errorf("%w: %s: speaker encoder sample rate %d, want %d", model.ErrBadConfig, m.Dir, sr, melRate)
	}
	ch, k, d := c.EncChannels, c.EncKernelSizes, c.EncDilations
	l := &tensors{f: m.LM}
	p := "speaker_encoder."
	e := &Encoder{cfg: *c, fb: MelFilterbank(), kern: linalg.New(0)}
	e.block0 = l.conv(p+"blocks.0.conv", c.MelDim, ch[0], k[0], d[0], 1, true)
	for b := 1; b <= 3; b++ {
		bp := fmt.Sprintf("%sblocks.%d.", p, b)
		sub := ch[b] / c.EncRes2NetScale
		blk := seBlock{scale: c.EncRes2NetScale,
			tdnn1: l.conv(bp+"tdnn1.conv", ch[b-1], ch[b], 1, 1, 1, true),
			tdnn2: l.conv(bp+"tdnn2.conv", ch[b], ch[b], 1, 1, 1, true),
			se1:   l.conv(bp+"se_block.conv1", ch[b], c.EncSEChannels, 1, 1, 1, true),
			se2:   l.conv(bp+"se_block.conv2", c.EncSEChannels, ch[b], 1, 1, 1, true),
		}
		for r := 0; r < c.EncRes2NetScale-1; r++ {
			blk.res2 = append(blk.res2, l.conv(fmt.Sprintf("%sres2net_block.blocks.%d.conv", bp, r), sub, sub, k[b], d[b], 1, true))
		}
		e.blocks = append(e.blocks, blk)
	}
	e.mfa = l.conv(p+"mfa.conv", ch[1]+ch[2]+ch[3], ch[4], k[4], d[4], 1, true)
	e.aspTDN = l.conv(p+"asp.tdnn.conv", 3*ch[4], c.EncAttentionChannels, 1, 1, 1, true)
	e.aspCv = l.conv(p+"asp.conv", c.EncAttentionChannels, ch[4], 1, 1, 1, true)
	e.fc = l.conv(p+"fc", 2*ch[4], c.EncDim, 1, 1, 1, true)
	if l.err != nil {
		return nil, fmt.Errorf("%w: %v", model.ErrIncompleteCheckpoint, l.err)
	}
	return e, nil
}

// Dim is the x-vector's width (enc_dim, the talker's hidden size).
func (e *Encoder) Dim() int { return e.cfg.EncDim }

// MinSamples is the shortest 24 kHz input Embed accepts: enough mel frames
// for the widest reflect padding (torch requires padding < length).
func (e *Encoder) MinSamples() int { return 24 * melHop }

// Embed returns the x-vector of 24 kHz mono audio.
func (e *Encoder) Embed(audio []float32) ([]float32, error) {
	if len(audio) < e.MinSamples() {
		return nil, fmt.Errorf("speaker encoder: %d samples of audio, need at least %d", len(audio), e.MinSamples())
	}
	mel, T := Mel(audio, e.fb)
	return e.Forward(mel, T), nil
}

// Forward runs the encoder on a [T][128] log-mel spectrogram.
func (e *Encoder) Forward(mel []float32, T int) []float32 {
	h := e.block0.same(e.kern, mel, T)
	relu(h)
	var outs [][]float32
	for i := range e.blocks {
		h = e.blocks[i].forward(e.kern, h, T)
		outs = append(outs, h)
	}
	// Multi-layer feature aggregation: the three block outputs side by side.
	C := 0
	for _, b := range e.blocks {
		C += b.tdnn2.out
	}
	cat := make([]float32, T*C)
	for t := 0; t < T; t++ {
		off := t * C
		for _, o := range outs {
			w := len(o) / T
			copy(cat[off:off+w], o[t*w:(t+1)*w])
			off += w
		}
	}
	h = e.mfa.same(e.kern, cat, T)
	relu(h)
	pooled := e.pool(h, T)
	x := e.fc.same(e.kern, pooled, 1)
	return x
}

// forward is tdnn1 -> Res2Net -> tdnn2 -> squeeze-excitation, plus the input.
func (b *seBlock) forward(kern linalg.Kernels, x []float32, T int) []float32 {
	h := b.tdnn1.same(kern, x, T)
	relu(h)
	C := b.tdnn1.out
	w := C / b.scale
	res := make([]float32, T*C)
	chunk := make([]float32, T*w)
	var prev []float32
	for i := 0; i < b.scale; i++ {
		for t := 0; t < T; t++ {
			copy(chunk[t*w:(t+1)*w], h[t*C+i*w:t*C+(i+1)*w])
		}
		var y []float32
		switch i {
		case 0:
			y = chunk
		case 1:
			y = b.res2[0].same(kern, chunk, T)
			relu(y)
		default:
			for j := range chunk {
				chunk[j] += prev[j]
			}
			y = b.res2[i-1].same(kern, chunk, T)
			relu(y)
		}
		for t := 0; t < T; t++ {
			copy(res[t*C+i*w:t*C+(i+1)*w], y[t*w:(t+1)*w])
		}
		prev = y
		if i == 0 {
			prev = nil
		}
	}
	h = b.tdnn2.same(kern, res, T)
	relu(h)
	// Squeeze-excitation: channel means -> conv1 + ReLU -> conv2 + sigmoid.
	mean := make([]float32, C)
	for c := 0; c < C; c++ {
		var s float64
		for t := 0; t < T; t++ {
			s += float64(h[t*C+c])
		}
		mean[c] = float32(s / float64(T))
	}
	s := b.se1.same(kern, mean, 1)
	relu(s)
	g := b.se2.same(kern, s, 1)
	for c := range g {
		g[c] = sigmoid(g[c])
	}
	out := make([]float32, T*C)
	for t := 0; t < T; t++ {
		for c := 0; c < C; c++ {
			out[t*C+c] = h[t*C+c]*g[c] + x[t*C+c]
		}
	}
	return out
}

// stats are the weighted mean and std over time of each channel (weights
// per row and channel; nil means uniform 1/T), std = sqrt(max(var, 1e-12)).
func stats(h, wts []float32, T, C int) (mean, std []float32) {
	mean, std = make([]float32, C), make([]float32, C)
	for c := 0; c < C; c++ {
		var m float64
		for t := 0; t < T; t++ {
			w := 1 / float64(T)
			if wts != nil {
				w = float64(wts[t*C+c])
			}
			m += w * float64(h[t*C+c])
		}
		var v float64
		for t := 0; t < T; t++ {
			w := 1 / float64(T)
			if wts != nil {
				w = float64(wts[t*C+c])
			}
			d := float64(h[t*C+c]) - m
			v += w * d * d
		}
		mean[c], std[c] = float32(m), float32(math.Sqrt(math.Max(v, 1e-12)))
	}
	return mean, std
}

// pool is attentive statistics pooling: global statistics give every row
// context, an attention over time per channel weights the final statistics.
func (e *Encoder) pool(h []float32, T int) []float32 {
	C := e.mfa.out
	mean, std := stats(h, nil, T, C)
	in := make([]float32, T*3*C)
	for t := 0; t < T; t++ {
		row := in[t*3*C:]
		copy(row[:C], h[t*C:(t+1)*C])
		copy(row[C:2*C], mean)
		copy(row[2*C:3*C], std)
	}
	a := e.aspTDN.same(e.kern, in, T)
	for i, v := range a {
		a[i] = float32(math.Tanh(float64(max(v, 0))))
	}
	att := e.aspCv.same(e.kern, a, T)
	// Softmax over time for each channel.
	for c := 0; c < C; c++ {
		mx := math.Inf(-1)
		for t := 0; t < T; t++ {
			mx = math.Max(mx, float64(att[t*C+c]))
		}
		var s float64
		for t := 0; t < T; t++ {
			s += math.Exp(float64(att[t*C+c]) - mx)
		}
		for t := 0; t < T; t++ {
			att[t*C+c] = float32(math.Exp(float64(att[t*C+c])-mx) / s)
		}
	}
	m, sd := stats(h, att, T, C)
	return append(m, sd...)
}
