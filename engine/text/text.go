// Package text is Talkbox's text front end: the Qwen2 byte-level BPE tokenizer
// of a Qwen3-TTS checkpoint, run by the Hugging Face tokenizers library
// (github.com/daulet/tokenizers), and the chat templates of
// docs/design/qwen3-tts-lm.md §2, whose control tokens are inserted by id.
//
// The checkpoint ships vocab.json, merges.txt and tokenizer_config.json but no
// tokenizer.json, so Open builds that document in memory (document.go).
// User text never yields control tokens: the document knows no added tokens,
// so a typed "<|im_end|>" is encoded as the characters it is made of.
package text

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/daulet/tokenizers"

	"talkbox/internal/errtext"
)

// Errors callers can branch on.
var (
	ErrBadFiles    = errors.New("bad tokenizer files")
	ErrInvalidText = errors.New("invalid text")
	ErrTextTooLong = errors.New("text too long")
	ErrClosed      = errors.New("tokenizer closed")
)

// MaxTextBytes bounds one Encode call. Far above any utterance (the model's
// context is 32768 positions), it keeps a runaway paste from stalling the
// tokenizer.
const MaxTextBytes = 1 << 20

// Options select the tokenizer variant.
type Options struct {
	// OfficialRegex uses the split rule of a local-directory official run
	// (OfficialRegex) instead of the native Qwen2 rule (Qwen2Regex).
	OfficialRegex bool
}

// Template holds the ids the chat templates are made of, read from the
// checkpoint's files.
type Template struct {
	IMStart   int // <|im_start|> (tokenizer_config.json)
	IMEnd     int // <|im_end|> (tokenizer_config.json)
	Assistant int // "assistant" (vocab.json)
	User      int // "user" (vocab.json)
	Newline   int // "\n", byte-level "Ċ" (vocab.json)
}

// Tokenizer encodes user text. It is safe for concurrent use.
type Tokenizer struct {
	mu        sync.RWMutex // Encode/Decode read-lock; Close write-locks
	lib       *tokenizers.Tokenizer
	baseSize  int            // BPE vocabulary ids are 0..baseSize-1
	added     map[string]int // added tokens of tokenizer_config.json
	addedByID map[int]string
	tmpl      Template
	opt       Options
}

// Open builds the tokenizer of the checkpoint in modelDir.
func Open(modelDir string, opt Options) (*Tokenizer, error) {
	var files [3]tokenizerFile
	for i, name := range []string{VocabFile, MergesFile, ConfigFile} {
		b, path, err := readTokenizerFile(modelDir, name)
		if err != nil {
			return nil, err
		}
		files[i] = tokenizerFile{path, b}
	}
	p, err := parseFiles(files[0], files[1], files[2], opt)
	if err != nil {
		return nil, err
	}
	vocab, added, tmpl, doc := p.vocab, p.added, p.tmpl, p.doc
	lib, err := tokenizers.FromBytes(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%s, %s): %s", ErrBadFiles, modelDir, VocabFile, MergesFile, errtext.Brief(err))
	}
	t := &Tokenizer{lib: lib, baseSize: len(vocab), added: added, addedByID: map[int]string{}, tmpl: tmpl, opt: opt}
	for s, id := range added {
		t.addedByID[id] = s
	}
	return t, nil
}

// tokenizerFile is one file's path (for messages) and bytes.
type tokenizerFile struct {
	path string
	b    []byte
}

// parsed is what the Go side makes of the three tokenizer files.
type parsed struct {
	vocab map[string]int
	added map[string]int
	tmpl  Template
	doc   []byte // the tokenizer.json handed to the library
}

// parseFiles checks vocab.json, merges.txt and tokenizer_config.json and
// builds the tokenizer.json document; every problem wraps ErrBadFiles.
func parseFiles(vocabF, mergesF, cfgF tokenizerFile, opt Options) (*parsed, error) {
	vocab, byID, err := parseVocab(vocabF.path, vocabF.b)
	if err != nil {
		return nil, err
	}
	for id := 0; id < len(vocab); id++ {
		if _, ok := byID[id]; !ok {
			return nil, fmt.Errorf("%w: %s: ids are not 0..%d (id %d is missing)", ErrBadFiles, vocabF.path, len(vocab)-1, id)
		}
	}
	merges, err := parseMerges(mergesF.path, mergesF.b)
	if err != nil {
		return nil, err
	}
	added, err := parseAddedTokens(cfgF.path, cfgF.b, vocab, byID)
	if err != nil {
		return nil, err
	}
	tmpl, err := templateIDs(vocab, added, vocabF.path, cfgF.path)
	if err != nil {
		return nil, err
	}
	regex := Qwen2Regex
	if opt.OfficialRegex {
		regex = OfficialRegex
	}
	doc, err := buildDocument(vocabF.b, merges, regex)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrBadFiles, filepath.Dir(vocabF.path), errtext.Brief(err))
	}
	return &parsed{vocab: vocab, added: added, tmpl: tmpl, doc: doc}, nil
}

