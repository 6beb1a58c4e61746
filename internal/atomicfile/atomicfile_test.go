package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// entries lists the names in dir, so a test sees any temporary file left.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCommitReplacesOnlyAtTheEnd(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out.wav")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Create(target, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("new contents")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, target); got != "old" {
		t.Fatalf("target changed before Commit: %q", got)
	}
	if n := len(entries(t, dir)); n != 2 {
		t.Fatalf("want target and one temporary file, got %v", entries(t, dir))
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, target); got != "new contents" {
		t.Fatalf("after Commit: %q", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("temporary file left: %v", names)
	}
	st, _ := os.Stat(target)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("existing file's mode %v not kept", st.Mode().Perm())
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrDone) {
		t.Errorf("Write after Commit: %v, want ErrDone", err)
	}
	if err := f.Commit(); !errors.Is(err, ErrDone) {
		t.Errorf("second Commit: %v, want ErrDone", err)
	}
	if err := f.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v, want no-op", err)
	}
	if got := readString(t, target); got != "new contents" {
		t.Fatalf("Abort after Commit changed the file: %q", got)
	}
}

func TestAbortKeepsTargetAndRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "codes.json")
	os.WriteFile(target, []byte("keep me"), 0o644)
	f, err := Create(target, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half"))
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, target); got != "keep me" {
		t.Fatalf("target after Abort: %q", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("temporary file left after Abort: %v", names)
	}
	if err := f.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if err := f.Commit(); !errors.Is(err, ErrDone) {
		t.Errorf("Commit after Abort: %v, want ErrDone", err)
	}
	// Abort on a new target leaves nothing at all.
	g, _ := Create(filepath.Join(dir, "new.wav"), 0o644)
	g.Write([]byte("x"))
	g.Abort()
	if _, err := os.Stat(filepath.Join(dir, "new.wav")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("aborted new file exists: %v", err)
	}
}

// The temporary name is unique: a user's own X.part (or anything named like
// a temp) is never overwritten or deleted, and two writers do not collide.
func TestTempNameIsUnique(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "x.wav")
	for _, name := range []string{"x.wav.part", "x.wav.tmp", ".x.wav.tmp"} {
		os.WriteFile(filepath.Join(dir, name), []byte("user data"), 0o644)
	}
	a, err := Create(target, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(target, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if a.tmp == b.tmp {
		t.Fatalf("two writers share %s", a.tmp)
	}
	a.Write([]byte("a"))
	b.Write([]byte("b"))
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Abort()
	for _, name := range []string{"x.wav.part", "x.wav.tmp", ".x.wav.tmp"} {
		if got := readString(t, filepath.Join(dir, name)); got != "user data" {
			t.Errorf("%s changed: %q", name, got)
		}
	}
	if got := readString(t, target); got != "a" {
		t.Errorf("target %q", got)
	}
	if n := len(entries(t, dir)); n != 4 {
		t.Errorf("entries %v", entries(t, dir))
	}
}

func TestNewFileHonoursPermAndUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	target := filepath.Join(dir, "new")
	if err := WriteFile(target, []byte("data"), 0o666); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (0666 less umask 022)", st.Mode().Perm())
	}
}

func TestDirectoryRefusedAtCreate(t *testing.T) {
	dir := t.TempDir()
	_, err := Create(dir, 0o644)
	if !errors.Is(err, ErrIsDir) {
		t.Fatalf("Create(dir) = %v, want ErrIsDir", err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("error does not name the path: %v", err)
	}
	// A link to a directory is a directory too.
	link := filepath.Join(t.TempDir(), "l")
	os.Symlink(dir, link)
	if _, err := Create(link, 0o644); !errors.Is(err, ErrIsDir) {
		t.Errorf("Create(link to dir) = %v, want ErrIsDir", err)
	}
	if names := entries(t, dir); len(names) != 0 {
		t.Errorf("files left in the directory: %v", names)
	}
}

func TestMissingFolder(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "no", "such", "x.wav"), 0o644)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want not-exist", err)
	}
}

