package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/safetensors"
	"talkbox/engine/wav"
)

// writeCodes writes rows as a codes file and returns its path.
func writeCodes(t *testing.T, rows any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"codes": rows})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "codes.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func goldenCodes(t *testing.T, c *golden.Case) [][]int64 {
	raw := c.I64("codes")
	var rows [][]int64
	for i := 0; i < len(raw); i += 16 {
		rows = append(rows, raw[i:i+16])
	}
	return rows
}

// TestDecodeVerbMatchesGolden runs the verb in both modes and both formats on
// a golden case and compares the file's samples with the official wav.
func TestDecodeVerbMatchesGolden(t *testing.T) {
	c := golden.OpenCase(t, "cv_en_ryan_nonstream")
	codes := writeCodes(t, goldenCodes(t, c))
	want := c.F32("wav")
	for _, tc := range []struct {
		mode, format string
		tol          float64
	}{{"official", "f32", 1e-4}, {"streaming", "f32", 1e-4}, {"official", "s16", 1e-4 + 0.5/32767}} {
		out := filepath.Join(t.TempDir(), "out.wav")
		var stdout, stderr bytes.Buffer
		code := run([]string{"decode", "--model", c.Checkpoint, "--codes", codes, "--out", out, "--mode", tc.mode, "--wav-format", tc.format}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("%s/%s: exit %d: %s", tc.mode, tc.format, code, stderr.String())
		}
		got, info, err := wav.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if info.SampleRate != 24000 || info.Channels != 1 || info.Format.String() != tc.format {
			t.Errorf("%s/%s: header %+v", tc.mode, tc.format, info)
		}
		diff := golden.AssertClose(t, tc.mode+"/"+tc.format, got, want, tc.tol)
		t.Logf("%s/%s: max abs diff %.3g (%s)", tc.mode, tc.format, diff, strings.TrimSpace(stdout.String()))
	}
}

// TestDecodeVerbBadInput: every bad input is a clear error (exit 1 or 2),
// never a panic, and leaves no output file.
func TestDecodeVerbBadInput(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	row := make([]int, 16)
	bad := make([]int, 16)
	bad[3] = 2048
	broken := brokenCodecDir(t, ck)
	cases := []struct {
		name  string
		args  func(codes string) []string
		codes any
		exit  int
		msg   string
	}{
		{"code out of range", nil, [][]int{row, bad}, 1, "frame 1 group 3"},
		{"negative code", nil, [][]int{{-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, 1, "out of range"},
		{"wrong group count", nil, [][]int{row, row[:15]}, 1, "frame 1 has 15 codes"},
		{"empty list", nil, [][]int{}, 1, "no frames"},
		{"not integers", nil, [][]float64{{1.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, 1, "not an integer"},
		{"missing flags", func(string) []string { return []string{"decode", "--model", ck} }, nil, 2, "required"},
		{"bad mode", func(c string) []string {
			return []string{"decode", "--model", ck, "--codes", c, "--out", "x.wav", "--mode", "fast"}
		}, [][]int{row}, 2, "official or streaming"},
		{"bad format", func(c string) []string {
			return []string{"decode", "--model", ck, "--codes", c, "--out", "x.wav", "--wav-format", "s24"}
		}, [][]int{row}, 2, "s24"},
		{"mismatched checkpoint", func(c string) []string { return []string{"decode", "--model", broken, "--codes", c} }, [][]int{row}, 1, "decoder.pre_conv.conv.bias"},
	}
	for _, tc := range cases {
		codes := writeCodes(t, tc.codes)
		out := filepath.Join(t.TempDir(), "out.wav")
		args := []string{"decode", "--model", ck, "--codes", codes, "--out", out}
		if tc.args != nil {
			args = append(tc.args(codes), "--out", out)
		}
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		if code != tc.exit || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", tc.name, code, stderr.String(), tc.exit, tc.msg)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: left an output file", tc.name)
		}
	}
}

// brokenCodecDir makes a standalone speech-tokenizer directory whose weights
// lack one decoder tensor.
func brokenCodecDir(t *testing.T, ck string) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(ck, "speech_tokenizer", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := safetensors.Open(filepath.Join(ck, "speech_tokenizer", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []safetensors.WriteTensor
	for _, n := range src.Names() {
		if n == "decoder.pre_conv.conv.bias" {
			continue
		}
		info, raw, err := src.Raw(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: info.DType, Shape: info.Shape, Data: raw})
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(fmt.Errorf("write broken codec: %w", err))
	}
	return dir
}
