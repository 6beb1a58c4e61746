package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/codesfile"
	"talkbox/engine/golden"
	"talkbox/engine/wav"
)

// TestVoiceAddThenSay: `voice add` from the golden reference audio (with
// and without its transcript), then `say --voice` on the tiny Base
// checkpoint reproduces the official voice-clone codes; the ICL waveform is
// the official one (reference part cut).
func TestVoiceAddThenSay(t *testing.T) {
	for _, tc := range []struct {
		caseName, voice string
		icl             bool
	}{{"base_icl_en_stream", "Ref ICL", true}, {"base_xvec_en_stream", "ref-xvec", false}} {
		t.Run(tc.caseName, func(t *testing.T) {
			c := golden.OpenCase(t, tc.caseName)
			dir := t.TempDir()
			t.Setenv(EnvVoices, filepath.Join(dir, "voices"))
			ref := filepath.Join(dir, "ref.wav")
			if err := wav.WriteFile(ref, c.F32("ref_audio"), 24000, wav.F32); err != nil {
				t.Fatal(err)
			}
			args := []string{"voice", "add", tc.voice, "--model", c.Checkpoint, "--audio", ref, "--json"}
			if tc.icl {
				refText, _ := c.Input("ref_text")
				args = append(args, "--text", refText.(string))
			}
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("voice add: exit %d: %s", code, stderr.String())
			}
			var added voiceAddResult
			if err := json.Unmarshal(stdout.Bytes(), &added); err != nil {
				t.Fatalf("voice add --json: %v: %s", err, stdout.String())
			}
			wantMode := map[bool]string{true: "icl", false: "x-vector"}[tc.icl]
			if added.Name != tc.voice || added.Mode != wantMode || added.Duration != 3 {
				t.Errorf("voice add: %+v", added)
			}
			spk := c.F32("ref_spk_embedding")
			golden.AssertClose(t, "voice add x-vector", added.XVector, spk, golden.ActivationTol(spk, 1e-4))
			if tc.icl {
				golden.AssertCodes(t, "voice add reference codes", added.Codes, c.I64("ref_code"))
			}

			stdout.Reset()
			stderr.Reset()
			if code := run([]string{"voice", "list"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), tc.voice) {
				t.Fatalf("voice list: exit %d: %s %s", code, stdout.String(), stderr.String())
			}

			text, _ := c.Input("text")
			lang, _ := c.Input("language")
			out, codesOut := filepath.Join(dir, "out.wav"), filepath.Join(dir, "codes.json")
			stdout.Reset()
			stderr.Reset()
			code := run([]string{"say", "--model", c.Checkpoint, "--voice", strings.ToUpper(tc.voice), "--lang", lang.(string),
				"--greedy", "--frames", "16", "--official-regex", "--backend", "cpu", "--precision", "f32", "--wav-format", "f32",
				"--out", out, "--codes-out", codesOut, text.(string)}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("say --voice: exit %d: %s", code, stderr.String())
			}
			got, err := codesfile.ReadFile(codesOut)
			if err != nil {
				t.Fatal(err)
			}
			golden.AssertCodes(t, "say --voice", got, c.I64("codes"))
			pcm, _, err := wav.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			d := golden.AssertClose(t, "say --voice waveform", pcm, c.F32("wav"), 1e-4)
			t.Logf("%s: 16 frames equal the official codes; waveform max abs diff %.3g; %s", tc.caseName, d, strings.TrimSpace(stdout.String()))
		})
	}
}

// TestVoiceLibraryCLI: names are validated, duplicates refused, rm works, a
// damaged file is reported by list and skipped.
func TestVoiceLibraryCLI(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvVoices, dir)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"voice", "add", "../evil", "--audio", "x.wav"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "invalid voice name") {
		t.Errorf("path name: exit %d: %s", code, stderr.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.voice"), []byte("not a voice"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"voice", "list"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "damaged voice file") ||
		!strings.Contains(stdout.String(), "no cloned voices") {
		t.Errorf("list with a damaged file: exit %d: out %q err %q", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"voice", "rm", "nobody"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "no such voice") {
		t.Errorf("rm missing: exit %d: %s", code, stderr.String())
	}
}

// TestEncodeVerb: `talkbox encode` writes the official codes of the golden
// reference audio, in the file format `decode --codes` reads.
func TestEncodeVerb(t *testing.T) {
	c := golden.OpenCase(t, "speaker_encoder_and_speech_encode")
	dir := t.TempDir()
	ref, out := filepath.Join(dir, "ref.wav"), filepath.Join(dir, "codes.json")
	if err := wav.WriteFile(ref, c.F32("ref_audio"), 24000, wav.F32); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"encode", "--model", golden.Checkpoint(t, "qwen3-tts-tiny-base"), "--audio", ref, "--codes-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := codesfile.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden.AssertCodes(t, "encode", got, c.I64("encode_codes"))
}
