// Package regfile opens input files that must be regular files: a FIFO or a
// device put in place of a model or config file would otherwise block a read
// forever or stream without end. ReadFile also bounds how much it reads.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped when the path is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped when a file exceeds the caller's limit.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading if it is a regular file (symbolic links
// followed). The open does not block on a FIFO, and the check is made on the
// opened file, so a swap between check and open is caught too.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		what := "a " + kind(st.Mode())
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (it is %s)", ErrNotRegular, what)}
	}
	return f, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// ReadFile reads a regular file of at most max bytes whole.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, st.Size(), max)}
	}
	// The file may grow after Stat: read one byte past the limit to see it.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)}
	}
	return b, nil
}
