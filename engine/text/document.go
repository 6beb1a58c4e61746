package text

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Qwen2Regex is the split rule of the released Qwen2 tokenizer
// (docs/design/qwen3-tts-lm.md §2). Talkbox uses it by default: it is what a
// hub-id load of the official package uses and most likely what the model was
// trained with.
const Qwen2Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// OfficialRegex is the rule the official loader ends up with when it opens a
// local model directory (transformers 4.57.3 with fix_mistral_regex=True,
// qwen3-tts-lm.md §10.12). The golden ids and every case's text_input_ids use
// it. It differs from Qwen2Regex only for case changes inside a word (iPhone,
// camelCase) and some combining marks.
const OfficialRegex = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// The tokenizer.json document, in the shape transformers writes for a Qwen2
// tokenizer (Qwen2Converter): NFC, Split(regex, Isolated) then ByteLevel
// without its own regex, byte-level BPE with empty affixes. The added tokens
// are deliberately absent: this document encodes user text only, so a typed
// "<|im_end|>" can never become a control token (docs/design/platform.md,
// Tokenizer). Template tokens are inserted by id (template.go). No
// post-processor: nothing is added around the ids.
type document struct {
	Version       string        `json:"version"`
	Truncation    any           `json:"truncation"`
	Padding       any           `json:"padding"`
	AddedTokens   []any         `json:"added_tokens"`
	Normalizer    typed         `json:"normalizer"`
	PreTokenizer  preTokenizers `json:"pre_tokenizer"`
	PostProcessor any           `json:"post_processor"`
	Decoder       byteLevel     `json:"decoder"`
	Model         bpeModel      `json:"model"`
}

type typed struct {
	Type string `json:"type"`
}

type preTokenizers struct {
	Type          string `json:"type"`
	PreTokenizers []any  `json:"pretokenizers"`
}

type split struct {
	Type     string            `json:"type"`
	Pattern  map[string]string `json:"pattern"`
	Behavior string            `json:"behavior"`
	Invert   bool              `json:"invert"`
}

type byteLevel struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	TrimOffsets    bool   `json:"trim_offsets"`
	UseRegex       bool   `json:"use_regex"`
}

type bpeModel struct {
	Type                    string          `json:"type"`
	Dropout                 any             `json:"dropout"`
	UnkToken                any             `json:"unk_token"`
	ContinuingSubwordPrefix string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         string          `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  []string        `json:"merges"`
}

// buildDocument returns the tokenizer.json bytes for the given vocab.json
// content (already validated), merge rules and split regex.
func buildDocument(vocabJSON []byte, merges []string, regex string) ([]byte, error) {
	doc := document{
		Version:     "1.0",
		AddedTokens: []any{},
		Normalizer:  typed{Type: "NFC"},
		PreTokenizer: preTokenizers{Type: "Sequence", PreTokenizers: []any{
			split{Type: "Split", Pattern: map[string]string{"Regex": regex}, Behavior: "Isolated"},
			byteLevel{Type: "ByteLevel", TrimOffsets: true},
		}},
		Decoder: byteLevel{Type: "ByteLevel"}, // the flags only matter for encoding
		Model:   bpeModel{Type: "BPE", Vocab: json.RawMessage(vocabJSON), Merges: merges},
	}
	return json.Marshal(doc)
}

// parseMerges reads merges.txt: an optional "#version" header, then one rule
// "left right" per line. Blank lines are skipped; any other shape is an error
// naming the line, since a silently dropped rule changes every tokenization.
func parseMerges(path string, b []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSuffix(sc.Text(), "\r")
		if s == "" || (line == 1 && strings.HasPrefix(s, "#version")) {
			continue
		}
		if parts := strings.Split(s, " "); len(parts) != 2 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("%w: %s line %d: want two tokens separated by one space, got %.80q", ErrBadFiles, path, line, s)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadFiles, path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: no merge rules", ErrBadFiles, path)
	}
	return out, nil
}
