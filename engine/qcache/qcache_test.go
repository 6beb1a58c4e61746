package qcache

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"talkbox/engine/qkernels"
	"talkbox/engine/safetensors"
)

func randomMatrices(t *testing.T) []*qkernels.Matrix {
	r := rand.New(rand.NewPCG(1, 2))
	var ms []*qkernels.Matrix
	for _, sh := range [][2]int{{3, 70}, {16, 32}, {1, 1}} {
		w := make([]float32, sh[0]*sh[1])
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		ms = append(ms, qkernels.Quantize(w, sh[0], sh[1], 1))
	}
	return ms
}

func equal(a, b []*qkernels.Matrix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Rows != y.Rows || x.Cols != y.Cols || x.Blocks != y.Blocks || len(x.Q) != len(y.Q) || len(x.D) != len(y.D) {
			return false
		}
		for j := range x.Q {
			if x.Q[j] != y.Q[j] {
				return false
			}
		}
		for j := range x.D {
			if x.D[j] != y.D[j] {
				return false
			}
		}
	}
	return true
}

// TestRoundTrip: what Save writes, Load gives back under the same key.
func TestRoundTrip(t *testing.T) {
	ms := randomMatrices(t)
	path := filepath.Join(t.TempDir(), "sub", "c.q8")
	key := Key{1, 2, 3}
	if err := Save(path, key, ms); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, key)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(got, ms) {
		t.Fatal("loaded matrices differ from the saved ones")
	}
}

// TestMissingStaleCorrupt: a missing file, another key, any flipped byte
// and any truncation are refused with the matching error, never returned.
func TestMissingStaleCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.q8")
	key := Key{9}
	if _, err := Load(path, key); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	ms := randomMatrices(t)
	if err := Save(path, key, ms); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Key{8}); !errors.Is(err, ErrStale) {
		t.Fatalf("other key: %v, want ErrStale", err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, 9, 41, headerBytes + 3, len(good) / 2, len(good) - trailerBytes - 1, len(good) - 2} {
		bad := append([]byte(nil), good...)
		bad[at] ^= 0x40
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, key); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrStale) {
			t.Errorf("byte %d flipped: %v, want ErrCorrupt", at, err)
		}
	}
	for _, n := range []int{0, 10, headerBytes + trailerBytes, len(good) / 2, len(good) - 1} {
		if err := os.WriteFile(path, good[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, key); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
}

// TestKeyFollowsContent: the key changes with any tensor's bytes, name or
// shape, and with the version, and not with the file's name or time stamp.
func TestKeyFollowsContent(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ts []safetensors.WriteTensor) *safetensors.File {
		p := filepath.Join(dir, name)
		if err := safetensors.Write(p, ts, nil); err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	base := func() []safetensors.WriteTensor {
		return []safetensors.WriteTensor{
			{Name: "a", DType: safetensors.F32, Shape: []int{2, 2}, Data: safetensors.F32Bytes([]float32{1, 2, 3, 4})},
			{Name: "b", DType: safetensors.F32, Shape: []int{3}, Data: safetensors.F32Bytes([]float32{5, 6, 7})},
		}
	}
	key := func(f *safetensors.File, v string) Key {
		k, err := KeyOf(f, v)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(write("m0.safetensors", base()), "v1")
	if k := key(write("copy.safetensors", base()), "v1"); k != k0 {
		t.Error("the same tensors in another file give another key")
	}
	if k := key(write("m0.safetensors", base()), "v2"); k == k0 {
		t.Error("another version gives the same key")
	}
	changed := base()
	changed[1].Data = safetensors.F32Bytes([]float32{5, 6, 7.5})
	if k := key(write("m1.safetensors", changed), "v1"); k == k0 {
		t.Error("a changed value gives the same key")
	}
	reshaped := base()
	reshaped[0].Shape = []int{4, 1}
	if k := key(write("m2.safetensors", reshaped), "v1"); k == k0 {
		t.Error("a changed shape gives the same key")
	}
	renamed := base()
	renamed[1].Name = "c"
	if k := key(write("m3.safetensors", renamed), "v1"); k == k0 {
		t.Error("a renamed tensor gives the same key")
	}
}

// TestPathFor: one file per checkpoint location.
func TestPathFor(t *testing.T) {
	a, b := PathFor("/c", "/m/one/model.safetensors"), PathFor("/c", "/m/two/model.safetensors")
	if a == b || filepath.Dir(a) != "/c" {
		t.Errorf("PathFor: %q and %q", a, b)
	}
	if PathFor("/c", "/m/one/model.safetensors") != a {
		t.Error("PathFor is not stable")
	}
}
