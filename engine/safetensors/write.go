package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"talkbox/internal/atomicfile"
)

// WriteTensor is one tensor to be written. Data holds the little-endian bytes;
// use the helpers below to build it from typed slices.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Write stores tensors (sorted by name, as the HF writer does) to path through a
// temporary file and a rename, so a crash never leaves a half-written file.
func Write(path string, tensors []WriteTensor, metadata map[string]string) error {
	sorted := append([]WriteTensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for _, t := range sorted {
		elems := int64(1)
		for _, d := range t.Shape {
			elems *= int64(d)
		}
		if t.DType.Size() == 0 || elems*int64(t.DType.Size()) != int64(len(t.Data)) {
			return fmt.Errorf("safetensors: write %s: tensor %q: %d bytes do not fit shape %v of %s", path, t.Name, len(t.Data), t.Shape, t.DType)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hj)%8 != 0 { // keep the data block 8-byte aligned, as the HF writer does
		hj = append(hj, ' ')
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	w := bufio.NewWriterSize(f, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hj)))
	_, _ = w.Write(lenBuf[:])
	_, _ = w.Write(hj)
	for _, t := range sorted {
		_, _ = w.Write(t.Data)
	}
	if err := w.Flush(); err != nil { // the first write error, kept by bufio
		return err
	}
	return f.Commit()
}

// F32Bytes encodes float32 values little-endian.
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// BF16Bytes rounds float32 values to bfloat16 and encodes them.
func BF16Bytes(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], F32ToBF16(x))
	}
	return b
}

// I64Bytes encodes int64 values little-endian.
func I64Bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}