func templateIDs(vocab, added map[string]int, vocabPath, cfgPath string) (Template, error) {
	var missing []string
	get := func(m map[string]int, key, file string) int {
		id, ok := m[key]
		if !ok {
			missing = append(missing, fmt.Sprintf("%q in %s", key, file))
		}
		return id
	}
	t := Template{
		IMStart:   get(added, "<|im_start|>", cfgPath),
		IMEnd:     get(added, "<|im_end|>", cfgPath),
		Assistant: get(vocab, "assistant", vocabPath),
		User:      get(vocab, "user", vocabPath),
		Newline:   get(vocab, "Ċ", vocabPath), // byte-level BPE spells "\n" as U+010A
	}
	if len(missing) > 0 {
		return Template{}, fmt.Errorf("%w: template tokens missing: %s", ErrBadFiles, strings.Join(missing, ", "))
	}
	return t, nil
}

// Template returns the ids the chat templates are built from.
func (t *Tokenizer) Template() Template { return t.tmpl }

// Options returns the options the tokenizer was opened with.
func (t *Tokenizer) Options() Options { return t.opt }

// VocabSize is the number of BPE tokens (added tokens not counted).
func (t *Tokenizer) VocabSize() int { return t.baseSize }

// AddedTokens returns a copy of tokenizer_config.json's added tokens
// (content -> id). Encode never produces them.
func (t *Tokenizer) AddedTokens() map[string]int {
	out := make(map[string]int, len(t.added))
	for k, v := range t.added {
		out[k] = v
	}
	return out
}

// Encode tokenizes user text (NFC, split, byte-level BPE). Control tokens
// typed in s stay literal text. Empty text gives no ids. Text that is not
// valid UTF-8 or holds a NUL byte is refused rather than silently altered
// (the C boundary would cut at NUL; the library would replace bad bytes).
func (t *Tokenizer) Encode(s string) ([]int, error) {
	if len(s) > MaxTextBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTextTooLong, len(s), MaxTextBytes)
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: not valid UTF-8 at byte %d", ErrInvalidText, invalidUTF8At(s))
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return nil, fmt.Errorf("%w: NUL character at byte %d", ErrInvalidText, i)
	}
	if s == "" {
		return []int{}, nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.lib == nil {
		return nil, ErrClosed
	}
	enc := t.lib.EncodeWithOptions(s, false)
	if len(enc.IDs) == 0 {
		// Byte-level BPE covers every byte, so only a library failure gets here.
		return nil, fmt.Errorf("%w: the tokenizer returned no ids for %d bytes of text", ErrInvalidText, len(s))
	}
	ids := make([]int, len(enc.IDs))
	for i, id := range enc.IDs {
		ids[i] = int(id)
	}
	return ids, nil
}

// Decode turns ids back into text. Added tokens (template ids) decode to
// their content; an id the tokenizer does not know is an error.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.lib == nil {
		return "", ErrClosed
	}
	var b strings.Builder
	var run []uint32
	flush := func() {
		if len(run) > 0 {
			b.WriteString(t.lib.Decode(run, false))
			run = run[:0]
		}
	}
	for _, id := range ids {
		switch content, isAdded := t.addedByID[id]; {
		case isAdded:
			flush()
			b.WriteString(content)
		case id >= 0 && id < t.baseSize:
			run = append(run, uint32(id))
		default:
			return "", fmt.Errorf("%w: unknown token id %d", ErrInvalidText, id)
		}
	}
	flush()
	return b.String(), nil
}

// Close frees the library tokenizer. Later calls return ErrClosed.
func (t *Tokenizer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lib != nil {
		t.lib.Close()
		t.lib = nil
	}
	return nil
}

func invalidUTF8At(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(s)
}
