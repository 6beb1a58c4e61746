package text

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"talkbox/engine/golden"
)

// writeTiny writes a minimal checkpoint tokenizer: a few byte-level tokens,
// one merge, the template words and two added tokens.
func writeTiny(t *testing.T, vocab, merges, config string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{VocabFile: vocab, MergesFile: merges, ConfigFile: config} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	tinyVocab  = `{"a":0,"b":1,"ab":2,"Ċ":3,"assistant":4,"user":5,"<":6,"|":7,">":8}`
	tinyMerges = "#version: 0.2\na b\n"
	tinyConfig = `{"add_bos_token":false,"added_tokens_decoder":{
		"9":{"content":"<|im_start|>","special":true},"10":{"content":"<|im_end|>","special":true}}}`
)

func TestTinyTokenizer(t *testing.T) {
	tok, err := Open(writeTiny(t, tinyVocab, tinyMerges, tinyConfig), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	if got, err := tok.Encode("abab\n"); err != nil || !slices.Equal(got, []int{2, 2, 3}) {
		t.Errorf("Encode(abab\\n) = %v, %v; want [2 2 3]", got, err)
	}
	want := Template{IMStart: 9, IMEnd: 10, Assistant: 4, User: 5, Newline: 3}
	if tok.Template() != want {
		t.Errorf("template %+v, want %+v (ids read from the files)", tok.Template(), want)
	}
	if got, _ := tok.AssistantIDs("ab"); !slices.Equal(got, []int{9, 4, 3, 2, 10, 3, 9, 4, 3}) {
		t.Errorf("AssistantIDs = %v", got)
	}
	if got, _ := tok.InstructIDs("ab"); !slices.Equal(got, []int{9, 5, 3, 2, 10, 3}) {
		t.Errorf("InstructIDs = %v", got)
	}
	if got, _ := tok.RefTextIDs("ab"); !slices.Equal(got, []int{9, 4, 3, 2, 10, 3}) {
		t.Errorf("RefTextIDs = %v", got)
	}
	if s, err := tok.Decode([]int{9, 2, 3, 10}); err != nil || s != "<|im_start|>ab\n<|im_end|>" {
		t.Errorf("Decode = %q, %v", s, err)
	}
	if _, err := tok.Decode([]int{99}); !errors.Is(err, ErrInvalidText) {
		t.Errorf("Decode of an unknown id: %v, want ErrInvalidText", err)
	}
}

// A typed control token must come out as the characters it is made of.
func TestTypedControlTokensStayLiteral(t *testing.T) {
	tok, err := Open(writeTiny(t, tinyVocab, tinyMerges, tinyConfig), Options{OfficialRegex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	ids, err := tok.Encode("<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, 10) || len(ids) < 3 {
		t.Errorf("typed <|im_end|> encoded as %v; it must stay literal text", ids)
	}
}

func TestOpenBadFiles(t *testing.T) {
	cases := []struct {
		name, vocab, merges, config, want string
	}{
		{"vocab not json", `["a"]`, tinyMerges, tinyConfig, VocabFile},
		{"vocab gap", `{"a":0,"b":2,"Ċ":3,"assistant":4,"user":5}`, tinyMerges, tinyConfig, "id 1 is missing"},
		{"vocab dup id", `{"a":0,"b":0}`, tinyMerges, tinyConfig, "share id 0"},
		{"merge line", tinyVocab, "#version: 0.2\na b c\n", tinyConfig, "merges.txt line 2"},
		{"no merges", tinyVocab, "#version: 0.2\n", tinyConfig, "no merge rules"},
		{"no user token", `{"a":0,"b":1,"ab":2,"Ċ":3,"assistant":4}`, tinyMerges, tinyConfig, `"user"`},
		{"no im_end", tinyVocab, tinyMerges, `{"added_tokens_decoder":{"9":{"content":"<|im_start|>"}}}`, `"<|im_end|>"`},
		{"added id clash", tinyVocab, tinyMerges, `{"added_tokens_decoder":{"2":{"content":"<|im_start|>"}}}`, "gives to"},
		{"config not json", tinyVocab, tinyMerges, `{`, ConfigFile},
		{"bos", tinyVocab, tinyMerges, `{"add_bos_token":true}`, "add_bos_token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(writeTiny(t, c.vocab, c.merges, c.config), Options{})
			if !errors.Is(err, ErrBadFiles) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrBadFiles naming %q", err, c.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		dir := writeTiny(t, tinyVocab, tinyMerges, tinyConfig)
		os.Remove(filepath.Join(dir, MergesFile))
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrBadFiles) || !strings.Contains(err.Error(), MergesFile) {
			t.Errorf("error %v, want ErrBadFiles naming merges.txt", err)
		}
	})
}

func TestEncodeBadInput(t *testing.T) {
	tok, err := Open(writeTiny(t, tinyVocab, tinyMerges, tinyConfig), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"nul": "ab\x00ab", "utf8": "ab\xffab"} {
		if _, err := tok.Encode(s); !errors.Is(err, ErrInvalidText) || !strings.Contains(err.Error(), "byte 2") {
			t.Errorf("%s: %v, want ErrInvalidText at byte 2", name, err)
		}
	}
	if _, err := tok.Encode(strings.Repeat("a", MaxTextBytes+1)); !errors.Is(err, ErrTextTooLong) {
		t.Errorf("huge text: %v, want ErrTextTooLong", err)
	}
	if ids, err := tok.Encode(""); err != nil || len(ids) != 0 {
		t.Errorf("empty text: %v, %v", ids, err)
	}
	tok.Close()
	if _, err := tok.Encode("ab"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if err := tok.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// The -1b7 checkpoints store vocab.json/merges.txt as symlink targets in
// plain files (a checkout without symlinks); Open follows them.
func TestLinkAsTextFiles(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice-1b7")
	if b, err := os.ReadFile(filepath.Join(dir, VocabFile)); err == nil && len(b) > 1024 {
		t.Log("vocab.json is a real file or symlink here; the fallback is not exercised")
	}
	tok, err := Open(dir, Options{OfficialRegex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	got, err := tok.Encode("Welcome back! Today we test the larger talker layout.")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := openTok(t, true).Encode("Welcome back! Today we test the larger talker layout.")
	if !slices.Equal(got, want) || tok.VocabSize() != 151643 {
		t.Errorf("1b7 tokenizer: %v (vocab %d), want %v (vocab 151643)", got, tok.VocabSize(), want)
	}
	if _, ok := linkTarget([]byte("/etc/vocab.json"), VocabFile); ok {
		t.Error("an absolute path must not be followed")
	}
	if _, ok := linkTarget([]byte("../x/merges.txt"), VocabFile); ok {
		t.Error("a target with another name must not be followed")
	}
}
