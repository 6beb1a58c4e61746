// Package safetensors reads Hugging Face safetensors files through a read-only
// memory map and validates every header field before handing out tensor data.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets:[begin,end]}, "__metadata__": {str: str}},
// then the data block that the offsets index into.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"syscall"
	"unsafe"

	"talkbox/internal/errtext"
	"talkbox/internal/regfile"
)

// DType is a tensor element type as spelled in the header.
type DType string

// The element types Talkbox reads. Others are rejected with a named error.
const (
	BF16 DType = "BF16"
	F16  DType = "F16"
	F32  DType = "F32"
	I64  DType = "I64"
	U8   DType = "U8" // raw bytes (the golden audio case stores files this way); read with Raw
)

// Size returns the element size in bytes, or 0 for an unsupported type.
func (d DType) Size() int {
	switch d {
	case U8:
		return 1
	case BF16, F16:
		return 2
	case F32:
		return 4
	case I64:
		return 8
	}
	return 0
}

// MaxHeaderBytes bounds the JSON header; real checkpoints use well under 1 MiB.
const MaxHeaderBytes = 100 << 20

// ErrFormat is wrapped by every validation error, so callers can branch on it.
var ErrFormat = errors.New("invalid safetensors file")

// Info describes one tensor.
type Info struct {
	Name  string
	DType DType
	Shape []int
	Begin int64 // offset of the first byte inside the data block
	End   int64 // one past the last byte inside the data block
}

// Elements is the product of the shape (1 for a scalar).
func (i Info) Elements() int64 {
	n := int64(1)
	for _, d := range i.Shape {
		n *= int64(d)
	}
	return n
}

// Bytes is the tensor's length in the file.
func (i Info) Bytes() int64 { return i.End - i.Begin }

// File is an open, validated safetensors file. Slices returned by Raw alias the
// mapping and stay valid until Close.
type File struct {
	Path     string
	Metadata map[string]string
	tensors  map[string]Info
	names    []string // sorted
	mapping  []byte
	data     []byte // the data block inside mapping
}

// Open maps path read-only and validates its header.
func Open(path string) (*File, error) {
	// Only a regular file: a FIFO or device in its place would block or
	// never end.
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%w: %s: file is %d bytes, shorter than the 8-byte header length", ErrFormat, path, size)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%w: %s: file too large to map", ErrFormat, path)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: mmap: %w", path, err)
	}
	sf, err := parse(path, m)
	if err != nil {
		_ = syscall.Munmap(m)
		return nil, err
	}
	sf.mapping = m
	return sf, nil
}

// Parse validates an in-memory safetensors image; the returned File aliases buf.
// It is what Open uses after mapping, and what the fuzz target drives.
func Parse(name string, buf []byte) (*File, error) { return parse(name, buf) }

type headerEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func parse(path string, buf []byte) (*File, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("%w: %s: %d bytes, shorter than the 8-byte header length", ErrFormat, path, len(buf))
	}
	n := binary.LittleEndian.Uint64(buf[:8])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: %s: header length %d exceeds the %d-byte limit", ErrFormat, path, n, MaxHeaderBytes)
	}
	if n > uint64(len(buf)-8) {
		return nil, fmt.Errorf("%w: %s: header length %d runs past the end of the %d-byte file (truncated?)", ErrFormat, path, n, len(buf))
	}
	header := buf[8 : 8+n]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: header is not a JSON object: %s", ErrFormat, path, errtext.Brief(err))
	}
	sf := &File{Path: path, tensors: make(map[string]Info, len(raw)), data: buf[8+n:]}
	dataLen := int64(len(sf.data))
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &sf.Metadata); err != nil {
				return nil, fmt.Errorf("%w: %s: __metadata__ must map strings to strings: %s", ErrFormat, path, errtext.Brief(err))
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%w: %s: tensor %q: %s", ErrFormat, path, name, errtext.Brief(err))
		}
		if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
			return nil, fmt.Errorf("%w: %s: tensor %q: needs dtype, shape and data_offsets", ErrFormat, path, name)
		}
		dt := DType(*e.DType)
		if dt.Size() == 0 {
			return nil, fmt.Errorf("%w: %s: tensor %q: unsupported dtype %q (want BF16, F16, F32, I64 or U8)", ErrFormat, path, name, *e.DType)
		}
		if len(*e.DataOffsets) != 2 {
			return nil, fmt.Errorf("%w: %s: tensor %q: data_offsets must have 2 entries, has %d", ErrFormat, path, name, len(*e.DataOffsets))
		}
		begin, end := (*e.DataOffsets)[0], (*e.DataOffsets)[1]
		if begin < 0 || end < begin {
			return nil, fmt.Errorf("%w: %s: tensor %q: bad data_offsets [%d, %d]", ErrFormat, path, name, begin, end)
		}
		if end > dataLen {
			return nil, fmt.Errorf("%w: %s: tensor %q: data_offsets end %d is past the %d-byte data block (truncated file?)", ErrFormat, path, name, end, dataLen)
		}
		shape := make([]int, len(*e.Shape))
		elems := int64(1)
		for i, d := range *e.Shape {
			if d < 0 || d > math.MaxInt32 {
				return nil, fmt.Errorf("%w: %s: tensor %q: bad dimension %d", ErrFormat, path, name, d)
			}
			shape[i] = int(d)
			if d != 0 && elems > math.MaxInt64/d {
				return nil, fmt.Errorf("%w: %s: tensor %q: shape %v overflows", ErrFormat, path, name, *e.Shape)
			}
			elems *= d
		}
		if elems > math.MaxInt64/int64(dt.Size()) || elems*int64(dt.Size()) != end-begin {
			return nil, fmt.Errorf("%w: %s: tensor %q: shape %v of %s needs %d bytes but data_offsets span %d", ErrFormat, path, name, shape, dt, elems*int64(dt.Size()), end-begin)
		}
		sf.tensors[name] = Info{Name: name, DType: dt, Shape: shape, Begin: begin, End: end}
		sf.names = append(sf.names, name)
	}
	sort.Strings(sf.names)
	// No two tensors may share bytes: sort by begin and compare neighbours.
	byBegin := make([]Info, 0, len(sf.tensors))
	for _, t := range sf.tensors {
		if t.End > t.Begin {
			byBegin = append(byBegin, t)
		}
	}
	sort.Slice(byBegin, func(i, j int) bool { return byBegin[i].Begin < byBegin[j].Begin })
	for i := 1; i < len(byBegin); i++ {
		if byBegin[i].Begin < byBegin[i-1].End {
			return nil, fmt.Errorf("%w: %s: tensors %q and %q overlap", ErrFormat, path, byBegin[i-1].Name, byBegin[i].Name)
		}
	}
	return sf, nil
}

