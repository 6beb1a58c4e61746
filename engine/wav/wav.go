// Package wav writes (and, for checks, reads) mono RIFF/WAVE files: 16-bit
// PCM by default or 32-bit IEEE float. A Writer streams samples as they are
// produced and fixes the header sizes on Close, so an utterance can be saved
// while it is still being synthesised.
package wav

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"talkbox/internal/atomicfile"
)

// Format is the sample encoding.
type Format int

const (
	S16 Format = iota // 16-bit signed PCM (default)
	F32               // 32-bit IEEE float
)

// ParseFormat accepts "s16" and "f32".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "s16", "":
		return S16, nil
	case "f32":
		return F32, nil
	}
	return S16, fmt.Errorf("wav: unknown sample format %q (want s16 or f32)", s)
}

func (f Format) String() string {
	if f == F32 {
		return "f32"
	}
	return "s16"
}

func (f Format) bytesPerSample() int {
	if f == F32 {
		return 4
	}
	return 2
}

const (
	tagPCM   = 1
	tagFloat = 3
)

// Header layout. PCM: RIFF(12) fmt(8+16) data(8) = 44 bytes. Float: RIFF(12)
// fmt(8+18, cbSize 0) fact(8+4) data(8) = 58 bytes; the fact chunk is what
// the WAVE spec asks of non-PCM files.
func headerSize(f Format) int {
	if f == F32 {
		return 58
	}
	return 44
}

func header(f Format, rate, samples int) []byte {
	bps := f.bytesPerSample()
	data := samples * bps
	h := make([]byte, 0, headerSize(f))
	le := binary.LittleEndian
	h = append(h, "RIFF"...)
	h = le.AppendUint32(h, uint32(headerSize(f)-8+data))
	h = append(h, "WAVEfmt "...)
	if f == F32 {
		h = le.AppendUint32(h, 18)
		h = le.AppendUint16(h, tagFloat)
	} else {
		h = le.AppendUint32(h, 16)
		h = le.AppendUint16(h, tagPCM)
	}
	h = le.AppendUint16(h, 1) // mono
	h = le.AppendUint32(h, uint32(rate))
	h = le.AppendUint32(h, uint32(rate*bps))
	h = le.AppendUint16(h, uint16(bps))
	h = le.AppendUint16(h, uint16(8*bps))
	if f == F32 {
		h = le.AppendUint16(h, 0) // cbSize
		h = append(h, "fact"...)
		h = le.AppendUint32(h, 4)
		h = le.AppendUint32(h, uint32(samples))
	}
	h = append(h, "data"...)
	h = le.AppendUint32(h, uint32(data))
	return h
}

// maxSamples keeps the RIFF size within 32 bits.
func maxSamples(f Format) int { return (math.MaxUint32 - headerSize(f)) / f.bytesPerSample() }

// ErrTooLong is returned when the data would not fit a 4 GiB RIFF file.
var ErrTooLong = errors.New("wav: data exceeds the 4 GiB RIFF limit")

// ToS16 is the one float-to-16-bit rule of the project (WAV, raw PCM and
// FLAC output use it): clip to [-1, 1] and round x·32767 to the nearest
// integer (half away from zero), so ±1 map to ±32767 and 0 stays 0; NaN
// becomes silence rather than an arbitrary code.
func ToS16(x float32) int16 {
	v := float64(x)
	if v != v {
		return 0
	}
	return int16(math.Round(math.Max(-1, math.Min(1, v)) * 32767))
}

// AppendSamples appends samples in format f, little-endian (S16 through ToS16).
func AppendSamples(dst []byte, samples []float32, f Format) []byte {
	le := binary.LittleEndian
	for _, x := range samples {
		if f == F32 {
			dst = le.AppendUint32(dst, math.Float32bits(x))
			continue
		}
		dst = le.AppendUint16(dst, uint16(ToS16(x)))
	}
	return dst
}

// Writer streams one mono WAV file.
type Writer struct {
	w        io.Writer
	seekable bool             // Close rewrites the header with the final sizes
	file     *atomicfile.File // the file, when Create opened it
	format   Format
	rate     int
	samples  int
	buf      []byte
	err      error
	closed   bool
}

