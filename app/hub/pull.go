package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Store is the user's model folder and how to fill it.
type Store struct {
	Dir      string  // holds one <owner>--<name> folder per model
	Client   *Client // the Hub
	Revision string  // branch, tag or commit to pull; "" means "main"
	// Retries is how many times a file is resumed after a transient failure
	// (dropped connection, Hub 5xx) within one pull, waiting RetryDelay,
	// then twice as long, and so on.
	Retries     int
	RetryDelay  time.Duration
	IdleTimeout time.Duration // a download with no data for this long is retried (default 60 s)

	// Test hooks.
	wrapWriter func(path string, w io.Writer) io.Writer
	freeSpace  func(dir string) (int64, bool)
}

// NewStore is a store at dir using the Hub settings from the environment.
func NewStore(dir string) *Store {
	return &Store{Dir: dir, Client: NewClientFromEnv(), Retries: 3, RetryDelay: 2 * time.Second}
}

// DefaultStore is NewStore(DefaultModelsDir()).
func DefaultStore() (*Store, error) {
	dir, err := DefaultModelsDir()
	if err != nil {
		return nil, err
	}
	return NewStore(dir), nil
}

// ModelDir is the folder repo is pulled into.
func (s *Store) ModelDir(repo string) string { return filepath.Join(s.Dir, DirName(repo)) }

// Pull makes the model folder of name (an alias or a repository id) match the
// Hub: files already verified are skipped, partial files resume, new files
// are checked against the Hub's hashes before they replace anything. It
// returns the model folder. progress may be nil; it is called on the pulling
// goroutine. On any error every complete file stays and partial files are
// kept for the next pull, except one that failed its checksum.
func (s *Store) Pull(ctx context.Context, name string, progress func(Progress)) (string, error) {
	repo, err := ParseRepo(name)
	if err != nil {
		return "", err
	}
	rev := cmp.Or(s.Revision, "main")
	rep := newReporter(progress, repo)
	rep.send(EventListing)
	// List first, so a wrong name leaves no empty folder behind.
	info, err := s.Client.Info(ctx, repo, rev)
	if err != nil {
		return "", err
	}
	dir := s.ModelDir(repo)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", writeError(err, dir)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return "", fmt.Errorf("%w: another talkbox is pulling %s into %s: %v", ErrBusy, repo, dir, err)
	}
	defer unlock()
	jobs, err := jobsFrom(info)
	if err != nil {
		return "", fmt.Errorf("%s: %w", repo, err)
	}
	commit := cmp.Or(info.SHA, rev)
	man, err := readManifest(dir)
	if err != nil {
		return "", err
	}
	if man.Commit != commit || man.Repo != repo {
		man.Complete = false
	}
	man.Repo, man.Revision, man.Commit = repo, rev, commit

	rep.p.FileCount = len(jobs)
	for _, j := range jobs {
		rep.p.Total += j.Size
	}
	if err := s.checkFreeSpace(dir, jobs, man); err != nil {
		return "", err
	}
	man.Total = rep.p.Total
	if err := man.write(dir); err != nil {
		return "", writeError(err, filepath.Join(dir, manifestName))
	}

	d := &downloader{client: s.Client, repo: repo, commit: commit, dir: dir, rep: rep,
		idleTimeout: s.IdleTimeout, wrapWriter: s.wrapWriter}
	for i, j := range jobs {
		rep.p.File, rep.p.FileIndex, rep.p.FileSize, rep.p.FileDone = j.Path, i+1, j.Size, 0
		complete, err := s.alreadyComplete(ctx, d, j, man)
		if err != nil {
			return "", err
		}
		if complete {
			rep.present(j.Size)
			rep.send(EventFileSkipped)
			continue
		}
		if err := s.fetchWithRetry(ctx, d, j); err != nil {
			// Keep the records of what did complete.
			man.Complete = false
			return "", errors.Join(err, man.write(dir))
		}
		st, err := os.Stat(d.localPath(j))
		if err != nil {
			return "", err
		}
		man.Files[j.Path] = recordFor(j, st)
		if err := man.write(dir); err != nil {
			return "", writeError(err, filepath.Join(dir, manifestName))
		}
		rep.send(EventFileDone)
	}
	man.Complete = true
	if err := man.write(dir); err != nil {
		return "", writeError(err, filepath.Join(dir, manifestName))
	}
	rep.p.File = ""
	rep.send(EventDone)
	return dir, nil
}

