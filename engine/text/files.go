package text

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"talkbox/internal/errtext"
	"talkbox/internal/regfile"
)

// The tokenizer files of a checkpoint directory (there is no tokenizer.json).
const (
	VocabFile  = "vocab.json"
	MergesFile = "merges.txt"
	ConfigFile = "tokenizer_config.json"
)

// maxFileBytes bounds what Open reads; the released files are under 8 MiB.
const maxFileBytes = 64 << 20

// readTokenizerFile reads dir/name. A checkout made without symlink support
// (git core.symlinks=false) stores a symlink as a small file whose content is
// the link target; the golden -1b7 checkpoints ship their vocab.json and
// merges.txt that way. Such a file is followed once when its content is a
// relative path to a file of the same name that exists.
func readTokenizerFile(dir, name string) ([]byte, string, error) {
	path := filepath.Join(dir, name)
	b, err := regfile.ReadFile(path, maxFileBytes)
	if err != nil {
		return nil, path, fmt.Errorf("%w: %v", ErrBadFiles, err)
	}
	if target, ok := linkTarget(b, name); ok {
		linked := filepath.Join(dir, target)
		if lb, err := regfile.ReadFile(linked, maxFileBytes); err == nil {
			return lb, linked, nil
		}
	}
	return b, path, nil
}

// linkTarget reports whether b looks like a symlink target stored as text:
// short, one line, a relative path ending in the file's own name.
func linkTarget(b []byte, name string) (string, bool) {
	if len(b) == 0 || len(b) > 1024 || !utf8.Valid(b) || bytes.ContainsAny(b, "\x00\n\r{") {
		return "", false
	}
	s := string(b)
	if filepath.IsAbs(s) || filepath.Base(s) != name {
		return "", false
	}
	return s, true
}

// parseVocab checks vocab.json: a JSON object of token -> id with distinct,
// non-negative ids. It returns the map (for template ids) and its inverse.
func parseVocab(path string, b []byte) (map[string]int, map[int]string, error) {
	var v map[string]int
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: want an object of token -> id: %s", ErrBadFiles, path, errtext.Brief(err))
	}
	if len(v) == 0 {
		return nil, nil, fmt.Errorf("%w: %s: empty vocabulary", ErrBadFiles, path)
	}
	byID := make(map[int]string, len(v))
	for tok, id := range v {
		if id < 0 {
			return nil, nil, fmt.Errorf("%w: %s: token %.80q has negative id %d", ErrBadFiles, path, tok, id)
		}
		if other, dup := byID[id]; dup {
			return nil, nil, fmt.Errorf("%w: %s: tokens %.80q and %.80q share id %d", ErrBadFiles, path, other, tok, id)
		}
		byID[id] = tok
	}
	return v, byID, nil
}

// tokenizerConfig is the part of tokenizer_config.json Talkbox reads.
type tokenizerConfig struct {
	AddedTokensDecoder map[string]struct {
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens_decoder"`
	AddBOSToken bool `json:"add_bos_token"`
}

// parseAddedTokens returns the added tokens (content -> id) of
// tokenizer_config.json. They are never given to the BPE document; Talkbox
// only needs their ids to build the templates and to decode.
func parseAddedTokens(path string, b []byte, vocab map[string]int, vocabByID map[int]string) (map[string]int, error) {
	var c tokenizerConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrBadFiles, path, errtext.Brief(err))
	}
	if c.AddBOSToken {
		// The released files say false; Talkbox never adds a BOS, so a file
		// that asks for one describes a tokenizer this package does not build.
		return nil, fmt.Errorf("%w: %s: add_bos_token is true; Qwen3-TTS adds no BOS", ErrBadFiles, path)
	}
	added := make(map[string]int, len(c.AddedTokensDecoder))
	for key, tok := range c.AddedTokensDecoder {
		id, err := strconv.Atoi(key)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%w: %s: added token id %.80q is not a non-negative integer", ErrBadFiles, path, key)
		}
		if tok.Content == "" {
			return nil, fmt.Errorf("%w: %s: added token %d has no content", ErrBadFiles, path, id)
		}
		if vid, clash := vocab[tok.Content]; clash && vid != id {
			return nil, fmt.Errorf("%w: %s: added token %.80q has id %d but the vocabulary gives it %d", ErrBadFiles, path, tok.Content, id, vid)
		}
		if other, used := vocabByID[id]; used && other != tok.Content {
			return nil, fmt.Errorf("%w: %s: added token %.80q has id %d, which the vocabulary gives to %.80q", ErrBadFiles, path, tok.Content, id, other)
		}
		if prev, dup := added[tok.Content]; dup {
			return nil, fmt.Errorf("%w: %s: added token %.80q appears with ids %d and %d", ErrBadFiles, path, tok.Content, prev, id)
		}
		added[tok.Content] = id
	}
	return added, nil
}
