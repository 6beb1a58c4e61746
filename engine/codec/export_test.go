package codec

import (
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// TestHostWeightsLayout: the weights handed to other backends are in the
// documented layouts, not the packed form the CPU kernels use: a conv as
// [out][k][in], a linear as [out][in], a transposed conv as
// [stride·out][taps·in], each compared with the checkpoint's tensor.
func TestHostWeightsLayout(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	m, err := model.Load(dir, model.Options{RequireCodec: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	hw := d.HostWeights()
	f := m.CodecFile

	cv := hw.Blocks[0].Units[1].Conv1
	w, err := f.F32("decoder.decoder.1.block.3.conv1.conv.weight") // [out, in, k]
	if err != nil {
		t.Fatal(err)
	}
	for o := 0; o < cv.Out; o++ {
		for i := 0; i < cv.In; i++ {
			for j := 0; j < cv.K; j++ {
				if got, want := cv.W[(o*cv.K+j)*cv.In+i], w[(o*cv.In+i)*cv.K+j]; got != want {
					t.Fatalf("conv1 [%d][%d][%d] = %v, want %v", o, j, i, got, want)
				}
			}
		}
	}

	q := hw.Layers[0].Q
	w, err = f.F32("decoder.pre_transformer.layers.0.self_attn.q_proj.weight") // [out, in]
	if err != nil {
		t.Fatal(err)
	}
	for i := range w {
		if q.W[i] != w[i] {
			t.Fatalf("q_proj value %d = %v, want %v", i, q.W[i], w[i])
		}
	}
	if len(q.W) != q.Out*q.In {
		t.Fatalf("q_proj has %d values, want %d", len(q.W), q.Out*q.In)
	}

	up := hw.Blocks[0].Up
	w, err = f.F32("decoder.decoder.1.block.1.conv.weight") // [in, out, k]
	if err != nil {
		t.Fatal(err)
	}
	k := up.Taps * up.Stride
	for p := 0; p < up.Stride; p++ {
		for o := 0; o < up.Out; o++ {
			for tap := 0; tap < up.Taps; tap++ {
				for i := 0; i < up.In; i++ {
					if got, want := up.W[(p*up.Out+o)*up.Taps*up.In+tap*up.In+i], w[(i*up.Out+o)*k+p+tap*up.Stride]; got != want {
						t.Fatalf("transposed conv (%d,%d) tap %d in %d = %v, want %v", p, o, tap, i, got, want)
					}
				}
			}
		}
	}
}
