// Package qcache keeps the CPU engine's int8 weight matrices (engine/qkernels)
// on disk between runs, so a model opens without widening and quantizing
// every matrix again.
//
// A cache file is only trusted when two checks pass. Its key must equal the
// key of the checkpoint as it is now: a SHA-256 over the caller's version
// string and, for every tensor of the checkpoint, its name, dtype, shape and
// a CRC-32C of its bytes. Hashing the content (not the file's size and
// modification time) is what makes a checkpoint replaced in place, or
// copied with its old time stamp, rebuild the cache; CRC-32C runs at several
// GB/s with the CPU's instruction, a small part of what quantizing costs, and
// the bytes are in memory already (model.Load scans every tensor for NaN).
// And its own CRC-32C, over everything before the trailer, must match, so a
// truncated or damaged file is rebuilt rather than read. Files are written
// through internal/atomicfile: a reader sees the old file or the whole new
// one.
package qcache

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"unsafe"

	"talkbox/engine/cores"
	"talkbox/engine/qkernels"
	"talkbox/engine/safetensors"
	"talkbox/internal/atomicfile"
)

// Key identifies the matrices a checkpoint gives under one quantization
// (the version string names the format and the layout the caller builds).
type Key [32]byte

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// KeyOf hashes version and every tensor of f (see the package comment). The
// tensors' checksums are computed on all CPUs.
func KeyOf(f *safetensors.File, version string) (Key, error) {
	names := append([]string(nil), f.Names()...)
	sort.Strings(names)
	sums := make([]uint32, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	next := make(chan int, len(names))
	for i := range names {
		next <- i
	}
	close(next)
	for w := 0; w < cores.Limit(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				_, b, err := f.Raw(names[i])
				sums[i], errs[i] = crc32.Checksum(b, castagnoli), err
			}
		}()
	}
	wg.Wait()
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", version)
	for i, name := range names {
		if errs[i] != nil {
			return Key{}, errs[i]
		}
		info, _ := f.Info(name)
		fmt.Fprintf(h, "%q %s %v %08x\n", name, info.DType, info.Shape, sums[i])
	}
	var k Key
	h.Sum(k[:0])
	return k, nil
}

// PathFor is where the cache of the checkpoint at path lives in dir: one
// file per checkpoint location, so a stale cache is overwritten rather than
// left beside the new one.
func PathFor(dir, checkpoint string) string {
	if abs, err := filepath.Abs(checkpoint); err == nil {
		checkpoint = abs
	}
	s := sha256.Sum256([]byte(checkpoint))
	return filepath.Join(dir, hex.EncodeToString(s[:8])+".q8")
}

// ErrStale is wrapped when the file belongs to another checkpoint or
// version; ErrCorrupt when it is truncated or its checksum fails.
var (
	ErrStale   = errors.New("qcache: cache is stale")
	ErrCorrupt = errors.New("qcache: cache is damaged")
)

var magic = [8]byte{'T', 'B', 'Q', '8', 'C', 0, 0, 1}

const (
	headerBytes  = 8 + 32 + 8 // magic, key, count + pad
	matrixHeader = 16         // rows, cols, blocks, pad
	trailerBytes = 8          // CRC-32C, then endMark
)

// endMark closes a complete file.
var endMark = [4]byte{'Q', '8', 'O', 'K'}

func pad8(n int) int { return (n + 7) &^ 7 }

