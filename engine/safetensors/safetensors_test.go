package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/internal/errtext"
)

// image builds a safetensors byte image from a raw header and data block.
func image(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	f32 := []float32{1, -2.5, 3.25, 0}
	bf := []float32{1.5, -0.75, 3}
	i64 := []int64{7, -9, 1 << 40}
	err := Write(path, []WriteTensor{
		{Name: "b", DType: BF16, Shape: []int{3}, Data: BF16Bytes(bf)},
		{Name: "a", DType: F32, Shape: []int{2, 2}, Data: F32Bytes(f32)},
		{Name: "c", DType: I64, Shape: []int{3}, Data: I64Bytes(i64)},
	}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := strings.Join(f.Names(), ","); got != "a,b,c" {
		t.Errorf("names %s", got)
	}
	if f.Metadata["k"] != "v" {
		t.Errorf("metadata %v", f.Metadata)
	}
	a, _ := f.F32("a")
	for i := range f32 {
		if a[i] != f32[i] {
			t.Errorf("a[%d]=%v want %v", i, a[i], f32[i])
		}
	}
	b, _ := f.F32("b")
	for i := range bf {
		if b[i] != bf[i] { // exactly representable in bf16
			t.Errorf("b[%d]=%v want %v", i, b[i], bf[i])
		}
	}
	raw, err := f.BF16("b")
	if err != nil || len(raw) != 3 || BF16ToF32(raw[1]) != -0.75 {
		t.Errorf("BF16 view %v %v", raw, err)
	}
	c, _ := f.I64("c")
	for i := range i64 {
		if c[i] != i64[i] {
			t.Errorf("c[%d]=%v", i, c[i])
		}
	}
	if _, err := f.F32("c"); err == nil {
		t.Error("F32 of an I64 tensor must fail")
	}
	if _, err := f.F32("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor error %v", err)
	}
	if f.TotalBytes() != 16+6+24 {
		t.Errorf("total bytes %d", f.TotalBytes())
	}
}

func TestConversions(t *testing.T) {
	if F32ToBF16(1.0) != 0x3f80 || BF16ToF32(0x3f80) != 1 {
		t.Error("bf16 of 1")
	}
	// round to nearest even: 1 + 2^-8 is exactly between two bf16 values -> even (1.0)
	if got := BF16ToF32(F32ToBF16(1 + 1.0/256)); got != 1 {
		t.Errorf("tie rounding gave %v", got)
	}
	if v := BF16ToF32(F32ToBF16(float32(math.NaN()))); v == v {
		t.Error("NaN lost")
	}
	for _, tc := range []struct {
		h    uint16
		want float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x0001, 5.960464477539063e-08}, {0x7bff, 65504}, {0x0000, 0}} {
		if got := F16ToF32(tc.h); got != tc.want {
			t.Errorf("f16 %#x = %v want %v", tc.h, got, tc.want)
		}
	}
	if !math.IsInf(float64(F16ToF32(0x7c00)), 1) {
		t.Error("f16 inf")
	}
}

