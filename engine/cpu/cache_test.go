package cpu

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"talkbox/engine/golden"
	"talkbox/engine/model"
	"talkbox/engine/qcache"
	"talkbox/engine/qkernels"
	"talkbox/engine/safetensors"
)

// int8Matrices lists the LM's int8 matrices in load order.
func int8Matrices(lm *LM) []*qkernels.Matrix {
	var ms []*qkernels.Matrix
	add := func(w *weight) {
		if w != nil {
			ms = append(ms, w.q)
		}
	}
	stack := func(s *stack) {
		for _, l := range s.layers {
			add(l.qkv)
			add(l.o)
			add(l.gateUp)
			add(l.down)
		}
	}
	stack(lm.talker)
	add(lm.codecHead)
	stack(lm.cp)
	for _, h := range lm.lmHead {
		add(h)
	}
	add(lm.cpProj)
	return ms
}

func sameMatrices(t *testing.T, what string, a, b []*qkernels.Matrix) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d matrices, want %d", what, len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Rows != y.Rows || x.Cols != y.Cols || len(x.Q) != len(y.Q) || len(x.D) != len(y.D) {
			t.Fatalf("%s: matrix %d is %dx%d, want %dx%d", what, i, x.Rows, x.Cols, y.Rows, y.Cols)
		}
		for j := range x.Q {
			if x.Q[j] != y.Q[j] {
				t.Fatalf("%s: matrix %d value %d differs", what, i, j)
			}
		}
		for j := range x.D {
			if x.D[j] != y.D[j] {
				t.Fatalf("%s: matrix %d scale %d differs", what, i, j)
			}
		}
	}
}

func openInt8(t *testing.T, dir, cacheDir string) *LM {
	t.Helper()
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lm, err := New(m, Options{Precision: Int8, CacheDir: cacheDir, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return lm
}

// copyCheckpoint copies a checkpoint folder's files (not its speech
// tokenizer) so a test can change its weights in place.
func copyCheckpoint(t *testing.T, src string) string {
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestWeightCache: the first int8 load writes the cache, the second reads
// it and gets the very matrices a load without cache builds; a damaged cache
// is reported and rebuilt, and a checkpoint whose weights changed in place
// (same path, so the same cache file) is quantized again, never served the
// stale matrices.
func TestWeightCache(t *testing.T) {
	dir := copyCheckpoint(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"))
	cacheDir := t.TempDir()
	want := int8Matrices(openInt8(t, dir, ""))

	first := openInt8(t, dir, cacheDir)
	if ci := first.WeightCache(); ci.Hit || ci.Err != nil || ci.Path == "" {
		t.Fatalf("first load: %+v, want a miss without error", ci)
	}
	sameMatrices(t, "built", int8Matrices(first), want)
	second := openInt8(t, dir, cacheDir)
	if ci := second.WeightCache(); !ci.Hit || ci.Err != nil {
		t.Fatalf("second load: %+v, want a hit", ci)
	}
	sameMatrices(t, "cached", int8Matrices(second), want)

	// Damaged: one byte flipped in the middle.
	path := second.WeightCache().Path
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := openInt8(t, dir, cacheDir)
	if ci := damaged.WeightCache(); ci.Hit || !errors.Is(ci.Err, qcache.ErrCorrupt) {
		t.Fatalf("damaged cache: %+v, want a miss reporting ErrCorrupt", ci)
	}
	sameMatrices(t, "rebuilt after damage", int8Matrices(damaged), want)
	if ci := openInt8(t, dir, cacheDir).WeightCache(); !ci.Hit {
		t.Fatalf("after the rebuild: %+v, want a hit", ci)
	}

	// Stale: one weight of the checkpoint changed in place.
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.WriteTensor
	for _, name := range f.Names() {
		info, raw, err := f.Raw(name)
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), raw...)
		if name == model.LayerPrefix(model.TalkerStack, 0)+model.LayerDown {
			data[1] ^= 0x10 // a high bit of the first bf16/f32 value
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: info.Shape, Data: data})
	}
	f.Close()
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	fresh := int8Matrices(openInt8(t, dir, ""))
	stale := openInt8(t, dir, cacheDir)
	if ci := stale.WeightCache(); ci.Hit || ci.Err != nil || ci.Path != path {
		t.Fatalf("changed checkpoint: %+v, want a miss on the same file", ci)
	}
	sameMatrices(t, "rebuilt after a change", int8Matrices(stale), fresh)
}

// TestWeightCacheOnlyInt8: F32 and an empty CacheDir write no cache.
func TestWeightCacheOnlyInt8(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	cacheDir := t.TempDir()
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lm, err := New(m, Options{Precision: F32, CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	if ci := lm.WeightCache(); ci.Path != "" || ci.Hit {
		t.Errorf("f32: %+v", ci)
	}
	if ents, _ := os.ReadDir(cacheDir); len(ents) != 0 {
		t.Errorf("f32 wrote %d files into the cache folder", len(ents))
	}
}