// littleEndian: the matrices are read in place as int8 and float32.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// Save writes ms under key to path (creating its folder).
func Save(path string, key Key, ms []*qkernels.Matrix) error {
	if !littleEndian {
		return errors.New("qcache: only little-endian machines keep a cache")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("qcache: %w", err)
	}
	af, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return fmt.Errorf("qcache: %w", err)
	}
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(af, crc), 1<<20)
	var zero [8]byte
	le := binary.LittleEndian
	hdr := make([]byte, headerBytes)
	copy(hdr, magic[:])
	copy(hdr[8:], key[:])
	le.PutUint32(hdr[40:], uint32(len(ms)))
	w.Write(hdr)
	for _, m := range ms {
		var mh [matrixHeader]byte
		le.PutUint32(mh[0:], uint32(m.Rows))
		le.PutUint32(mh[4:], uint32(m.Cols))
		le.PutUint32(mh[8:], uint32(m.Blocks))
		w.Write(mh[:])
		q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(m.Q))), len(m.Q))
		w.Write(q)
		w.Write(zero[:pad8(len(q))-len(q)])
		d := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(m.D))), 4*len(m.D))
		w.Write(d)
		w.Write(zero[:pad8(len(d))-len(d)])
	}
	err = w.Flush()
	var tr [trailerBytes]byte
	le.PutUint32(tr[:], crc.Sum32())
	copy(tr[4:], endMark[:])
	if err == nil {
		_, err = af.Write(tr[:])
	}
	if err != nil {
		af.Abort()
		return fmt.Errorf("qcache: %s: %w", path, err)
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("qcache: %s: %w", path, err)
	}
	return nil
}

// Load reads the matrices saved under key at path. A missing file gives an
// error wrapping fs.ErrNotExist, another key ErrStale, a damaged file
// ErrCorrupt; the caller then builds the matrices and saves them again. The
// matrices share one buffer, read once.
func Load(path string, key Key) ([]*qkernels.Matrix, error) {
	if !littleEndian {
		return nil, errors.New("qcache: only little-endian machines keep a cache")
	}
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("qcache: %w", err)
	}
	le := binary.LittleEndian
	if len(buf) < headerBytes+trailerBytes || [8]byte(buf[:8]) != magic {
		return nil, fmt.Errorf("%w: %s: not a cache file", ErrCorrupt, path)
	}
	body := buf[:len(buf)-trailerBytes]
	if crc32.Checksum(body, castagnoli) != le.Uint32(buf[len(buf)-trailerBytes:]) || [4]byte(buf[len(buf)-4:]) != endMark {
		return nil, fmt.Errorf("%w: %s: checksum mismatch", ErrCorrupt, path)
	}
	if Key(buf[8:40]) != key {
		return nil, fmt.Errorf("%w: %s was built from another checkpoint or version", ErrStale, path)
	}
	n := int(le.Uint32(buf[40:]))
	ms := make([]*qkernels.Matrix, 0, n)
	off := headerBytes
	for i := 0; i < n; i++ {
		if off+matrixHeader > len(body) {
			return nil, fmt.Errorf("%w: %s: matrix %d past the end", ErrCorrupt, path, i)
		}
		rows, cols, kb := int(le.Uint32(body[off:])), int(le.Uint32(body[off+4:])), int(le.Uint32(body[off+8:]))
		off += matrixHeader
		nq := rows * kb * qkernels.Block
		if kb != (cols+qkernels.Block-1)/qkernels.Block || off+pad8(nq)+pad8(4*rows*kb) > len(body) {
			return nil, fmt.Errorf("%w: %s: matrix %d (%dx%d, %d blocks) does not fit", ErrCorrupt, path, i, rows, cols, kb)
		}
		m := &qkernels.Matrix{Rows: rows, Cols: cols, Blocks: kb}
		if nq > 0 {
			m.Q = unsafe.Slice((*int8)(unsafe.Pointer(&body[off])), nq)
		}
		off += pad8(nq)
		if rows*kb > 0 {
			m.D = unsafe.Slice((*float32)(unsafe.Pointer(&body[off])), rows*kb)
		}
		off += pad8(4 * rows * kb)
		ms = append(ms, m)
	}
	if off != len(body) {
		return nil, fmt.Errorf("%w: %s: %d bytes after the last matrix", ErrCorrupt, path, len(body)-off)
	}
	return ms, nil
}
