package prompt

import (
	"encoding/binary"
	"fmt"
	"math"

	"talkbox/engine/linalg"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
)

// table reads single rows of a 2-D weight straight from the mapped file, so
// the 151936-row text embedding is never converted as a whole.
type table struct {
	name       string
	rows, cols int
	dtype      safetensors.DType
	data       []byte // aliases the mapping; valid while the model is open
}

func openTable(f *safetensors.File, name string, rows, cols int) (table, error) {
	info, data, err := f.Raw(name)
	if err != nil {
		return table{}, fmt.Errorf("%w: %v", model.ErrIncompleteCheckpoint, err)
	}
	if len(info.Shape) != 2 || info.Shape[0] != rows || info.Shape[1] != cols {
		return table{}, fmt.Errorf("%w: %s: tensor %s has shape %v, want [%d %d]", model.ErrIncompleteCheckpoint, f.Path, name, info.Shape, rows, cols)
	}
	switch info.DType {
	case safetensors.BF16, safetensors.F16, safetensors.F32:
	default:
		return table{}, fmt.Errorf("%w: %s: tensor %s is %s, want a float type", model.ErrIncompleteCheckpoint, f.Path, name, info.DType)
	}
	if int64(len(data)) != int64(rows)*int64(cols)*int64(info.DType.Size()) {
		return table{}, fmt.Errorf("%w: %s: tensor %s holds %d bytes, want %d", model.ErrIncompleteCheckpoint, f.Path, name, len(data), rows*cols*info.DType.Size())
	}
	return table{name: name, rows: rows, cols: cols, dtype: info.DType, data: data}, nil
}

// addRow adds row i, upcast to float32, into dst (len cols). Callers check i.
func (t table) addRow(i int, dst []float32) {
	switch t.dtype {
	case safetensors.BF16:
		b := t.data[2*i*t.cols : 2*(i+1)*t.cols]
		for j := range dst {
			dst[j] += safetensors.BF16ToF32(binary.LittleEndian.Uint16(b[2*j:]))
		}
	case safetensors.F16:
		b := t.data[2*i*t.cols : 2*(i+1)*t.cols]
		for j := range dst {
			dst[j] += safetensors.F16ToF32(binary.LittleEndian.Uint16(b[2*j:]))
		}
	case safetensors.F32:
		b := t.data[4*i*t.cols : 4*(i+1)*t.cols]
		for j := range dst {
			dst[j] += math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
		}
	}
}

// readVector reads a 1-D tensor of length n as float32.
func readVector(f *safetensors.File, name string, n int) ([]float32, error) {
	info, ok := f.Info(name)
	if !ok || len(info.Shape) != 1 || info.Shape[0] != n {
		return nil, fmt.Errorf("%w: %s: tensor %s missing or not of shape [%d]", model.ErrIncompleteCheckpoint, f.Path, name, n)
	}
	return f.F32(name)
}

// readMatrix reads a small 2-D tensor [rows, cols] as float32 (the text
// projection: at most 2048 x 2048).
func readMatrix(f *safetensors.File, name string, rows, cols int) (linalg.Matrix, error) {
	info, ok := f.Info(name)
	if !ok || len(info.Shape) != 2 || info.Shape[0] != rows || info.Shape[1] != cols {
		return linalg.Matrix{}, fmt.Errorf("%w: %s: tensor %s missing or not of shape [%d %d]", model.ErrIncompleteCheckpoint, f.Path, name, rows, cols)
	}
	w, err := f.F32(name)
	if err != nil {
		return linalg.Matrix{}, err
	}
	return linalg.Matrix{Rows: rows, Cols: cols, W: w}, nil
}