// Close unmaps the file. Slices obtained from Raw become invalid.
func (f *File) Close() error {
	if f == nil || f.mapping == nil {
		return nil
	}
	m := f.mapping
	f.mapping, f.data = nil, nil
	return syscall.Munmap(m)
}

// Names lists the tensor names in sorted order.
func (f *File) Names() []string { return f.names }

// Info returns a tensor's description.
func (f *File) Info(name string) (Info, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// TotalBytes sums the byte sizes of all tensors.
func (f *File) TotalBytes() int64 {
	var n int64
	for _, t := range f.tensors {
		n += t.Bytes()
	}
	return n
}

func (f *File) lookup(name string) (Info, error) {
	t, ok := f.tensors[name]
	if !ok {
		return Info{}, fmt.Errorf("safetensors: %s: no tensor %q", f.Path, name)
	}
	return t, nil
}

// Raw returns the tensor's bytes without copying.
func (f *File) Raw(name string) (Info, []byte, error) {
	t, err := f.lookup(name)
	if err != nil {
		return t, nil, err
	}
	return t, f.data[t.Begin:t.End], nil
}

// F32 returns the tensor as float32 (converting BF16/F16, copying F32).
func (f *File) F32(name string) ([]float32, error) {
	t, b, err := f.Raw(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elements())
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case F16:
		for i := range out {
			out[i] = F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	default:
		return nil, fmt.Errorf("safetensors: %s: tensor %q is %s, not a float type", f.Path, name, t.DType)
	}
	return out, nil
}

// BF16 returns a BF16 tensor's raw 16-bit values. It aliases the mapping when
// the data is 2-byte aligned (it always is in files written by the HF library)
// and copies otherwise.
func (f *File) BF16(name string) ([]uint16, error) {
	t, b, err := f.Raw(name)
	if err != nil {
		return nil, err
	}
	if t.DType != BF16 {
		return nil, fmt.Errorf("safetensors: %s: tensor %q is %s, not BF16", f.Path, name, t.DType)
	}
	if len(b) == 0 {
		return []uint16{}, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 == 0 && littleEndian {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), nil
	}
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out, nil
}

// I64 returns an I64 tensor as a new slice.
func (f *File) I64(name string) ([]int64, error) {
	t, b, err := f.Raw(name)
	if err != nil {
		return nil, err
	}
	if t.DType != I64 {
		return nil, fmt.Errorf("safetensors: %s: tensor %q is %s, not I64", f.Path, name, t.DType)
	}
	out := make([]int64, t.Elements())
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// BF16ToF32 widens a bfloat16 bit pattern: bf16 is the top half of an f32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to nearest even, as PyTorch does; NaN stays NaN.
func F32ToBF16(x float32) uint16 {
	b := math.Float32bits(x)
	if x != x {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// F16ToF32 widens an IEEE half-precision bit pattern.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: renormalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