func TestRejectsBadFiles(t *testing.T) {
	ok := `{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	data8 := make([]byte, 8)
	cases := []struct {
		name string
		img  []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter than"},
		{"header past end", image(ok, data8)[:20], "runs past the end"},
		{"huge header length", func() []byte { b := image(ok, data8); binary.LittleEndian.PutUint64(b, 1<<40); return b }(), "exceeds"},
		{"not json", image(`{"x":`, data8), "not a JSON object"},
		{"json array", image(`[1,2]`, data8), "not a JSON object"},
		{"bad dtype", image(`{"x":{"dtype":"Q8","shape":[2],"data_offsets":[0,8]}}`, data8), "unsupported dtype"},
		{"missing field", image(`{"x":{"dtype":"F32","shape":[2]}}`, data8), "needs dtype, shape and data_offsets"},
		{"shape mismatch", image(`{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, data8), "needs 12 bytes"},
		{"past data", image(`{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, data8), "past the 8-byte data block"},
		{"reversed", image(`{"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, data8), "bad data_offsets"},
		{"negative dim", image(`{"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, data8), "bad dimension"},
		{"overflow", image(`{"x":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,8]}}`, data8), "overflows"},
		{"overlap", image(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data8), "overlap"},
		{"bad metadata", image(`{"__metadata__":{"a":1}}`, nil), "__metadata__"},
		{"three offsets", image(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, data8), "2 entries"},
	}
	for _, tc := range cases {
		_, err := Parse("t.safetensors", tc.img)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "t.safetensors") {
			t.Errorf("%s: error %q, want ErrFormat naming the file and %q", tc.name, err, tc.want)
		}
	}
	if _, err := Parse("ok", image(ok, data8)); err != nil {
		t.Errorf("valid image rejected: %v", err)
	}
	// A JSON error quotes the number it rejected; a header can hold one of
	// megabytes, and the error keeps errtext.Max bytes of it.
	huge := `{"x":{"dtype":"F32","shape":[` + strings.Repeat("3", 1<<20) + `],"data_offsets":[0,8]}}`
	if _, err := Parse("t.safetensors", image(huge, data8)); err == nil || !errors.Is(err, ErrFormat) || len(err.Error()) > 200+errtext.Max {
		t.Errorf("a megabyte-long number: error of %d bytes, want ErrFormat within %d", len(fmt.Sprint(err)), 200+errtext.Max)
	}
}

func TestOpenTruncatedFileNamesTensor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := Write(path, []WriteTensor{{Name: "w", DType: F32, Shape: []int{64}, Data: F32Bytes(make([]float32, 64))}}, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-10], 0o644)
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), `"w"`) || !strings.Contains(err.Error(), path) {
		t.Fatalf("truncated file: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("absent file opened")
	}
}

// FuzzParse: no input may panic; accepted inputs must have every tensor in range.
func FuzzParse(f *testing.F) {
	ok := `{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"a":"b"}}`
	f.Add(image(ok, make([]byte, 8)))
	f.Add(image(ok, make([]byte, 8))[:30])                                                                                                       // truncated
	f.Add(image(`{"x":{"dtype":"BF16","shape":[1000000000000],"data_offsets":[0,2]}}`, make([]byte, 2)))                                         // oversized
	f.Add(image(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8))) // overlapping
	f.Add(image(`not json at all`, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		for _, name := range sf.Names() {
			info, raw, err := sf.Raw(name)
			if err != nil || int64(len(raw)) != info.Bytes() || info.Elements()*int64(info.DType.Size()) != info.Bytes() {
				t.Fatalf("accepted tensor %q inconsistent: %+v", name, info)
			}
			if info.DType != I64 {
				if _, err := sf.F32(name); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func TestFirstNonFinite(t *testing.T) {
	inf := float32(math.Inf(-1))
	nan := float32(math.NaN())
	vals := []float32{1, 2, 3, 4}
	for _, tc := range []struct {
		dt   DType
		enc  func([]float32) []byte
		bad  float32
		want int64
	}{
		{F32, F32Bytes, nan, 2}, {BF16, BF16Bytes, inf, 2},
	} {
		good := tc.enc(vals)
		v := append([]float32(nil), vals...)
		v[2] = tc.bad
		bad := tc.enc(v)
		img := buildImage(t, []WriteTensor{{Name: "good", DType: tc.dt, Shape: []int{4}, Data: good}, {Name: "bad", DType: tc.dt, Shape: []int{4}, Data: bad}})
		f, err := Parse("x", img)
		if err != nil {
			t.Fatal(err)
		}
		if i, _ := f.FirstNonFinite("good"); i != -1 {
			t.Errorf("%s good: %d", tc.dt, i)
		}
		if i, _ := f.FirstNonFinite("bad"); i != tc.want {
			t.Errorf("%s bad: %d, want %d", tc.dt, i, tc.want)
		}
	}
	// F16: 0x7c00 is +Inf.
	img := buildImage(t, []WriteTensor{{Name: "h", DType: F16, Shape: []int{2}, Data: []byte{0, 0x3c, 0, 0x7c}}})
	f, _ := Parse("x", img)
	if i, _ := f.FirstNonFinite("h"); i != 1 {
		t.Errorf("F16: %d", i)
	}
}

func buildImage(t *testing.T, ts []WriteTensor) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.safetensors")
	if err := Write(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