// fetchWithRetry resumes a file after transient failures, backing off.
func (s *Store) fetchWithRetry(ctx context.Context, d *downloader, j fileJob) error {
	delay := s.RetryDelay
	for attempt := 0; ; attempt++ {
		err := d.fetch(ctx, j)
		if err == nil || !isTransient(err) || attempt >= s.Retries || ctx.Err() != nil {
			return err
		}
		reason := err.Error()
		if i := strings.LastIndex(reason, ": "); i >= 0 {
			reason = reason[i+2:] // the root cause, e.g. "unexpected EOF"
		}
		d.rep.p.Note = fmt.Sprintf("stopped at %s (%s); resuming in %s", FormatBytes(d.rep.p.FileDone), reason, delay)
		d.rep.send(EventRetry)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (the partial file is kept; the next pull resumes it)", j.Path, ctx.Err())
		case <-time.After(delay):
		}
		d.rep.rewind() // fetch counts the .part's bytes again
		delay *= 2
	}
}

// alreadyComplete reports whether the file in place is the listed one: by the
// manifest when the file is unchanged since it was verified, else by hashing.
func (s *Store) alreadyComplete(ctx context.Context, d *downloader, j fileJob, man *manifest) (bool, error) {
	dst := d.localPath(j)
	st, err := os.Stat(dst)
	if err != nil || !st.Mode().IsRegular() || st.Size() != j.Size {
		return false, nil
	}
	if rec, ok := man.Files[j.Path]; ok && rec.matches(j, st) {
		os.Remove(dst + ".part") // left over from an interrupted update
		return true, nil
	}
	d.rep.send(EventVerifying)
	ok, err := verifyFile(ctx, dst, j)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil || !ok {
		return false, nil // fetch it; the old file stays until the new one is verified
	}
	man.Files[j.Path] = recordFor(j, st)
	os.Remove(dst + ".part")
	return true, nil
}

// checkFreeSpace refuses to start a pull that cannot fit, rather than fail
// after a long download.
func (s *Store) checkFreeSpace(dir string, jobs []fileJob, man *manifest) error {
	need := stillNeeded(dir, jobs)
	avail, known := s.free(dir)
	if known && avail < need {
		return fmt.Errorf("%w: pulling %s needs %s more, but %s has only %s free",
			ErrDiskFull, man.Repo, FormatBytes(need), dir, FormatBytes(avail))
	}
	return nil
}

// stillNeeded is the bytes a pull into dir has yet to write: files already
// at their listed size count as present (hashing decides later), .part files
// count for what they hold.
func stillNeeded(dir string, jobs []fileJob) int64 {
	var need int64
	for _, j := range jobs {
		dst := filepath.Join(dir, filepath.FromSlash(j.Path))
		if st, err := os.Stat(dst); err == nil && st.Size() == j.Size {
			continue
		}
		need += j.Size
		if st, err := os.Stat(dst + ".part"); err == nil && st.Size() <= j.Size {
			need -= st.Size()
		}
	}
	return need
}

// free is the space available at dir (or the nearest folder above it that
// exists); known is false where the platform cannot tell.
func (s *Store) free(dir string) (int64, bool) {
	free := s.freeSpace
	if free == nil {
		free = diskFree
	}
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			break
		}
		dir = up
	}
	return free(dir)
}

// jobsFrom turns the listing into files to fetch, smallest first so the
// configs land (and are checkable) before the large weights.
func jobsFrom(info *RepoInfo) ([]fileJob, error) {
	jobs := make([]fileJob, 0, len(info.Siblings))
	for _, sib := range info.Siblings {
		p := sib.RFilename
		base := path.Base(p)
		if p == "" || strings.Contains(p, `\`) || !filepath.IsLocal(filepath.FromSlash(p)) ||
			strings.HasSuffix(p, ".part") || strings.HasPrefix(base, ".talkbox-pull") {
			return nil, fmt.Errorf("the Hub lists a file name Talkbox will not write: %q", p)
		}
		j := fileJob{Path: p}
		switch {
		case sib.LFS != nil:
			j.Size, j.SHA256 = sib.LFS.Size, strings.ToLower(sib.LFS.SHA256)
		case sib.Size != nil:
			j.Size, j.BlobID = *sib.Size, sib.BlobID
		default:
			return nil, fmt.Errorf("the file list has no size for %s (the endpoint ignores ?blobs=true)", p)
		}
		if j.Size < 0 {
			return nil, fmt.Errorf("the file list gives %s a negative size", p)
		}
		jobs = append(jobs, j)
	}
	slices.SortStableFunc(jobs, func(a, b fileJob) int {
		return cmp.Or(cmp.Compare(a.Size, b.Size), cmp.Compare(a.Path, b.Path))
	})
	return jobs, nil
}
