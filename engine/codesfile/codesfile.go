// Package codesfile reads and writes the codes JSON of `say --codes-out` and
// `decode --codes`: {"codes": [[16 ints], ...]}, one row per 80 ms frame.
// Reading streams the file token by token with a frame cap, so a huge or
// hostile file costs bounded memory and gets an error naming the limit.
package codesfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"talkbox/engine/backend"
	"talkbox/internal/regfile"
)

// MaxFrames caps a codes file: 30 minutes of audio at 12.5 frames a second,
// far beyond one utterance (the engine stops a talker at 2048 frames).
const MaxFrames = 30 * 60 * 25 / 2

// MaxBytes caps the file itself: MaxFrames rows of 16 codes take about 2.5
// MB, so this leaves room for any spacing and refuses anything larger.
const MaxBytes = 64 << 20

// MaxCode is the largest code value accepted; the codec's own check against
// its codebook size comes later (codec.CheckCodes).
const MaxCode = 1 << 20

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("not a codes file")

// File is the JSON layout.
type File struct {
	Codes []backend.Codes `json:"codes"`
}

// Write encodes codes as one JSON line.
func Write(w io.Writer, codes []backend.Codes) error {
	if codes == nil {
		codes = []backend.Codes{}
	}
	b, err := json.Marshal(File{Codes: codes})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadFile reads a codes file (a regular file of at most MaxBytes); errors
// name the path.
func ReadFile(path string) ([]backend.Codes, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > MaxBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes, at most %d", path, ErrFormat, st.Size(), MaxBytes)
	}
	codes, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return codes, nil
}

// Read parses a codes document from r, reading at most MaxBytes. Keys other
// than "codes" are skipped; a document without "codes", with no frames, with
// a row that is not 16 integers in 0..MaxCode, or with more than MaxFrames
// rows is an error that wraps ErrFormat and names the frame.
func Read(r io.Reader) ([]backend.Codes, error) {
	lr := &io.LimitedReader{R: r, N: MaxBytes + 1}
	d := json.NewDecoder(lr)
	d.UseNumber()
	fail := func(err error) ([]backend.Codes, error) {
		if lr.N <= 0 {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrFormat, MaxBytes)
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if err := expectDelim(d, '{'); err != nil {
		return fail(err)
	}
	var codes []backend.Codes
	found := false
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return fail(err)
		}
		key, _ := tok.(string)
		if key != "codes" {
			if err := skipValue(d); err != nil {
				return fail(err)
			}
			continue
		}
		if found {
			return fail(errors.New(`"codes" given twice`))
		}
		found = true
		if codes, err = readRows(d); err != nil {
			return fail(err)
		}
	}
	if err := expectDelim(d, '}'); err != nil {
		return fail(err)
	}
	if _, err := d.Token(); err != io.EOF {
		return fail(errors.New("data after the JSON object"))
	}
	if !found {
		return nil, fmt.Errorf(`%w: no "codes" key`, ErrFormat)
	}
	if len(codes) == 0 {
		return nil, fmt.Errorf("%w: no frames", ErrFormat)
	}
	return codes, nil
}

func readRows(d *json.Decoder) ([]backend.Codes, error) {
	if err := expectDelim(d, '['); err != nil {
		return nil, fmt.Errorf(`"codes": %w`, err)
	}
	var codes []backend.Codes
	for d.More() {
		i := len(codes)
		if i >= MaxFrames {
			return nil, fmt.Errorf("more than %d frames (%d minutes of audio), the most a codes file may hold", MaxFrames, MaxFrames*2/25/60)
		}
		if err := expectDelim(d, '['); err != nil {
			return nil, fmt.Errorf("frame %d: %w", i, err)
		}
		var row backend.Codes
		g := 0
		for ; d.More(); g++ {
			if g >= backend.NumGroups {
				return nil, fmt.Errorf("frame %d has more than %d codes (one per code group)", i, backend.NumGroups)
			}
			tok, err := d.Token()
			if err != nil {
				return nil, fmt.Errorf("frame %d: %w", i, err)
			}
			n, ok := tok.(json.Number)
			if !ok {
				return nil, fmt.Errorf("frame %d group %d: %v is not an integer", i, g, tok)
			}
			v, err := n.Int64()
			if err != nil {
				return nil, fmt.Errorf("frame %d group %d: %.40q is not an integer", i, g, string(n))
			}
			if v < 0 || v > MaxCode {
				return nil, fmt.Errorf("frame %d group %d: code %d out of range 0..%d", i, g, v, MaxCode)
			}
			row[g] = int32(v)
		}
		if err := expectDelim(d, ']'); err != nil {
			return nil, fmt.Errorf("frame %d: %w", i, err)
		}
		if g != backend.NumGroups {
			return nil, fmt.Errorf("frame %d has %d codes, want %d (one per code group)", i, g, backend.NumGroups)
		}
		codes = append(codes, row)
	}
	if err := expectDelim(d, ']'); err != nil {
		return nil, fmt.Errorf(`"codes": %w`, err)
	}
	return codes, nil
}

func expectDelim(d *json.Decoder, want json.Delim) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != want {
		return fmt.Errorf("want %q, found %.40v", want, tok)
	}
	return nil
}

// maxDepth bounds the nesting of skipped values.
const maxDepth = 64

// skipValue reads past one value token by token, so an unknown key costs no
// more than its largest single token.
func skipValue(d *json.Decoder) error {
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > maxDepth {
				return fmt.Errorf("values nested deeper than %d", maxDepth)
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