func TestDevNullWrittenInPlace(t *testing.T) {
	f, err := Create("/dev/null", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if f.tmp != "" {
		t.Fatalf("temporary file %s for /dev/null", f.tmp)
	}
	if _, err := f.Write([]byte("discard")); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat("/dev/null")
	if err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v %v", st.Mode(), err)
	}
	if err := WriteFile("/dev/null", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A full device reports the error on Write, so the caller can stop at once.
func TestDevFullWriteError(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	f, err := Create("/dev/full", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to /dev/full: %v, want ENOSPC", err)
	}
}

func TestFIFOWrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	got := make(chan string)
	go func() {
		r, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(r)
		r.Close()
		got <- string(b)
	}()
	f, err := Create(fifo, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if f.Seekable() {
		t.Error("a FIFO reports seekable")
	}
	f.Write([]byte("through the pipe"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the pipe" {
		t.Fatalf("reader got %q", s)
	}
	st, err := os.Lstat(fifo)
	if err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("FIFO replaced: %v %v", st.Mode(), err)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("entries %v", names)
	}
}

func TestDashIsStdout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	f, err := Create("-", 0o644)
	os.Stdout = old
	if err != nil {
		t.Fatal(err)
	}
	if f.Name() != "-" {
		t.Errorf("Name %q", f.Name())
	}
	f.Write([]byte("to stdout"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	// Commit does not close standard output: the program may print more.
	if _, err := w.Write([]byte(" and more")); err != nil {
		t.Fatalf("stdout closed by Commit: %v", err)
	}
	w.Close()
	b, _ := io.ReadAll(r)
	if string(b) != "to stdout and more" {
		t.Fatalf("read %q", b)
	}
	if _, err := os.Stat("-"); err == nil {
		t.Error(`a file named "-" was created`)
	}
}

func TestSymlinkWrittenThrough(t *testing.T) {
	realDir := t.TempDir()
	linkDir := t.TempDir()
	real := filepath.Join(realDir, "real.wav")
	os.WriteFile(real, []byte("old"), 0o640)
	abs := filepath.Join(linkDir, "abs.wav")
	os.Symlink(real, abs)
	// A relative link, through a second link: a chain.
	rel := filepath.Join(realDir, "rel.wav")
	os.Symlink("real.wav", rel)
	chain := filepath.Join(linkDir, "chain.wav")
	os.Symlink(rel, chain)

	for i, link := range []string{abs, chain} {
		want := []string{"via abs", "via chain"}[i]
		f, err := Create(link, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(f.tmp) != realDir {
			t.Errorf("temporary file %s not beside the real file", f.tmp)
		}
		f.Write([]byte(want))
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := readString(t, real); got != want {
			t.Errorf("real file %q, want %q", got, want)
		}
		st, err := os.Lstat(link)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link", link)
		}
	}
	st, _ := os.Stat(real)
	if st.Mode().Perm() != 0o640 {
		t.Errorf("real file mode %v", st.Mode().Perm())
	}
	if names := entries(t, linkDir); len(names) != 2 {
		t.Errorf("link folder %v", names)
	}
	if names := entries(t, realDir); len(names) != 2 {
		t.Errorf("real folder %v", names)
	}
}

func TestDanglingSymlinkCreatesItsTarget(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	os.Symlink("made.txt", link)
	if err := WriteFile(link, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, filepath.Join(dir, "made.txt")); got != "hello" {
		t.Fatalf("%q", got)
	}
	if st, _ := os.Lstat(link); st.Mode()&fs.ModeSymlink == 0 {
		t.Error("link replaced")
	}
}

func TestSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Symlink(b, a)
	os.Symlink(a, b)
	if _, err := Create(a, 0o644); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Fatalf("loop: %v", err)
	}
}

func TestSeekRewritesHeader(t *testing.T) {
	target := filepath.Join(t.TempDir(), "h")
	f, err := Create(target, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Seekable() {
		t.Fatal("temporary file not seekable")
	}
	f.Write([]byte("0000body"))
	f.Seek(0, io.SeekStart)
	f.Write([]byte("HEAD"))
	f.Seek(0, io.SeekEnd)
	f.Write([]byte("!"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, target); got != "HEADbody!" {
		t.Fatalf("%q", got)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "settings.json")
	data := bytes.Repeat([]byte("x"), 1<<16)
	if err := WriteFile(target, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, target); got != string(data) {
		t.Fatal("contents differ")
	}
	if err := WriteFile(dir, data, 0o600); !errors.Is(err, ErrIsDir) {
		t.Fatalf("WriteFile(dir) = %v", err)
	}
	if err := WriteFile("", data, 0o600); err == nil {
		t.Fatal("empty path accepted")
	}
}
