package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"talkbox/app/hub/hubtest"
	"talkbox/engine/model"
)

const testRepo = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"

// assertSameFiles checks every served file landed byte for byte.
func assertSameFiles(t *testing.T, h *hubtest.Server, dir string) {
	t.Helper()
	for p, f := range h.Files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !bytes.Equal(got, f.Data) {
			t.Fatalf("%s: content differs from the served file", p)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)) + ".part"); err == nil {
			t.Fatalf("%s.part left behind", p)
		}
	}
}

func TestPullFullCheckpointLoads(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	var events []Progress
	dir, err := s.Pull(context.Background(), "0.6b-customvoice", func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(s.Dir, "Qwen--Qwen3-TTS-12Hz-0.6B-CustomVoice"); dir != want {
		t.Fatalf("dir %s, want %s", dir, want)
	}
	assertSameFiles(t, h, dir)
	if _, err := os.Stat(filepath.Join(dir, "speech_tokenizer", "model.safetensors")); err != nil {
		t.Fatalf("speech_tokenizer not pulled: %v", err)
	}
	m, err := model.Load(dir, model.Options{RequireCodec: true})
	if err != nil {
		t.Fatalf("pulled checkpoint does not load: %v", err)
	}
	defer m.Close()
	if len(m.Config.Speakers()) == 0 {
		t.Fatal("pulled CustomVoice checkpoint has no speakers")
	}
	last := events[len(events)-1]
	if last.Event != EventDone || last.Done != h.TotalSize() || last.Total != h.TotalSize() || last.Downloaded != h.TotalSize() {
		t.Fatalf("final report %+v, want Done=Total=Downloaded=%d", last, h.TotalSize())
	}
	if last.FileCount != len(h.Files) {
		t.Fatalf("FileCount %d, want %d", last.FileCount, len(h.Files))
	}
	var doneFiles int
	for _, e := range events {
		if e.Event == EventFileDone {
			doneFiles++
		}
	}
	if doneFiles != len(h.Files) {
		t.Fatalf("%d EventFileDone, want %d", doneFiles, len(h.Files))
	}
	in := Inspect(dir)
	if !in.Complete || in.Repo != testRepo || in.Size != h.TotalSize() || in.Type != model.TypeCustomVoice {
		t.Fatalf("Inspect after pull: %+v", in)
	}
}

func TestSecondPullDownloadsNothing(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatal(err)
	}
	h.ResetCounts()
	var skipped, verifying int
	var last Progress
	_, err := s.Pull(context.Background(), testRepo, func(p Progress) {
		switch p.Event {
		case EventFileSkipped:
			skipped++
		case EventVerifying:
			verifying++
		}
		last = p
	})
	if err != nil {
		t.Fatal(err)
	}
	if reqs := h.FileRequests(); len(reqs) != 0 {
		t.Fatalf("second pull made %d file requests: %+v", len(reqs), reqs)
	}
	if skipped != len(h.Files) || verifying != 0 {
		t.Fatalf("skipped %d (want %d), re-hashed %d (want 0: the manifest vouches)", skipped, len(h.Files), verifying)
	}
	if last.Downloaded != 0 || last.Done != h.TotalSize() {
		t.Fatalf("final report %+v", last)
	}

	// Without the manifest the files are hashed, found right, and still not fetched.
	os.Remove(filepath.Join(s.ModelDir(testRepo), manifestName))
	verifying = 0
	if _, err := s.Pull(context.Background(), testRepo, func(p Progress) {
		if p.Event == EventVerifying {
			verifying++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if reqs := h.FileRequests(); len(reqs) != 0 || verifying != len(h.Files) {
		t.Fatalf("without manifest: %d file requests, %d files hashed", len(reqs), verifying)
	}
}

func TestResumeAfterDroppedConnection(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	const big = "model.safetensors"
	const cut = 5_000_000
	h.DropAfter(big, cut)
	_, err := s.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrNetwork) || !strings.Contains(err.Error(), "resumes") {
		t.Fatalf("want a resumable network error, got %v", err)
	}
	dir := s.ModelDir(testRepo)
	st, err := os.Stat(filepath.Join(dir, big+".part"))
	if err != nil || st.Size() != cut {
		t.Fatalf("partial file: %v, size %v, want %d", err, st, cut)
	}
	// Files finished before the drop are complete and stay.
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatalf("config.json lost: %v", err)
	}
	in := Inspect(dir)
	if in.Complete || !strings.Contains(in.Problem, "interrupted") || in.Partial != cut {
		t.Fatalf("Inspect of the interrupted pull: %+v", in)
	}

	h.ResetCounts()
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, dir)
	var ranged []hubtest.Request
	for _, r := range h.FileRequests() {
		if r.Path == big {
			ranged = append(ranged, r)
		}
	}
	if len(ranged) != 1 || ranged[0].Range != "bytes=5000000-" || ranged[0].Status != 206 {
		t.Fatalf("resume requests for %s: %+v, want one 206 for bytes=5000000-", big, ranged)
	}
	size := int64(len(h.Files[big].Data))
	if got := h.Served(big); got != size-cut {
		t.Fatalf("second pull received %d bytes of %s, want %d (the first %d must not come again)", got, big, size-cut, cut)
	}
	if n := len(h.FileRequests()); n != 1 {
		t.Fatalf("second pull made %d file requests, want only the resumed one", n)
	}
}

