package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/safetensors"
)

func TestInspectVerb(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	var out, errb bytes.Buffer
	if rc := run([]string{"inspect", dir}, &out, &errb); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	for _, want := range []string{"0.6B CustomVoice", "eric (sichuan_dialect)", "auto, chinese, english", "instruct    no", "complete    yes", "151643 BPE tokens + 33 added"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// JSON, flag after the directory; the counts must match the files.
	vd := golden.Checkpoint(t, "qwen3-tts-tiny-voicedesign-1b7")
	out.Reset()
	if rc := run([]string{"inspect", vd, "--json"}, &out, &errb); rc != 0 {
		t.Fatalf("--json: exit %d: %s", rc, errb.String())
	}
	var in inspection
	if err := json.Unmarshal(out.Bytes(), &in); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	f, err := safetensors.Open(filepath.Join(vd, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if in.ModelType != "voice_design" || in.Size != "1.7B" || !in.Instruct || len(in.Speakers) != 0 || !in.Complete ||
		in.Model == nil || in.Model.Tensors != len(f.Names()) || in.Model.Bytes != f.TotalBytes() || in.SpeechTokenizer == nil || len(in.Languages) != 11 {
		t.Errorf("voicedesign report %+v (model %+v); want voice_design 1.7B, instruct, no speakers, %d tensors", in, in.Model, len(f.Names()))
	}
}

// An incomplete checkpoint is reported (what is missing) and exits 1.
func TestInspectIncomplete(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := t.TempDir()
	for _, name := range []string{"config.json", "generation_config.json", "vocab.json", "merges.txt", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	one := safetensors.WriteTensor{Name: "talker.model.norm.weight", DType: safetensors.F32, Shape: []int{64}, Data: safetensors.F32Bytes(make([]float32, 64))}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), []safetensors.WriteTensor{one}, nil); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"inspect", dir}, {"inspect", "--json", dir}} {
		var out, errb bytes.Buffer
		if rc := run(args, &out, &errb); rc != 1 {
			t.Errorf("%v: exit %d, want 1", args, rc)
		}
		if !strings.Contains(out.String(), "missing tensor") || !strings.Contains(out.String(), "talker.model.text_embedding.weight") {
			t.Errorf("%v: report does not say what is missing:\n%s", args, out.String())
		}
		if !strings.Contains(errb.String(), "not complete") {
			t.Errorf("%v: stderr %q", args, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"inspect"}, &out, &errb); rc != 2 {
		t.Errorf("no directory: exit %d, want 2", rc)
	}
}

// A NaN in a weight makes inspect report the checkpoint incomplete and name
// the tensor; before, inspect said "complete yes" and say failed later with
// "no finite logit".
func TestInspectNamesNonFiniteTensor(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := t.TempDir()
	for _, name := range []string{"config.json", "generation_config.json", "vocab.json", "merges.txt", "tokenizer_config.json", "speech_tokenizer"} {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	orig, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	const victim = "talker.codec_head.weight"
	var ts []safetensors.WriteTensor
	for _, name := range orig.Names() {
		info, raw, _ := orig.Raw(name)
		if name == victim {
			raw = append([]byte(nil), raw...)
			switch info.DType {
			case safetensors.BF16:
				raw[0], raw[1] = 0xc0, 0x7f // a quiet NaN
			case safetensors.F32:
				raw[0], raw[1], raw[2], raw[3] = 0, 0, 0xc0, 0x7f
			}
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: info.Shape, Data: raw})
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"inspect", dir}, &out, &errb); rc != 1 {
		t.Fatalf("exit %d, want 1: %s", rc, out.String())
	}
	if !strings.Contains(out.String(), victim+" (element 0)") || !strings.Contains(out.String(), "NaN or Inf") {
		t.Errorf("report does not name the tensor:\n%s", out.String())
	}
}
