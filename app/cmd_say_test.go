package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/engine"
	"talkbox/engine/audioenc"
	"talkbox/engine/golden"
	"talkbox/engine/wav"
)

// `talkbox say` on the tiny CustomVoice checkpoint writes a WAV whose samples
// equal the official waveform, and a codes file equal to the official codes.
func TestSayWritesGoldenWaveform(t *testing.T) {
	c := golden.OpenCase(t, "cv_en_ryan_nonstream")
	dir := t.TempDir()
	out, codesOut := filepath.Join(dir, "out.wav"), filepath.Join(dir, "codes.json")
	text, _ := c.Input("text")
	var stdout, stderr bytes.Buffer
	code := run([]string{"say", "--model", c.Checkpoint, "--voice", "Ryan", "--lang", "English", "--streaming-text=false",
		"--greedy", "--frames", "16", "--official-regex", "--whole", "--backend", "cpu", "--precision", "f32", "--wav-format", "f32",
		"--out", out, "--codes-out", codesOut, text.(string)}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	pcm, info, err := wav.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.SampleRate != 24000 || len(pcm) != 16*1920 {
		t.Fatalf("wav %+v with %d samples", info, len(pcm))
	}
	d := golden.AssertClose(t, "say waveform", pcm, c.F32("wav"), 1e-4)
	t.Logf("say: waveform max abs diff %.3g vs official; %s", d, strings.TrimSpace(stdout.String()))
	var doc struct{ Codes [][16]int64 }
	b, _ := os.ReadFile(codesOut)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := c.I64("codes")
	for f, row := range doc.Codes {
		for g, v := range row {
			if v != want[f*16+g] {
				t.Fatalf("codes file frame %d group %d: %d, official %d", f, g, v, want[f*16+g])
			}
		}
	}
}

func TestSayBadInput(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	out := filepath.Join(t.TempDir(), "x.wav")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"say", "--model", ck, "--voice", "ryan", "--out", out}, 2, "no text"},
		{[]string{"say", "--model", ck, "--voice", "ryan", "hello"}, 2, "nothing to write"},
		{[]string{"say", "--model", ck, "--voice", "nobody", "--out", out, "hello"}, 1, "unknown voice"},
		{[]string{"say", "--model", ck, "--voice", "ryan", "--lang", "elvish", "--out", out, "hello"}, 1, "unknown language"},
		{[]string{"say", "--model", ck, "--voice", "ryan", "--streaming-text", "maybe", "--out", out, "hello"}, 2, "streaming-text"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", tc.args[5:], code, tc.code, stderr.String(), tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: a WAV was left behind", tc.args[5:])
		}
	}
}

// `say` reads long text from a file or standard input, cuts it into
// sentences as the window does (no 4000-character refusal), and writes the
// format its --out extension names.
func TestSayFileStdinAndFormats(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	dir := t.TempDir()
	long := strings.Repeat("This sentence is one of many in a long document. ", 90) // ~4500 characters
	if len([]rune(long)) <= 4000 {
		t.Fatal("test text too short")
	}
	textFile := filepath.Join(dir, "doc.txt")
	os.WriteFile(textFile, []byte(long), 0o644)
	sentences := len(engine.SplitSentences(long))

	out := filepath.Join(dir, "doc.flac")
	var stdout, stderr bytes.Buffer
	if code := run(sayArgs(ck, "--frames", "1", "--file", textFile, "--out", out), &stdout, &stderr); code != 0 {
		t.Fatalf("--file: exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	d, err := audioenc.Decode(b, audioenc.FLAC)
	if err != nil {
		t.Fatalf("--out x.flac is not FLAC: %v", err)
	}
	if len(d.PCM) != sentences*1920 || !strings.Contains(stdout.String(), fmt.Sprintf("in %d sentence(s)", sentences)) {
		t.Fatalf("%d samples for %d sentences of one frame; %q", len(d.PCM), sentences, stdout.String())
	}

	// A lone "-" reads standard input (it used to speak the text "-").
	stdin = strings.NewReader("First from stdin. Second from stdin.")
	defer func() { stdin = os.Stdin }()
	out = filepath.Join(dir, "in.ogg")
	stdout.Reset()
	if code := run(sayArgs(ck, "--frames", "2", "--out", out, "-"), &stdout, &stderr); code != 0 {
		t.Fatalf("say -: exit %d: %s", code, stderr.String())
	}
	b, _ = os.ReadFile(out)
	if d, err := audioenc.Decode(b, audioenc.Opus); err != nil || d.SourceRate != 24000 {
		t.Fatalf("--out x.ogg: %v (%+v)", err, d.SourceRate)
	}
	if !strings.Contains(stdout.String(), "in 2 sentence(s)") {
		t.Fatalf("stdin text not split: %q", stdout.String())
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{sayArgs(ck, "--file", textFile, "--out", filepath.Join(dir, "a.wav"), "extra words"), "not both"},
		{sayArgs(ck, "--out", filepath.Join(dir, "a.mp3"), "hello"), "extension"},
		{sayArgs(ck, "--wav-format", "f32", "--out", filepath.Join(dir, "a.flac"), "hello"), "WAV output only"},
		{sayArgs(ck, "--file", filepath.Join(dir, "missing.txt"), "--out", filepath.Join(dir, "a.wav")), "no such file"},
	} {
		stderr.Reset()
		if code := run(tc.args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args[7:], code, stderr.String(), tc.want)
		}
	}
}
