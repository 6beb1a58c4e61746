// Package atomicfile writes files so that the target is either the old file
// or the complete new one, never a truncated mix: the bytes go to a temporary
// file beside the target, which Commit syncs and renames over it. Every file
// the program writes goes through here.
//
// Targets that are not regular files (/dev/null, /dev/stdout, a FIFO, a
// character device) cannot be replaced by a rename, so they are written in
// place; "-" means standard output. A symbolic link is written through: the
// temporary file goes beside the file the link points at, so the link stays.
// A directory is refused when Create is called, before any work is done.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Stdout is the path that names standard output.
const Stdout = "-"

// maxLinks bounds the symbolic-link chain Create follows (Linux's own limit
// is 40); a longer chain is a loop.
const maxLinks = 40

// ErrIsDir is returned by Create when the target is a directory.
var ErrIsDir = errors.New("is a directory")

// ErrDone is returned by Write and Commit after Commit or Abort.
var ErrDone = errors.New("atomicfile: file already committed or aborted")

// File is one pending write. It is not safe for concurrent use.
type File struct {
	f      *os.File
	target string // the path the data ends up at (symbolic links resolved)
	tmp    string // the temporary file; "" when written in place
	stdout bool   // f is os.Stdout: never closed here
	done   bool
}

// Create starts writing path. perm (before the umask) applies when path does
// not exist yet; an existing file keeps its permission bits.
func Create(path string, perm fs.FileMode) (*File, error) {
	if path == "" {
		return nil, errors.New("atomicfile: empty path")
	}
	if path == Stdout {
		return &File{f: os.Stdout, target: Stdout, stdout: true}, nil
	}
	target, err := resolve(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(target)
	switch {
	case err == nil && st.IsDir():
		return nil, &fs.PathError{Op: "create", Path: path, Err: ErrIsDir}
	case err == nil && !st.Mode().IsRegular():
		// A device or FIFO: no rename can replace it, and the reader on the
		// other side expects the bytes as they come.
		f, err := os.OpenFile(target, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &File{f: f, target: target}, nil
	case err == nil:
		perm = st.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	f, tmp, err := createTemp(target, perm)
	if err != nil {
		return nil, err
	}
	if st != nil {
		// The umask applied at creation; an existing file's bits are kept
		// as they were.
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, err
		}
	}
	return &File{f: f, target: target, tmp: tmp}, nil
}

// createTemp makes a new file with a name of its own beside target (so the
// rename stays within one file system and never overwrites a user's file).
func createTemp(target string, perm fs.FileMode) (*os.File, string, error) {
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	var rnd [8]byte
	for try := 0; ; try++ {
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, "", err
		}
		tmp := filepath.Join(dir, "."+base+"."+hex.EncodeToString(rnd[:])+".tmp")
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			return f, tmp, nil
		}
		if !errors.Is(err, fs.ErrExist) || try >= 100 {
			return nil, "", fmt.Errorf("atomicfile: %s: %w", target, err)
		}
	}
}

// resolve follows symbolic links at the last element of path until it names
// something that is not a link (or does not exist yet: a dangling link
// creates the file it points to).
func resolve(path string) (string, error) {
	for i := 0; i < maxLinks; i++ {
		st, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return "", &fs.PathError{Op: "create", Path: path, Err: errors.New("too many levels of symbolic links")}
}

// Write appends p.
func (f *File) Write(p []byte) (int, error) {
	if f.done {
		return 0, ErrDone
	}
	return f.f.Write(p)
}

// Seek moves the write position (a WAV header rewritten at the end). It fails
// on targets written in place that cannot seek, such as a pipe.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	if f.done {
		return 0, ErrDone
	}
	return f.f.Seek(offset, whence)
}

// Seekable reports whether Seek works: always for a temporary file, and for
// in-place targets that accept it (/dev/null does, a pipe does not).
func (f *File) Seekable() bool {
	if f.done {
		return false
	}
	if f.tmp != "" {
		return true
	}
	_, err := f.f.Seek(0, io.SeekCurrent)
	return err == nil
}

// Name is the path the data ends up at ("-" for standard output).
func (f *File) Name() string { return f.target }

// Commit makes the write visible: the temporary file is synced, closed and
// renamed over the target, and the folder is synced so the rename survives a
// crash. For a target written in place it closes the file.
func (f *File) Commit() error {
	if f.done {
		return ErrDone
	}
	f.done = true
	if f.stdout {
		return nil
	}
	if f.tmp == "" {
		return f.f.Close()
	}
	err := f.f.Sync()
	if e := f.f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(f.tmp, f.target)
	}
	if err != nil {
		os.Remove(f.tmp)
		return fmt.Errorf("atomicfile: %s: %w", f.target, err)
	}
	syncDir(filepath.Dir(f.target))
	return nil
}

// Abort drops the write: the temporary file is removed and the target is
// left as it was. It does nothing after Commit or a first Abort, so it can
// be deferred.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	if f.stdout {
		return nil
	}
	err := f.f.Close()
	if f.tmp != "" {
		if e := os.Remove(f.tmp); err == nil {
			err = e
		}
	}
	return err
}

// syncDir makes a rename in dir durable; file systems that cannot sync a
// folder are left to their own guarantees.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// WriteFile writes data to path atomically (see Create).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