func TestRetryResumesWithinOnePull(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	s.Retries = 2
	h.DropAfter("model.safetensors", 1_000_000)
	var retries int
	dir, err := s.Pull(context.Background(), testRepo, func(p Progress) {
		if p.Event == EventRetry {
			retries++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, dir)
	if retries != 1 || h.Served("model.safetensors") != int64(len(h.Files["model.safetensors"].Data)) {
		t.Fatalf("retries %d, bytes served %d", retries, h.Served("model.safetensors"))
	}
}

func TestServerIgnoringRangeRestartsCleanly(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	h.DropAfter("model.safetensors", 3_000_000)
	if _, err := s.Pull(context.Background(), testRepo, nil); err == nil {
		t.Fatal("want the drop to fail the first pull")
	}
	h.SetIgnoreRange(true) // the second answer is 200 with the whole file
	dir, err := s.Pull(context.Background(), testRepo, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, dir)
}

func TestStaleOversizedPartIsReplaced(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	dir := s.ModelDir(testRepo)
	os.MkdirAll(dir, 0o755)
	// A .part as long as the file but with the wrong bytes: no request can fix
	// it, so it must fail the check, be deleted, and come anew next time.
	os.WriteFile(filepath.Join(dir, "config.json.part"), bytes.Repeat([]byte("x"), len(h.Files["config.json"].Data)), 0o644)
	_, err := s.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("want ErrChecksum for the stale part, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json.part")); !os.IsNotExist(err) {
		t.Fatal("bad .part not removed")
	}
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, dir)
}

func TestChecksumMismatchRemovesFile(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	h.Corrupt("model.safetensors", true)
	_, err := s.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("want ErrChecksum, got %v", err)
	}
	for _, want := range []string{"model.safetensors", "sha256", "deleted"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
	dir := s.ModelDir(testRepo)
	for _, p := range []string{"model.safetensors", "model.safetensors.part"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Fatalf("%s exists after a checksum failure", p)
		}
	}
	// Complete files stay; a clean retry completes the model.
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	h.Corrupt("model.safetensors", false)
	h.Corrupt("config.json", true) // a small (git blob) file
	os.Remove(filepath.Join(dir, "config.json"))
	os.Remove(filepath.Join(dir, manifestName))
	_, err = s.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "git blob id") {
		t.Fatalf("want a git blob id mismatch for config.json, got %v", err)
	}
	h.Corrupt("config.json", false)
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, dir)
}

func TestAuthAndNotFoundErrors(t *testing.T) {
	h := newFakeHub(t, testRepo)
	cases := []struct {
		status int
		code   string
		token  string
		want   error
		words  []string
	}{
		{401, "", "", ErrAuth, []string{"HF_TOKEN", "settings/tokens"}},
		{401, "", "hf_bad", ErrAuth, []string{"rejected", "HF_TOKEN"}},
		{403, "GatedRepo", "hf_x", ErrAuth, []string{"licence", h.URL + "/" + testRepo}},
		{404, "RepoNotFound", "", ErrNotFound, []string{"not found", "0.6b-customvoice", "1.7b-voicedesign"}},
		{401, "RepoNotFound", "", ErrNotFound, []string{"not found", "HF_TOKEN"}},
		{404, "RevisionNotFound", "", ErrNotFound, []string{"revision"}},
		{503, "", "", ErrServer, []string{"try again"}},
	}
	for _, c := range cases {
		s := testStore(t, h)
		s.Client.Token = c.token
		h.SetAPIStatus(c.status, c.code)
		_, err := s.Pull(context.Background(), testRepo, nil)
		if !errors.Is(err, c.want) {
			t.Fatalf("HTTP %d %s: want %v, got %v", c.status, c.code, c.want, err)
		}
		if entries, _ := os.ReadDir(s.Dir); len(entries) != 0 {
			t.Errorf("HTTP %d %s: a failed listing left %d entries in the model folder", c.status, c.code, len(entries))
		}
		for _, w := range c.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("HTTP %d %s: %q does not mention %q", c.status, c.code, err, w)
			}
		}
	}
	h.SetAPIStatus(0, "")
	// A repository the Hub does not have.
	_, err := testStore(t, h).Pull(context.Background(), "someone/not-a-model", nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "someone/not-a-model") {
		t.Fatalf("unknown repo: %v", err)
	}
}

