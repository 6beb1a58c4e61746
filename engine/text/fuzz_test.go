package text

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func seedFile(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "seed", name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// The seed files make a tokenizer the Go side accepts.
func TestSeedFilesParse(t *testing.T) {
	var files [3]tokenizerFile
	for i, n := range []string{VocabFile, MergesFile, ConfigFile} {
		b, err := os.ReadFile(filepath.Join("testdata", "seed", n))
		if err != nil {
			t.Fatal(err)
		}
		files[i] = tokenizerFile{n, b}
	}
	p, err := parseFiles(files[0], files[1], files[2], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.tmpl.IMStart != 6 || p.tmpl.Newline != 5 || !json.Valid(p.doc) {
		t.Fatalf("%+v", p.tmpl)
	}
}

// FuzzTokenizerFiles: vocab.json, merges.txt and tokenizer_config.json never
// panic the Go side; a rejection wraps ErrBadFiles with a short message;
// what is accepted is consistent (contiguous ids, a valid document no larger
// than its inputs warrant).
func FuzzTokenizerFiles(f *testing.F) {
	f.Add(seedFile(f, VocabFile), seedFile(f, MergesFile), seedFile(f, ConfigFile))
	f.Add([]byte(`{}`), []byte("a b\n"), []byte(`{}`))
	f.Add([]byte(`{"a": -1}`), []byte("#version\n\n"), []byte(`{"add_bos_token": true}`))
	f.Fuzz(func(t *testing.T, vocab, merges, cfg []byte) {
		p, err := parseFiles(tokenizerFile{"vocab.json", vocab}, tokenizerFile{"merges.txt", merges},
			tokenizerFile{"tokenizer_config.json", cfg}, Options{})
		if err != nil {
			if !errors.Is(err, ErrBadFiles) {
				t.Fatalf("error does not wrap ErrBadFiles: %v", err)
			}
			if len(err.Error()) > 2000 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if !json.Valid(vocab) || !json.Valid(p.doc) {
			t.Fatal("accepted invalid JSON")
		}
		for _, id := range p.vocab {
			if id < 0 || id >= len(p.vocab) {
				t.Fatalf("id %d outside 0..%d", id, len(p.vocab)-1)
			}
		}
		if len(p.doc) > 2*(len(vocab)+len(merges))+4096 {
			t.Fatalf("document of %d bytes from %d input bytes", len(p.doc), len(vocab)+len(merges))
		}
	})
}
