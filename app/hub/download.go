package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// fileJob is one file of the revision being pulled.
type fileJob struct {
	Path   string // repo-relative, slash separated
	Size   int64
	SHA256 string // LFS content hash (lower-case hex); "" for small files
	BlobID string // git blob id of small (non-LFS) files
}

// downloader fetches files of one revision into dir.
type downloader struct {
	client      *Client
	repo        string
	commit      string
	dir         string
	rep         *reporter
	idleTimeout time.Duration
	// wrapWriter lets tests put a failing writer (disk full) under the copy.
	wrapWriter func(path string, w io.Writer) io.Writer
}

func (d *downloader) localPath(j fileJob) string {
	return filepath.Join(d.dir, filepath.FromSlash(j.Path))
}

// fetch brings one file into place: resume or start <file>.part, check it
// against the Hub's hash, then rename it over <file>. On failure the .part
// keeps every byte received so far, unless its content proved wrong.
func (d *downloader) fetch(ctx context.Context, j fileJob) error {
	dst := d.localPath(j)
	part := dst + ".part"
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return writeError(err, dst)
	}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return writeError(err, part)
	}
	defer f.Close() // a second Close after the explicit one below is harmless
	st, err := f.Stat()
	if err != nil {
		return writeError(err, part)
	}
	offset := st.Size()
	v := newVerifier(j)
	if offset > j.Size {
		offset = 0 // not a prefix of this file: the listing changed
	}
	if offset > 0 {
		// The hash must cover the whole file, so read back what is there.
		if _, err := io.CopyN(v, f, offset); err != nil {
			offset = 0
		}
	}
	if offset == 0 {
		if err := resetPart(f, v); err != nil {
			return writeError(err, part)
		}
	}
	d.rep.present(offset)
	d.rep.send(EventFileStart)
	if offset < j.Size {
		if err := d.transfer(ctx, j, f, v, offset); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return writeError(err, part)
	}
	if err := f.Close(); err != nil {
		return writeError(err, part)
	}
	if err := v.check(); err != nil {
		os.Remove(part)
		d.rep.rewind()
		return fmt.Errorf("%w: %s of %s: %v; the bad download was deleted, run the pull again to fetch it anew",
			ErrChecksum, j.Path, d.repo, err)
	}
	if err := os.Rename(part, dst); err != nil {
		return writeError(err, dst)
	}
	syncDir(filepath.Dir(dst))
	return nil
}

// transfer requests the bytes from offset on and appends them to f. A server
// that ignores Range (200) or refuses it (416), or answers with another
// range, makes it start the file over once.
func (d *downloader) transfer(ctx context.Context, j fileJob, f *os.File, v *verifier, offset int64) error {
	u := d.client.FileURL(d.repo, d.commit, j.Path)
	for attempt := 0; ; attempt++ {
		reqCtx, cancel := context.WithCancel(ctx)
		req, err := d.client.newRequest(reqCtx, u)
		if err != nil {
			cancel()
			return err
		}
		if offset > 0 {
			req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
		}
		resp, err := d.client.HTTP.Do(req)
		if err != nil {
			cancel()
			return d.interrupted(ctx, j, networkError(err, d.client.Endpoint, j.Path))
		}
		restart := false
		switch {
		case resp.StatusCode == http.StatusPartialContent:
			start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
			restart = !ok || start != offset
		case resp.StatusCode == http.StatusOK:
			restart = offset > 0 // Range ignored: the body is the whole file
			if restart {
				// Use this body from byte 0 rather than asking again.
				if err := d.restart(f, v, &offset); err != nil {
					resp.Body.Close()
					cancel()
					return err
				}
				restart = false
			}
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && offset > 0:
			restart = true // the .part does not fit the server's file
		default:
			err := d.client.statusError(resp, d.repo, d.commit, j.Path)
			resp.Body.Close()
			cancel()
			return err
		}
		if restart {
			resp.Body.Close()
			cancel()
			if attempt > 0 {
				return fmt.Errorf("%w: the server will not resume %s (HTTP %d, Content-Range %q)",
					ErrServer, j.Path, resp.StatusCode, resp.Header.Get("Content-Range"))
			}
			if err := d.restart(f, v, &offset); err != nil {
				return err
			}
			continue
		}
		err = d.copyBody(ctx, reqCtx, cancel, j, f, v, resp.Body, offset)
		resp.Body.Close()
		cancel()
		return err
	}
}

// restart empties the .part so the file is fetched from its first byte.
func (d *downloader) restart(f *os.File, v *verifier, offset *int64) error {
	if err := resetPart(f, v); err != nil {
		return writeError(err, f.Name())
	}
	d.rep.rewind()
	*offset = 0
	return nil
}

