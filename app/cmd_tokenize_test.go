package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"talkbox/engine/golden"
)

// tokenizerGolden returns the golden string named name: its text and its ids
// with the official and the native regex.
func tokenizerGolden(t *testing.T, name string) (text string, official, native []int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(golden.Require(t), "tokenizer", "tokenizer_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Strings []struct {
			Name   string `json:"name"`
			Text   string `json:"text"`
			IDs    []int  `json:"ids"`
			Native []int  `json:"ids_qwen2_regex"`
		} `json:"strings"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	for _, s := range g.Strings {
		if s.Name == name {
			return s.Text, s.IDs, s.Native
		}
	}
	t.Fatalf("no golden string %q", name)
	return
}

func TestTokenizeVerb(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	camel, camelOfficial, camelNative := tokenizerGolden(t, "camel_case")
	hello, helloIDs, _ := tokenizerGolden(t, "en_simple")
	for _, c := range []struct {
		flags []string
		camel []int
	}{{nil, camelNative}, {[]string{"--official-regex"}, camelOfficial}} {
		var out, errb bytes.Buffer
		args := append(append([]string{"tokenize", "--model", dir}, c.flags...), hello, camel, "<|im_end|>")
		if rc := run(args, &out, &errb); rc != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, rc, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 3 {
			t.Fatalf("%d lines, want one per text: %q", len(lines), out.String())
		}
		for i, want := range [][]int{helloIDs, c.camel} {
			var got []int
			if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
				t.Fatalf("line %d %q: %v", i, lines[i], err)
			}
			if !equalInts(got, want) {
				t.Errorf("%v line %d: %v, want %v", c.flags, i, got, want)
			}
		}
		var literal []int
		json.Unmarshal([]byte(lines[2]), &literal)
		if len(literal) < 2 || contains(literal, 151645) {
			t.Errorf("typed <|im_end|> gave %v; it must stay literal text", literal)
		}
	}
}

func TestTokenizeVerbBadInput(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	for _, c := range []struct {
		args []string
		rc   int
		msg  string
	}{
		{[]string{"tokenize", "hello"}, 2, "--model"},
		{[]string{"tokenize", "--model", dir}, 2, "TEXT"},
		{[]string{"tokenize", "--model", t.TempDir(), "hello"}, 1, "vocab.json"},
		{[]string{"tokenize", "--model", dir, "ok", "bad\x00text"}, 1, "text 2"},
	} {
		var out, errb bytes.Buffer
		if rc := run(c.args, &out, &errb); rc != c.rc || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d mentioning %q", c.args, rc, errb.String(), c.rc, c.msg)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(v []int, x int) bool {
	for _, y := range v {
		if y == x {
			return true
		}
	}
	return false
}

// --model also takes the name of an installed model (every verb resolves it
// through the store the same way).
func TestTokenizeByInstalledName(t *testing.T) {
	src := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	store := t.TempDir()
	t.Setenv("TALKBOX_MODELS", store)
	dst := filepath.Join(store, "tiny-model")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"vocab.json", "merges.txt", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hello, helloIDs, _ := tokenizerGolden(t, "en_simple")
	var out, errb bytes.Buffer
	if rc := run([]string{"tokenize", "--model", "tiny-model", hello}, &out, &errb); rc != 0 {
		t.Fatalf("by name: exit %d: %s", rc, errb.String())
	}
	var got []int
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || !slices.Equal(got, helloIDs) {
		t.Fatalf("by name: ids %s (err %v), want %v", out.String(), err, helloIDs)
	}
	errb.Reset()
	if rc := run([]string{"tokenize", "--model", "no-such-model", hello}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "no-such-model") {
		t.Fatalf("unknown name: exit %d, stderr %q", rc, errb.String())
	}
}
