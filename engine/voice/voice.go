// Package voice keeps the user's cloned voices: one small file per voice in
// a folder of the data directory (beside the models), holding the name, the
// 24 kHz reference audio, its transcript, and per Base model the data derived
// from it (the x-vector, and for in-context cloning the reference codes).
// Derived data is recomputed when a voice is first used with another model,
// so one recording serves the 0.6B and the 1.7B Base models alike.
//
// A voice file is a safetensors file (the format engine/safetensors already
// reads, checks and fuzzes): tensor "audio" (F32), per model key
// "xvector.<key>" (F32) and "codes.<key>" (I64 [T,16]); the metadata holds
// name, transcript, source and creation time.
package voice

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"talkbox/engine/backend"
	"talkbox/engine/safetensors"
	"talkbox/internal/regfile"
)

// Ext is the voice file extension.
const Ext = ".voice"

// maxFileBytes bounds a voice file: ten minutes of reference audio and its
// derived data fit many times over.
const maxFileBytes = 256 << 20

// SampleRate of the stored reference audio.
const SampleRate = 24000

// MaxNameRunes bounds a voice name (it is also a file name).
const MaxNameRunes = 64

// Errors callers branch on.
var (
	ErrBadName  = errors.New("invalid voice name")
	ErrNotFound = errors.New("no such voice")
	ErrExists   = errors.New("a voice with that name exists")
	ErrCorrupt  = errors.New("damaged voice file")
)

// Derived is what one model computed from the reference audio.
type Derived struct {
	XVector []float32       // speaker embedding, the talker's width
	Codes   []backend.Codes // reference codes (ICL); nil without a transcript
}

// Voice is one cloned voice.
type Voice struct {
	Name       string
	Transcript string    // what the reference audio says; empty: x-vector only
	Audio      []float32 // mono, 24 kHz
	Source     string    // where the audio came from (file name or "microphone")
	Created    time.Time
	Derived    map[string]Derived // by model key (see engine/voice.ModelKey)
}

// Mode is "icl" when the voice has a transcript (x-vector, reference codes
// and text), else "x-vector".
func (v *Voice) Mode() string {
	if strings.TrimSpace(v.Transcript) != "" {
		return "icl"
	}
	return "x-vector"
}

// Seconds is the reference audio's duration.
func (v *Voice) Seconds() float64 { return float64(len(v.Audio)) / SampleRate }

// ValidName checks a voice name: 1 to 64 characters, letters, digits,
// spaces and - _ . ' ( ), not starting with a dot or a space, no path
// characters, and not a name the file system treats specially.
func ValidName(name string) error {
	n := utf8.RuneCountInString(name)
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%w: the name is empty", ErrBadName)
	case n > MaxNameRunes:
		return fmt.Errorf("%w: %d characters, at most %d", ErrBadName, n, MaxNameRunes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrBadName)
	case name != strings.TrimSpace(name):
		return fmt.Errorf("%w: %q starts or ends with a space", ErrBadName, name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("%w: %q starts with a dot", ErrBadName, name)
	}
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == ' ' || strings.ContainsRune("-_.'()", r) {
			continue
		}
		return fmt.Errorf("%w: %q contains %q (use letters, digits, spaces and - _ . ' ( ))", ErrBadName, name, r)
	}
	return nil
}

// Library is a folder of voice files.
type Library struct{ Dir string }

// DirBeside is the voices folder beside a models folder: <parent>/voices.
func DirBeside(modelsDir string) string { return filepath.Join(filepath.Dir(modelsDir), "voices") }

// fileName maps a name to its file: names are compared case-insensitively
// (one voice per name on every file system), so the file is the lower-cased
// name.
func (l *Library) path(name string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	return filepath.Join(l.Dir, strings.ToLower(name)+Ext), nil
}

