package safetensors

import "encoding/binary"

// FirstNonFinite returns the index of the tensor's first NaN or ±Inf element,
// or -1 when every element is finite (integer tensors always are). It reads
// the mapped bytes in place: an all-ones exponent field marks both.
func (f *File) FirstNonFinite(name string) (int64, error) {
	t, b, err := f.Raw(name)
	if err != nil {
		return -1, err
	}
	le := binary.LittleEndian
	switch t.DType {
	case BF16:
		for i := 0; i+1 < len(b); i += 2 {
			if le.Uint16(b[i:])&0x7f80 == 0x7f80 {
				return int64(i / 2), nil
			}
		}
	case F16:
		for i := 0; i+1 < len(b); i += 2 {
			if le.Uint16(b[i:])&0x7c00 == 0x7c00 {
				return int64(i / 2), nil
			}
		}
	case F32:
		for i := 0; i+3 < len(b); i += 4 {
			if le.Uint32(b[i:])&0x7f800000 == 0x7f800000 {
				return int64(i / 4), nil
			}
		}
	}
	return -1, nil
}
