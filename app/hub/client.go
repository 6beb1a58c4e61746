// Package hub gets Qwen3-TTS checkpoints from the Hugging Face Hub into the
// user's model folder and finds them again: a small Hub client (file listing,
// resumable downloads checked against the Hub's hashes), the model store
// (where models live, which are installed and complete) and Resolve, which
// turns a --model value (a path, an alias or a repository) into a folder.
package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultEndpoint is the Hub used when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// Client talks to one Hub endpoint.
type Client struct {
	Endpoint  string // scheme://host[/prefix], no trailing slash
	Token     string // sent as "Authorization: Bearer" when not empty
	HTTP      *http.Client
	UserAgent string
}

// NewClientFromEnv reads the settings the official Python client reads:
// HF_ENDPOINT (trailing slash ignored) and the token from HF_TOKEN, then
// HUGGING_FACE_HUB_TOKEN, then the file `hf auth login` writes.
func NewClientFromEnv() *Client {
	ep := strings.TrimRight(strings.TrimSpace(os.Getenv("HF_ENDPOINT")), "/")
	if ep == "" {
		ep = DefaultEndpoint
	}
	return &Client{Endpoint: ep, Token: TokenFromEnv(), HTTP: newHTTPClient(), UserAgent: "talkbox-pull/1"}
}

// TokenFromEnv finds the user's Hub token the way huggingface_hub does, or "".
func TokenFromEnv() string {
	for _, k := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := cleanToken(os.Getenv(k)); t != "" {
			return t
		}
	}
	path := os.Getenv("HF_TOKEN_PATH")
	if path == "" {
		home := os.Getenv("HF_HOME")
		if home == "" {
			cache := os.Getenv("XDG_CACHE_HOME")
			if cache == "" {
				userHome, err := os.UserHomeDir()
				if err != nil {
					return ""
				}
				cache = filepath.Join(userHome, ".cache")
			}
			home = filepath.Join(cache, "huggingface")
		}
		path = filepath.Join(home, "token")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return cleanToken(string(b))
}

func cleanToken(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(s))
}

// newHTTPClient bounds connecting and waiting for headers but not the body:
// a checkpoint takes minutes. Stalled bodies are caught by the idle watchdog
// in the downloader instead.
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr}
}

// RepoInfo is the part of GET /api/models/{repo}/revision/{rev}?blobs=true
// that a download needs.
type RepoInfo struct {
	ID       string    `json:"id"`
	SHA      string    `json:"sha"` // the commit the revision points at
	Siblings []Sibling `json:"siblings"`
}

// Sibling is one file of the repository. With blobs=true the Hub adds size,
// the git blob id and, for LFS files, the content's sha256.
type Sibling struct {
	RFilename string   `json:"rfilename"`
	Size      *int64   `json:"size"`
	BlobID    string   `json:"blobId"`
	LFS       *LFSInfo `json:"lfs"`
}

// LFSInfo is a sibling's LFS pointer: the real content's size and sha256.
type LFSInfo struct {
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	PointerSize int64  `json:"pointerSize"`
}

// Info lists the files of repo at revision (a branch, tag or commit).
func (c *Client) Info(ctx context.Context, repo, revision string) (*RepoInfo, error) {
	u := c.Endpoint + "/api/models/" + escapeRepo(repo) + "/revision/" + url.PathEscape(revision) + "?blobs=true"
	req, err := c.newRequest(ctx, u)
	if err != nil {
		return nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, networkError(err, c.Endpoint, "the file list of "+repo)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp, repo, revision, "")
	}
	var info RepoInfo
	// The listing of a repo with a few files is a few kB; 16 MB is plenty.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&info); err != nil {
		return nil, networkError(fmt.Errorf("reading the file list of %s: %w", repo, err), c.Endpoint, "the file list of "+repo)
	}
	if len(info.Siblings) == 0 {
		return nil, fmt.Errorf("%w: the Hub lists no files for %s at %s", ErrNotFound, repo, revision)
	}
	return &info, nil
}

// FileURL is where the Hub serves one file of a revision.
func (c *Client) FileURL(repo, revision, path string) string {
	return c.Endpoint + "/" + escapeRepo(repo) + "/resolve/" + url.PathEscape(revision) + "/" + escapePath(path)
}

func (c *Client) newRequest(ctx context.Context, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("bad Hub URL %q (check HF_ENDPOINT): %w", u, err)
	}
	if c.Token != "" {
		// net/http drops this header when a redirect leaves the Hub's domain
		// (the signed CDN URLs need no token), as huggingface_hub does.
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	return req, nil
}

func escapeRepo(repo string) string { return escapePath(repo) }

// escapePath escapes each segment of a slash-separated path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}
