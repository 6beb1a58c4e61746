package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/golden"
)

// The real 0.6B shapes are too big for a unit test, so check the generator's
// configs and write a real-layout checkpoint only for the codec-free 0.6B LM
// header check via LMTensors; the full write is exercised by `talkbox synth`.
func TestSynthConfigsMatchReleasedShapes(t *testing.T) {
	for _, tc := range []struct {
		size, typ string
		hidden    int
		tensors   int
	}{
		{"0.6b", TypeCustomVoice, 1024, 402},
		{"1.7b", TypeCustomVoice, 2048, 404},
		{"1.7b", TypeVoiceDesign, 2048, 404},
	} {
		c, err := SynthConfig(tc.size, tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		if c.Talker.HiddenSize != tc.hidden {
			t.Errorf("%s: hidden %d", tc.size, c.Talker.HiddenSize)
		}
		if n := len(LMTensors(c)); n != tc.tensors {
			t.Errorf("%s %s: %d LM tensors, want %d", tc.size, tc.typ, n, tc.tensors)
		}
	}
	if n := len(CodecDecoderTensors(SynthCodecConfig())); n != 271-4 {
		// 271 decoder.* tensors in the release, minus the 4 encode-only input_proj/… not read when decoding
		t.Logf("codec decoder tensors: %d", n)
	}
	if _, err := SynthConfig("7b", ""); err == nil {
		t.Error("unknown size accepted")
	}
}

// A tiny round trip: the generator's writer produces a file Load accepts,
// using a shrunken config so the test stays fast.
func TestWriteRandomTensorsLoads(t *testing.T) {
	c, err := SynthConfig("0.6b", TypeCustomVoice)
	if err != nil {
		t.Fatal(err)
	}
	c.Talker.HiddenSize, c.Talker.IntermediateSize, c.Talker.NumHiddenLayers = 32, 64, 2
	c.Talker.TextVocabSize, c.Talker.TextHiddenSize = 300, 8
	c.Talker.CodePredictor.HiddenSize, c.Talker.CodePredictor.IntermediateSize, c.Talker.CodePredictor.NumHiddenLayers = 32, 48, 1
	dir := t.TempDir()
	if err := writeJSONFile(filepath.Join(dir, "config.json"), c); err != nil {
		t.Fatal(err)
	}
	if err := writeRandomTensors(filepath.Join(dir, "model.safetensors"), LMTensors(c), "BF16", 7); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w, err := m.TensorF32("talker.model.norm.weight")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range w {
		if x < 0.85 || x > 1.15 {
			t.Fatalf("norm weight %v outside 1±0.1 (bf16 rounding aside)", x)
		}
	}
	q, _ := m.TensorF32("talker.model.layers.0.self_attn.q_proj.weight")
	var distinct = map[float32]bool{}
	for _, x := range q {
		distinct[x] = true
	}
	if len(distinct) < 100 {
		t.Errorf("q_proj looks constant: %d distinct values", len(distinct))
	}
}

// The Base layout: the speaker encoder's 76 tensors on top of the LM, the
// speech tokenizer's 225 encoder tensors (qwen3-tts-codec.md §1), and the tensor
// list matches the tiny Base checkpoint's real file name for name.
func TestSynthBaseLayout(t *testing.T) {
	c, err := SynthConfig("0.6b", TypeBase)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(LMTensors(c)); n != 402+76 {
		t.Errorf("0.6B Base: %d LM tensors, want 478", n)
	}
	ec, err := SynthCodecConfig().EncoderConfig()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(CodecEncoderTensors(ec)); n != 225 {
		t.Errorf("%d encoder tensors, the release has 225", n)
	}
	// config.json as released keeps only enc_dim and sample_rate; reading
	// it back gives the class defaults.
	dir := t.TempDir()
	released := *c
	released.SpeakerEncoder = &SpeakerEncCfg{EncDim: 1024, SampleRate: 24000}
	if err := writeJSONFile(filepath.Join(dir, "config.json"), &released); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if strings.Contains(string(b), "enc_channels") {
		t.Errorf("released speaker_encoder_config written in full")
	}
	back, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*back.SpeakerEncoder) != fmt.Sprint(*c.SpeakerEncoder) || back.SpeakerEncoder.EncChannels[4] != 1536 {
		t.Errorf("defaults: %+v, want %+v", *back.SpeakerEncoder, *c.SpeakerEncoder)
	}
}

// TestEncoderTensorsMatchTinyBase checks the encoder tensor list against a
// checkpoint written by the official code: same names, same shapes.
func TestEncoderTensorsMatchTinyBase(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-base")
	m, err := Load(dir, Options{RequireCodec: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ec, err := m.Codec.EncoderConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := CodecEncoderTensors(ec)
	if err := CheckTensors(m.CodecFile, want); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range m.CodecFile.Names() {
		if strings.HasPrefix(name, "encoder.") {
			n++
		}
	}
	if n != len(want) {
		t.Errorf("tiny checkpoint has %d encoder tensors, the list %d", n, len(want))
	}
}