func resetPart(f *os.File, v *verifier) error {
	v.reset()
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// copyBody appends the response body to f while hashing and reporting. A
// watchdog cancels the request when no byte arrives for idleTimeout, so a
// stalled connection turns into a resumable error instead of a hang.
func (d *downloader) copyBody(ctx, reqCtx context.Context, cancel context.CancelFunc, j fileJob,
	f *os.File, v *verifier, body io.Reader, offset int64) error {
	var w io.Writer = f
	if d.wrapWriter != nil {
		w = d.wrapWriter(j.Path, f)
	}
	var stalled atomic.Bool
	idle := d.idleTimeout
	if idle <= 0 {
		idle = 60 * time.Second
	}
	watchdog := time.AfterFunc(idle, func() { stalled.Store(true); cancel() })
	defer watchdog.Stop()

	buf := make([]byte, 256<<10)
	have := offset
	for have < j.Size {
		n, rerr := body.Read(buf)
		if n > 0 {
			watchdog.Reset(idle)
			if have+int64(n) > j.Size {
				return fmt.Errorf("%w: the server sent more than the %d bytes listed for %s", ErrServer, j.Size, j.Path)
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return d.diskError(err, j, have)
			}
			v.Write(buf[:n])
			have += int64(n)
			d.rep.received(int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if stalled.Load() && ctx.Err() == nil {
				rerr = fmt.Errorf("%w: no data for %s", ErrNetwork, idle)
			}
			return d.interrupted(ctx, j, networkError(rerr, d.client.Endpoint, j.Path))
		}
	}
	if have < j.Size {
		return d.interrupted(ctx, j, networkError(io.ErrUnexpectedEOF, d.client.Endpoint, j.Path))
	}
	return nil
}

// interrupted words a stop mid-file; the .part stays for the next pull.
func (d *downloader) interrupted(ctx context.Context, j fileJob, err error) error {
	done := d.rep.p.FileDone
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return fmt.Errorf("download of %s stopped at %s of %s; the partial file is kept and the next pull resumes it: %w",
		j.Path, FormatBytes(done), FormatBytes(j.Size), err)
}

func (d *downloader) diskError(err error, j fileJob, have int64) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: the disk filled up while writing %s (%s of %s); free some space in %s and pull again to resume: %v",
			ErrDiskFull, j.Path, FormatBytes(have), FormatBytes(j.Size), d.dir, err)
	}
	return writeError(err, d.localPath(j)+".part")
}

func writeError(err error, path string) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: the disk is full (writing %s): %v", ErrDiskFull, path, err)
	}
	return fmt.Errorf("writing %s: %w", path, err)
}

// contentRangeStart parses "bytes START-END/TOTAL".
func contentRangeStart(h string) (int64, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !ok {
		return 0, false
	}
	startStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	start, err := strconv.ParseInt(strings.TrimSpace(startStr), 10, 64)
	return start, err == nil && start >= 0
}

// syncDir makes a rename durable; failure only weakens crash safety.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// verifier hashes a file as it is written: sha256 for LFS files (the Hub's
// lfs.sha256), the git blob id for small files (the Hub's blobId), else only
// the size is known and checked by the caller.
type verifier struct {
	j fileJob
	h hash.Hash
}

func newVerifier(j fileJob) *verifier {
	v := &verifier{j: j}
	v.reset()
	return v
}

func (v *verifier) reset() {
	switch {
	case v.j.SHA256 != "":
		v.h = sha256.New()
	case isGitSHA1(v.j.BlobID):
		// A git blob id is sha1("blob <size>\x00" + content).
		v.h = sha1.New()
		fmt.Fprintf(v.h, "blob %d\x00", v.j.Size)
	default:
		v.h = nil
	}
}

func (v *verifier) Write(p []byte) (int, error) {
	if v.h != nil {
		v.h.Write(p)
	}
	return len(p), nil
}

func (v *verifier) check() error {
	if v.h == nil {
		return nil
	}
	got := hex.EncodeToString(v.h.Sum(nil))
	if v.j.SHA256 != "" {
		if got != v.j.SHA256 {
			return fmt.Errorf("sha256 is %s but the Hub lists %s", got, v.j.SHA256)
		}
		return nil
	}
	if got != strings.ToLower(v.j.BlobID) {
		return fmt.Errorf("git blob id is %s but the Hub lists %s", got, v.j.BlobID)
	}
	return nil
}

func isGitSHA1(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// verifyFile hashes a file already in place; ok reports a match.
func verifyFile(ctx context.Context, path string, j fileJob) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	v := newVerifier(j)
	n, err := io.Copy(v, ctxReader{ctx, f})
	if err != nil {
		return false, err
	}
	return n == j.Size && v.check() == nil, nil
}

// ctxReader stops a long local read (hashing gigabytes) on cancel.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// FormatBytes prints a byte count with a decimal unit, as download tools do.
func FormatBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		f /= unit
		if f < unit {
			if f < 10 {
				return fmt.Sprintf("%.2f %s", f, u)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return fmt.Sprintf("%.1f PB", f/unit)
}
