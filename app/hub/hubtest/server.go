// Package hubtest is a loopback imitation of the Hugging Face Hub's listing
// and file endpoints, serving a checkpoint folder, for tests of pulling (the
// hub package's own, and end-to-end tests that pull the tiny golden model and
// then synthesise with it). It counts requests and misbehaves on cue: dropped
// or stalled connections, corrupt bytes, ignored Range, error statuses.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server imitates the two Hub endpoints a pull uses, on a loopback address:
//
//	GET /api/models/{owner}/{name}/revision/{rev}?blobs=true  -> {id, sha, siblings[{rfilename,size,blobId,lfs}]}
//	GET /{owner}/{name}/resolve/{rev}/{path}                  -> the file; LFS files redirect to /cdn/{sha256}
//
// It serves one checkpoint folder, counts requests and can misbehave on cue.
type Server struct {
	URL    string // the endpoint, for HF_ENDPOINT or hub.Client.Endpoint
	Repo   string
	Commit string
	Files  map[string]*File // by repo path
	srv    *httptest.Server

	mu       sync.Mutex
	fileReqs []Request // requests for file bytes (resolve and cdn)
	apiReqs  int
	// Misbehaviour, set through the methods below.
	apiStatus    int               // answer the listing with this status
	apiErrorCode string            // X-Error-Code with apiStatus
	dropAfter    map[string]int64  // path -> drop the connection after this many body bytes (once)
	corrupt      map[string]bool   // path -> serve with one byte flipped
	stallAfter   map[string]int64  // path -> send this many bytes, then hang until the client goes
	ignoreRange  bool              // answer Range requests with 200 and the whole file
	requireToken string            // answer 401 unless "Authorization: Bearer <token>"
	served       map[string]int64  // path -> body bytes actually written
	authSeen     map[string]string // path -> Authorization header of the last request
}

// File is one served file with the hashes the listing advertises.
type File struct {
	Path   string
	Data   []byte
	SHA256 string
	BlobID string
	LFS    bool
}

// Request is one request for file bytes (resolve or CDN).
type Request struct {
	Path   string
	Range  string // the Range header, "" when none
	Status int
}

// New serves the checkpoint folder src as repo at a fixed commit; it stops
// when the test ends. Hashes are computed here, from the files themselves
// (symlinks are followed, as the Hub stores content).
func New(t testing.TB, src, repo string) *Server {
	t.Helper()
	h := &Server{Repo: repo, Commit: strings.Repeat("c0ffee12", 5), Files: map[string]*File{},
		dropAfter: map[string]int64{}, corrupt: map[string]bool{}, stallAfter: map[string]int64{},
		served: map[string]int64{}, authSeen: map[string]string{}}
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p) // follows symlinks, as the Hub stores content
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		f := &File{Path: filepath.ToSlash(rel), Data: data}
		sum := sha256.Sum256(data)
		f.SHA256 = hex.EncodeToString(sum[:])
		// Weights and big files are LFS on the Hub; configs are plain git blobs.
		f.LFS = strings.HasSuffix(f.Path, ".safetensors") || len(data) > 1<<20
		f.BlobID = gitBlobID(data)
		if f.LFS {
			f.BlobID = gitBlobID([]byte(fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", f.SHA256, len(data))))
		}
		h.Files[f.Path] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	h.URL = h.srv.URL
	t.Cleanup(h.srv.Close)
	return h
}

func gitBlobID(data []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(data))
	s.Write(data)
	return hex.EncodeToString(s.Sum(nil))
}

// HTTPClient is an http.Client for this server.
func (h *Server) HTTPClient() *http.Client { return h.srv.Client() }

func (h *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/models/"):
		h.serveInfo(w, r)
	case strings.HasPrefix(p, "/cdn/"):
		sha := strings.TrimPrefix(p, "/cdn/")
		for _, f := range h.Files {
			if f.SHA256 == sha && f.LFS {
				h.serveFile(w, r, f)
				return
			}
		}
		http.NotFound(w, r)
	default:
		prefix := "/" + h.Repo + "/resolve/"
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			w.Header().Set("X-Error-Code", "RepoNotFound")
			http.Error(w, "Repository not found", http.StatusNotFound)
			return
		}
		rev, path, _ := strings.Cut(rest, "/")
		f := h.Files[path]
		if f == nil || (rev != h.Commit && rev != "main") {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "Entry not found", http.StatusNotFound)
			return
		}
		if !h.authorised(w, r, path) {
			return
		}
		if f.LFS {
			// The Hub answers LFS files with a redirect to its CDN, with the
			// size and hash in headers.
			w.Header().Set("X-Linked-Size", fmt.Sprint(len(f.Data)))
			w.Header().Set("X-Linked-Etag", `"`+f.SHA256+`"`)
			http.Redirect(w, r, "/cdn/"+f.SHA256, http.StatusFound)
			return
		}
		h.serveFile(w, r, f)
	}
}

func (h *Server) authorised(w http.ResponseWriter, r *http.Request, key string) bool {
	h.mu.Lock()
	h.authSeen[key] = r.Header.Get("Authorization")
	token := h.requireToken
	h.mu.Unlock()
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.Header().Set("X-Error-Message", "Invalid credentials in Authorization header")
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return false
	}
	return true
}