// NewWriter writes a provisional header to w; Close rewrites it with the
// final sizes when w can seek (a file). On a stream (a pipe, standard output)
// the header keeps the largest sizes, which readers take as "until the end".
func NewWriter(w io.Writer, rate int, f Format) (*Writer, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("wav: sample rate %d", rate)
	}
	if f != S16 && f != F32 {
		return nil, fmt.Errorf("wav: unknown format %d", f)
	}
	seekable := canSeek(w)
	n := 0
	if !seekable {
		n = maxSamples(f)
	}
	if _, err := w.Write(header(f, rate, n)); err != nil {
		return nil, fmt.Errorf("wav: header: %w", err)
	}
	return &Writer{w: w, seekable: seekable, format: f, rate: rate}, nil
}

// canSeek asks w whether it can seek: atomicfile says so itself; for an
// *os.File, a pipe fails a seek to the current position.
func canSeek(w io.Writer) bool {
	if s, ok := w.(interface{ Seekable() bool }); ok {
		return s.Seekable()
	}
	s, ok := w.(io.Seeker)
	if !ok {
		return false
	}
	_, err := s.Seek(0, io.SeekCurrent)
	return err == nil
}

// Create starts writing path through atomicfile: the target appears, whole,
// when Close succeeds; Abort (or a failed Close) leaves it as it was. "-"
// and devices are written in place.
func Create(path string, rate int, f Format) (*Writer, error) {
	file, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wav: %w", err)
	}
	w, err := NewWriter(file, rate, f)
	if err != nil {
		file.Abort()
		return nil, fmt.Errorf("wav: %s: %w", path, err)
	}
	w.file = file
	return w, nil
}

// Write appends samples (nominally in [-1, 1]).
func (w *Writer) Write(samples []float32) error {
	if w.closed {
		return errors.New("wav: write after close")
	}
	if w.err != nil {
		return w.err
	}
	if w.samples+len(samples) > maxSamples(w.format) {
		w.err = ErrTooLong
		return w.err
	}
	w.buf = AppendSamples(w.buf[:0], samples, w.format)
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("wav: write: %w", err)
		return w.err
	}
	w.samples += len(samples)
	return nil
}

// Samples is the number of samples written so far.
func (w *Writer) Samples() int { return w.samples }

// Close writes the final header sizes and, for a file Create opened, makes
// it visible (atomicfile Commit); after an earlier write error the file is
// dropped instead and that error returned.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.err
	if err == nil && w.seekable {
		s := w.w.(io.Seeker)
		if _, e := s.Seek(0, io.SeekStart); e != nil {
			err = fmt.Errorf("wav: seek to header: %w", e)
		} else if _, e := w.w.Write(header(w.format, w.rate, w.samples)); e != nil {
			err = fmt.Errorf("wav: rewrite header: %w", e)
		} else if _, e := s.Seek(0, io.SeekEnd); e != nil {
			err = fmt.Errorf("wav: seek to end: %w", e)
		}
	}
	if w.file != nil {
		if err != nil {
			w.file.Abort()
		} else if e := w.file.Commit(); e != nil {
			err = fmt.Errorf("wav: %w", e)
		}
	}
	return err
}

// Abort drops a file Create opened, leaving the target as it was (a
// cancelled or failed synthesis). It does nothing after Close.
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	if w.file != nil {
		w.file.Abort()
	}
}

// Encode writes a whole mono WAV to w in one go (w need not seek).
func Encode(w io.Writer, samples []float32, rate int, f Format) error {
	if rate <= 0 {
		return fmt.Errorf("wav: sample rate %d", rate)
	}
	if len(samples) > maxSamples(f) {
		return ErrTooLong
	}
	b := header(f, rate, len(samples))
	b = AppendSamples(b, samples, f)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("wav: write: %w", err)
	}
	return nil
}

// WriteFile writes a whole mono WAV file.
func WriteFile(path string, samples []float32, rate int, f Format) error {
	w, err := Create(path, rate, f)
	if err != nil {
		return err
	}
	if err := w.Write(samples); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}