// Exists reports whether a voice of that name is stored.
func (l *Library) Exists(name string) bool {
	p, err := l.path(name)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// Save writes v (replacing a voice of the same name) atomically.
func (l *Library) Save(v *Voice) error {
	p, err := l.path(v.Name)
	if err != nil {
		return err
	}
	if len(v.Audio) == 0 {
		return fmt.Errorf("voice %q: no reference audio", v.Name)
	}
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return fmt.Errorf("voices folder: %w", err)
	}
	tensors := []safetensors.WriteTensor{{Name: "audio", DType: safetensors.F32, Shape: []int{len(v.Audio)}, Data: safetensors.F32Bytes(v.Audio)}}
	for key, d := range v.Derived {
		if len(d.XVector) > 0 {
			tensors = append(tensors, safetensors.WriteTensor{Name: "xvector." + key, DType: safetensors.F32, Shape: []int{len(d.XVector)}, Data: safetensors.F32Bytes(d.XVector)})
		}
		if len(d.Codes) > 0 {
			flat := make([]int64, 0, len(d.Codes)*backend.NumGroups)
			for _, f := range d.Codes {
				for _, c := range f {
					flat = append(flat, int64(c))
				}
			}
			tensors = append(tensors, safetensors.WriteTensor{Name: "codes." + key, DType: safetensors.I64, Shape: []int{len(d.Codes), backend.NumGroups}, Data: safetensors.I64Bytes(flat)})
		}
	}
	created := v.Created
	if created.IsZero() {
		created = time.Now()
	}
	meta := map[string]string{"format": "talkbox-voice-1", "name": v.Name, "transcript": v.Transcript,
		"source": v.Source, "created": created.UTC().Format(time.RFC3339)}
	return safetensors.Write(p, tensors, meta)
}

// Load reads one voice.
func (l *Library) Load(name string) (*Voice, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	v, err := readFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q (voice list shows the saved voices)", ErrNotFound, name)
	}
	return v, err
}

// readFile parses a voice file; every problem but a missing file is ErrCorrupt.
func readFile(p string) (*Voice, error) {
	bad := func(format string, a ...any) (*Voice, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrCorrupt, p, fmt.Sprintf(format, a...))
	}
	// A regular file of bounded size: a FIFO or device named like a voice
	// must not hang the voice list.
	b, err := regfile.ReadFile(p, maxFileBytes)
	if errors.Is(err, regfile.ErrNotRegular) || errors.Is(err, regfile.ErrTooLarge) {
		return bad("%v", err)
	}
	if err != nil {
		return nil, err
	}
	f, err := safetensors.Parse(p, b)
	if err != nil {
		return bad("%v", err)
	}
	if f.Metadata["format"] != "talkbox-voice-1" {
		return bad("not a talkbox voice file (format %q)", f.Metadata["format"])
	}
	v := &Voice{Name: f.Metadata["name"], Transcript: f.Metadata["transcript"], Source: f.Metadata["source"], Derived: map[string]Derived{}}
	if err := ValidName(v.Name); err != nil {
		return bad("%v", err)
	}
	if strings.ToLower(v.Name)+Ext != filepath.Base(p) {
		return bad("the file holds voice %q", v.Name)
	}
	v.Created, _ = time.Parse(time.RFC3339, f.Metadata["created"])
	if v.Audio, err = f.F32("audio"); err != nil || len(v.Audio) == 0 {
		return bad("no reference audio (%v)", err)
	}
	for _, name := range f.Names() {
		key, ok := strings.CutPrefix(name, "xvector.")
		if !ok {
			continue
		}
		x, err := f.F32(name)
		if err != nil {
			return bad("%v", err)
		}
		d := Derived{XVector: x}
		if info, ok := f.Info("codes." + key); ok {
			if len(info.Shape) != 2 || info.Shape[1] != backend.NumGroups {
				return bad("codes.%s has shape %v", key, info.Shape)
			}
			raw, err := f.I64("codes." + key)
			if err != nil {
				return bad("%v", err)
			}
			d.Codes = make([]backend.Codes, info.Shape[0])
			for i := range d.Codes {
				for g := 0; g < backend.NumGroups; g++ {
					c := raw[i*backend.NumGroups+g]
					if c < 0 || c > 1<<20 {
						return bad("codes.%s: code %d out of range", key, c)
					}
					d.Codes[i][g] = int32(c)
				}
			}
		}
		v.Derived[key] = d
	}
	return v, nil
}

// Summary is one entry of List.
type Summary struct {
	Name       string
	Mode       string
	Seconds    float64
	Transcript string
	Created    time.Time
}

// List returns the stored voices sorted by name, and one error per file
// that could not be read (reported, skipped, never fatal). A missing folder
// is an empty library.
func (l *Library) List() ([]Summary, []error) {
	entries, err := os.ReadDir(l.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("voices folder: %w", err)}
	}
	var out []Summary
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), Ext) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		v, err := readFile(filepath.Join(l.Dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Summary{Name: v.Name, Mode: v.Mode(), Seconds: v.Seconds(), Transcript: v.Transcript, Created: v.Created})
	}
	slices.SortFunc(out, func(a, b Summary) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out, errs
}

// Remove deletes a voice.
func (l *Library) Remove(name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	} else if err != nil {
		return err
	}
	return nil
}