func TestTokenFromEnvironmentIsSent(t *testing.T) {
	h := newFakeHub(t, testRepo)
	h.RequireToken("hf_secret")
	t.Setenv("HF_HOME", t.TempDir()) // no token file
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")
	t.Setenv("HF_ENDPOINT", h.URL+"/")
	s := NewStore(t.TempDir())
	s.Retries = 0
	if s.Client.Endpoint != h.URL {
		t.Fatalf("HF_ENDPOINT %q read as %q", h.URL+"/", s.Client.Endpoint)
	}
	if _, err := s.Pull(context.Background(), testRepo, nil); !errors.Is(err, ErrAuth) && !errors.Is(err, ErrNotFound) {
		t.Fatalf("without a token: %v", err)
	}
	t.Setenv("HF_TOKEN", " hf_secret\n")
	s = NewStore(t.TempDir())
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatalf("with HF_TOKEN: %v", err)
	}
	if got := h.AuthSeen("config.json"); got != "Bearer hf_secret" {
		t.Fatalf("file request Authorization %q", got)
	}
	// The token file written by `hf auth login` is the fallback.
	t.Setenv("HF_TOKEN", "")
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "token"), []byte("hf_secret\n"), 0o600)
	t.Setenv("HF_HOME", home)
	if got := TokenFromEnv(); got != "hf_secret" {
		t.Fatalf("token file: %q", got)
	}
}

func TestNoNetwork(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	s := &Store{Dir: t.TempDir(), Client: &Client{Endpoint: "http://" + addr, HTTP: newHTTPClient()}}
	_, err = s.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrNetwork) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("want a connection-refused network error, got %v", err)
	}
}

func TestCancelThenResume(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	const big = "model.safetensors"
	h.StallAfter(big, 4_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	var written int64
	s.wrapWriter = func(path string, w io.Writer) io.Writer {
		if path != big {
			return w
		}
		return writerFunc(func(p []byte) (int, error) {
			n, err := w.Write(p)
			written += int64(n)
			if written >= 4_000_000 {
				once.Do(cancel) // the user presses Cancel once 4 MB are on disk
			}
			return n, err
		})
	}
	_, err := s.Pull(ctx, testRepo, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "resumes") {
		t.Fatalf("want a cancellation that keeps the partial file, got %v", err)
	}
	dir := s.ModelDir(testRepo)
	st, err := os.Stat(filepath.Join(dir, big+".part"))
	if err != nil || st.Size() != 4_000_000 {
		t.Fatalf("partial file after cancel: %v %v", st, err)
	}
	s.wrapWriter = nil
	h.ResetCounts()
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, dir)
	reqs := h.FileRequests()
	if len(reqs) != 1 || reqs[0].Range != "bytes=4000000-" {
		t.Fatalf("resume after cancel: %+v", reqs)
	}
}

func TestStalledDownloadTimesOut(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	s.IdleTimeout = 200 * time.Millisecond
	h.StallAfter("model.safetensors", 2_000_000)
	_, err := s.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrNetwork) || !strings.Contains(err.Error(), "no data") {
		t.Fatalf("want a stall error, got %v", err)
	}
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, s.ModelDir(testRepo))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestDiskFull(t *testing.T) {
	h := newFakeHub(t, testRepo)
	s := testStore(t, h)
	const big = "model.safetensors"
	var written int64
	s.wrapWriter = func(path string, w io.Writer) io.Writer {
		if path != big {
			return w
		}
		return writerFunc(func(p []byte) (int, error) {
			if written+int64(len(p)) > 2_000_000 {
				return 0, &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
			}
			written += int64(len(p))
			return w.Write(p)
		})
	}
	_, err := s.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free some space") {
		t.Fatalf("want ErrDiskFull, got %v", err)
	}
	dir := s.ModelDir(testRepo)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatalf("complete file lost on disk full: %v", err)
	}
	s.wrapWriter = nil
	h.ResetCounts()
	if _, err := s.Pull(context.Background(), testRepo, nil); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, h, dir)
	if r := h.FileRequests(); len(r) != 1 || r[0].Range != "bytes="+strconv.FormatInt(written, 10)+"-" {
		t.Fatalf("after disk full, want one resume from %d: %+v", written, r)
	}

	// Too little free space is refused before any download.
	s2 := testStore(t, h)
	s2.freeSpace = func(string) (int64, bool) { return 1000, true }
	h.ResetCounts()
	_, err = s2.Pull(context.Background(), testRepo, nil)
	if !errors.Is(err, ErrDiskFull) || len(h.FileRequests()) != 0 {
		t.Fatalf("free-space check: %v, %d requests", err, len(h.FileRequests()))
	}
}
