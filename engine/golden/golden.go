// Package golden finds the shared golden data (tiny checkpoints and the
// official implementation's outputs) for tests, and compares tensors with the
// manifest's tolerance classes. Tests call Require; without the data they skip
// with a clear message, except under CI, where missing data is a failure.
package golden

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"talkbox/engine/safetensors"
)

// EnvVar overrides the golden directory.
const EnvVar = "TALKBOX_GOLDEN"

// Dir locates the golden directory: $TALKBOX_GOLDEN, else
// <repo root>/../shared/testdata/golden, the repo root being the nearest
// ancestor of the working directory that holds go.mod.
func Dir() (string, error) {
	if d := os.Getenv(EnvVar); d != "" {
		if _, err := os.Stat(filepath.Join(d, "manifest.json")); err != nil {
			return "", fmt.Errorf("golden: %s=%s has no manifest.json: %w", EnvVar, d, err)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			g := filepath.Join(filepath.Dir(d), "shared", "testdata", "golden")
			if _, err := os.Stat(filepath.Join(g, "manifest.json")); err != nil {
				return "", fmt.Errorf("golden: no data at %s (set %s)", g, EnvVar)
			}
			return g, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("golden: no go.mod above the working directory")
		}
	}
}

// Require returns the golden directory or skips the test (fails under CI).
func Require(t testing.TB) string {
	t.Helper()
	d, err := Dir()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("golden data is required in CI: %v", err)
		}
		t.Skipf("skipping: golden data not found: %v", err)
	}
	return d
}

// Checkpoint returns the path of a tiny checkpoint, e.g. "qwen3-tts-tiny-customvoice".
func Checkpoint(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Require(t), "checkpoints", name)
}

// Manifest is the part of manifest.json the tests use.
type Manifest struct {
	Cases map[string]struct {
		File       string         `json:"file"`
		Checkpoint string         `json:"checkpoint"`
		Inputs     map[string]any `json:"inputs"`
	} `json:"cases"`
	TolClasses map[string]any `json:"tolerance_classes"`
}

// LoadManifest reads manifest.json.
func LoadManifest(t testing.TB) *Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Require(t), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return &m
}

// CaseNames lists the cases whose checkpoint is one of the given ones (all when
// none given), sorted.
func CaseNames(t testing.TB, checkpoints ...string) []string {
	t.Helper()
	m := LoadManifest(t)
	var out []string
	for name, c := range m.Cases {
		if len(checkpoints) == 0 {
			out = append(out, name)
			continue
		}
		for _, ck := range checkpoints {
			if c.Checkpoint == ck {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Case is one opened case file.
type Case struct {
	Name       string
	Checkpoint string // directory of the checkpoint it was made with
	File       *safetensors.File
	Meta       map[string]any // the "meta" JSON of the safetensors metadata
	t          testing.TB
}

// OpenCase opens cases/<name>.safetensors and parses its meta JSON.
func OpenCase(t testing.TB, name string) *Case {
	t.Helper()
	dir := Require(t)
	m := LoadManifest(t)
	mc, ok := m.Cases[name]
	if !ok {
		t.Fatalf("golden: no case %q in manifest", name)
	}
	f, err := safetensors.Open(filepath.Join(dir, mc.File))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c := &Case{Name: name, File: f, t: t, Checkpoint: filepath.Join(dir, "checkpoints", mc.Checkpoint)}
	if s, ok := f.Metadata["meta"]; ok {
		if err := json.Unmarshal([]byte(s), &c.Meta); err != nil {
			t.Fatalf("golden: case %s meta: %v", name, err)
		}
	}
	return c
}

// WavePair names a case's codes and the official waveform decoded from them.
type WavePair struct{ Codes, Wav string }

// WavePairs lists a case's codes with their waveform: "codes"/"wav", or
// "codes_i"/"wav_i" for each utterance of a batched case; none when the case
// has no waveform.
func (c *Case) WavePairs() []WavePair {
	switch {
	case c.Has("codes") && c.Has("wav"):
		return []WavePair{{"codes", "wav"}}
	case c.Has("codes_0"):
		var pairs []WavePair
		for i := 0; c.Has(fmt.Sprintf("codes_%d", i)); i++ {
			pairs = append(pairs, WavePair{fmt.Sprintf("codes_%d", i), fmt.Sprintf("wav_%d", i)})
		}
		return pairs
	}
	return nil
}

// Has reports whether the case holds a tensor.
func (c *Case) Has(name string) bool { _, ok := c.File.Info(name); return ok }

// Shape returns a tensor's shape.
func (c *Case) Shape(name string) []int {
	c.t.Helper()
	info, ok := c.File.Info(name)
	if !ok {
		c.t.Fatalf("golden case %s: no tensor %q", c.Name, name)
	}
	return info.Shape
}

// F32 reads a float tensor.
func (c *Case) F32(name string) []float32 {
	c.t.Helper()
	v, err := c.File.F32(name)
	if err != nil {
		c.t.Fatalf("golden case %s: %v", c.Name, err)
	}
	return v
}

// I64 reads an integer tensor.
func (c *Case) I64(name string) []int64 {
	c.t.Helper()
	v, err := c.File.I64(name)
	if err != nil {
		c.t.Fatalf("golden case %s: %v", c.Name, err)
	}
	return v
}

// Input returns a string input from the case's meta (meta.case.<key>).
func (c *Case) Input(key string) (any, bool) {
	cs, ok := c.Meta["case"].(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := cs[key]
	return v, ok
}

// MaxAbs is the largest |x|.
func MaxAbs(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

// MaxAbsDiff is the largest |a-b| (NaN anywhere gives +Inf); lengths must match.
func MaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d != d {
			return math.Inf(1)
		}
		m = math.Max(m, d)
	}
	return m
}

// ActivationTol is the manifest's activation class for a float32
// implementation: 1e-4 * max(1, max|golden|), scaled by rel for other classes.
func ActivationTol(want []float32, rel float64) float64 {
	return rel * math.Max(1, MaxAbs(want))
}

// AssertClose fails when got and want differ by more than tol (absolute) and
// returns the measured difference so tests can report it.
func AssertClose(t testing.TB, what string, got, want []float32, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: length %d, want %d", what, len(got), len(want))
		return math.Inf(1)
	}
	d := MaxAbsDiff(got, want)
	if d > tol {
		t.Errorf("%s: max abs diff %.3g exceeds %.3g", what, d, tol)
	}
	return d
}

// AssertCodes fails t unless got, frames of 16 codes, equals want, the
// official codes flattened frame by frame: the frame count first, then the
// first code that differs.
func AssertCodes[C ~[16]int32](t testing.TB, what string, got []C, want []int64) {
	t.Helper()
	if len(got)*16 != len(want) {
		t.Fatalf("%s: %d frames, official %d", what, len(got), len(want)/16)
	}
	for f, row := range got {
		for g, v := range row {
			if int64(v) != want[f*16+g] {
				t.Fatalf("%s: frame %d group %d: %d, official %d", what, f, g, v, want[f*16+g])
			}
		}
	}
}