func (h *Server) serveInfo(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.apiReqs++
	status, code := h.apiStatus, h.apiErrorCode
	h.mu.Unlock()
	want := "/api/models/" + h.Repo + "/revision/"
	rev, ok := strings.CutPrefix(r.URL.Path, want)
	if status != 0 {
		if code != "" {
			w.Header().Set("X-Error-Code", code)
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	if !ok {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
		return
	}
	if !h.authorised(w, r, "api") {
		return
	}
	if rev != "main" && rev != h.Commit {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "Invalid rev id", http.StatusNotFound)
		return
	}
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int    `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sibling struct {
		RFilename string `json:"rfilename"`
		Size      int    `json:"size"`
		BlobID    string `json:"blobId"`
		LFS       *lfs   `json:"lfs,omitempty"`
	}
	var sibs []sibling
	for _, f := range h.Files {
		s := sibling{RFilename: f.Path, Size: len(f.Data), BlobID: f.BlobID}
		if f.LFS {
			s.LFS = &lfs{SHA256: f.SHA256, Size: len(f.Data), PointerSize: 134}
		}
		sibs = append(sibs, s)
	}
	sort.Slice(sibs, func(i, j int) bool { return sibs[i].RFilename < sibs[j].RFilename })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"_id": "0123456789abcdef01234567", "id": h.Repo, "modelId": h.Repo, "sha": h.Commit,
		"private": false, "gated": false, "siblings": sibs,
	})
}

// serveFile answers with Range support (206, 416) through http.ServeContent,
// and misbehaves when a test asked for it.
func (h *Server) serveFile(w http.ResponseWriter, r *http.Request, f *File) {
	h.mu.Lock()
	drop, dropping := h.dropAfter[f.Path]
	delete(h.dropAfter, f.Path)
	stall, stalling := h.stallAfter[f.Path]
	delete(h.stallAfter, f.Path)
	data := f.Data
	if h.corrupt[f.Path] {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0xff
	}
	if h.ignoreRange {
		r.Header.Del("Range")
	}
	rng := r.Header.Get("Range")
	h.mu.Unlock()

	// The request is recorded as its status goes out, before the client can
	// see the response. Recorded after the body, a request whose body the
	// client abandoned (a full disk) could land after the client had moved
	// on, even after ResetCounts.
	cw := &countingWriter{ResponseWriter: w, limit: -1, onStatus: func(status int) {
		h.mu.Lock()
		h.fileReqs = append(h.fileReqs, Request{Path: f.Path, Range: rng, Status: status})
		h.mu.Unlock()
	}}
	if dropping {
		cw.limit = drop
	} else if stalling {
		cw.limit = stall
	}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(data))
	h.mu.Lock()
	h.served[f.Path] += cw.n
	h.mu.Unlock()
	if cw.cut {
		if stalling {
			<-r.Context().Done() // hang, as a stalled server does, until the client gives up
		}
		panic(http.ErrAbortHandler) // close the connection mid-body
	}
}

// countingWriter counts body bytes and stops writing after limit bytes;
// onStatus learns the status before it is sent.
type countingWriter struct {
	http.ResponseWriter
	status   int
	n        int64
	limit    int64
	cut      bool
	onStatus func(status int)
}

func (c *countingWriter) setStatus(s int) {
	if c.status == 0 {
		c.status = s
		c.onStatus(s)
	}
}

func (c *countingWriter) WriteHeader(s int) { c.setStatus(s); c.ResponseWriter.WriteHeader(s) }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.setStatus(http.StatusOK)
	if c.limit >= 0 && c.n+int64(len(p)) > c.limit {
		p = p[:c.limit-c.n]
		c.cut = true
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	if c.cut {
		c.ResponseWriter.(http.Flusher).Flush()
		return n, fmt.Errorf("fake hub: connection cut after %d bytes", c.n)
	}
	return n, err
}

// FileRequests lists the requests for file bytes so far.
func (h *Server) FileRequests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.fileReqs...)
}

// ResetCounts forgets the requests and byte counts so far.
func (h *Server) ResetCounts() {
	h.mu.Lock()
	h.fileReqs, h.apiReqs, h.served = nil, 0, map[string]int64{}
	h.mu.Unlock()
}

// TotalSize is the bytes of all files.
func (h *Server) TotalSize() int64 {
	var n int64
	for _, f := range h.Files {
		n += int64(len(f.Data))
	}
	return n
}

// Served is how many body bytes of path were written so far.
func (h *Server) Served(path string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.served[path]
}

// AuthSeen is the Authorization header of the last request for path ("api"
// for the listing).
func (h *Server) AuthSeen(path string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.authSeen[path]
}

// DropAfter makes the next request for path end after n body bytes, the
// connection closed as a network failure would.
func (h *Server) DropAfter(path string, n int64) { h.set(func() { h.dropAfter[path] = n }) }

// StallAfter makes the next request for path send n bytes, then hang.
func (h *Server) StallAfter(path string, n int64) { h.set(func() { h.stallAfter[path] = n }) }

// Corrupt serves path with one byte flipped (while on is true).
func (h *Server) Corrupt(path string, on bool) { h.set(func() { h.corrupt[path] = on }) }

// SetAPIStatus answers the listing with status and X-Error-Code code (0: normal).
func (h *Server) SetAPIStatus(status int, code string) {
	h.set(func() { h.apiStatus, h.apiErrorCode = status, code })
}

// SetIgnoreRange answers Range requests with 200 and the whole file.
func (h *Server) SetIgnoreRange(on bool) { h.set(func() { h.ignoreRange = on }) }

// RequireToken answers 401 unless "Authorization: Bearer token" is sent.
func (h *Server) RequireToken(token string) { h.set(func() { h.requireToken = token }) }

func (h *Server) set(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}
