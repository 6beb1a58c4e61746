package codec

// HostWeights is the decoder's weights in the layouts the CPU kernels use,
// for backends that copy them elsewhere (engine/cudacodec uploads them to the
// GPU). The matrices of the products are copies (the Decoder keeps them
// packed for engine/codec/gemm); every other slice aliases the Decoder's own
// memory: treat it as read-only.
//
// Layouts (row-major):
//   - Codebooks[q]: [CodebookSize][CodebookVecDim], already divided by
//     max(cluster_usage, 1e-5).
//   - linear weights: [out][in]; conv weights: [out][k][in] (im2col order);
//     transposed convs: [stride·out][taps·in], row (p, o) holding tap p
//     (applied to input t) then tap p+stride (applied to input t-1), bias
//     expanded to [stride·out].
//   - SnakeBeta: A = exp(alpha), IB = 1/(exp(beta)+1e-9), per channel.
type HostWeights struct {
	CodebookVecDim int // codebook_dim/2: the width of one codebook row
	Codebooks      [][]float32
	ProjFirst      HostLinear // rvq_first.output_proj (no bias)
	ProjRest       HostLinear // rvq_rest.output_proj (no bias)
	PreConv        HostConv

	InProj, OutProj HostLinear
	Layers          []HostLayer
	FinalNorm       []float32
	InvFreq         []float32 // RoPE inverse frequencies [head_dim/2], float32 as used

	Upsample []HostUpsample
	Voc0     HostConv
	Blocks   []HostBlock
	Final    HostSnake
	FinalCv  HostConv
}

// HostLinear is a Linear (or 1x1 conv) layer; B is nil without bias.
type HostLinear struct {
	W, B    []float32
	In, Out int
}

// HostConv is a causal Conv1d with its dilation.
type HostConv struct {
	W, B            []float32
	In, Out, K, Dil int
}

// HostTransConv is a causal ConvTranspose1d with k = Taps·Stride.
type HostTransConv struct {
	W, B                  []float32
	In, Out, Stride, Taps int
}

// HostSnake holds SnakeBeta's precomputed per-channel factors.
type HostSnake struct{ A, IB []float32 }

// HostLayer is one pre-transformer layer.
type HostLayer struct {
	InNorm, PostNorm    []float32
	Q, K, V, O          HostLinear
	AttnScale, MLPScale []float32
	Gate, Up, Down      HostLinear
}

// HostUpsample is one upsampling stage: transposed conv then ConvNeXt.
type HostUpsample struct {
	Up       HostTransConv
	DW, DWB  []float32 // depthwise [C][7], bias [C]
	LNW, LNB []float32
	PW1, PW2 HostLinear
	Gamma    []float32
	Ch       int
}

// HostUnit is one vocoder residual unit.
type HostUnit struct {
	Act1, Act2   HostSnake
	Conv1, Conv2 HostConv
}

// HostBlock is one vocoder block: SnakeBeta, transposed conv, three units.
type HostBlock struct {
	Act   HostSnake
	Up    HostTransConv
	Units [3]HostUnit
}

// HostWeights returns the decoder's weights. The products' matrices are
// unpacked into new slices; the other slices alias the Decoder's memory
// (read-only).
func (d *Decoder) HostWeights() HostWeights {
	hw := HostWeights{
		CodebookVecDim: d.cbDim,
		Codebooks:      d.codebooks,
		ProjFirst:      hostLinear(d.projFirst),
		ProjRest:       hostLinear(d.projRest),
		PreConv:        hostConv(d.preConv),
		InProj:         hostLinear(d.inProj),
		OutProj:        hostLinear(d.outProj),
		FinalNorm:      d.finalNorm,
		InvFreq:        d.rope.invFreq,
		Voc0:           hostConv(d.voc0),
		Final:          HostSnake{A: d.final.a, IB: d.final.ib},
		FinalCv:        hostConv(d.finalCv),
	}
	for _, l := range d.layers {
		hw.Layers = append(hw.Layers, HostLayer{
			InNorm: l.inNorm, PostNorm: l.postNorm,
			Q: hostLinear(l.q), K: hostLinear(l.k), V: hostLinear(l.v), O: hostLinear(l.o),
			AttnScale: l.attnScale, MLPScale: l.mlpScale,
			Gate: hostLinear(l.gate), Up: hostLinear(l.up), Down: hostLinear(l.down),
		})
	}
	for _, u := range d.upsample {
		c := u.cnx
		hw.Upsample = append(hw.Upsample, HostUpsample{
			Up: hostTransConv(u.up), DW: c.dw, DWB: c.dwB, LNW: c.lnW, LNB: c.lnB,
			PW1: hostLinear(c.pw1), PW2: hostLinear(c.pw2), Gamma: c.gamma, Ch: c.ch,
		})
	}
	for _, b := range d.blocks {
		hb := HostBlock{Act: HostSnake{A: b.act.a, IB: b.act.ib}, Up: hostTransConv(b.up)}
		for i, u := range b.units {
			hb.Units[i] = HostUnit{
				Act1: HostSnake{A: u.act1.a, IB: u.act1.ib}, Act2: HostSnake{A: u.act2.a, IB: u.act2.ib},
				Conv1: hostConv(u.conv1), Conv2: hostConv(u.conv2),
			}
		}
		hw.Blocks = append(hw.Blocks, hb)
	}
	return hw
}

func hostLinear(l linear) HostLinear {
	return HostLinear{W: l.w.Unpack(), B: l.b, In: l.in, Out: l.out}
}

func hostConv(c conv) HostConv {
	return HostConv{W: c.w.Unpack(), B: c.b, In: c.in, Out: c.out, K: c.k, Dil: c.dil}
}

func hostTransConv(t transConv) HostTransConv {
	return HostTransConv{W: t.w.Unpack(), B: t.b, In: t.in, Out: t.out, Stride: t.s, Taps: t.taps}
}
