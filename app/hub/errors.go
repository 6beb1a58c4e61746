package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// Sentinel errors a caller (CLI, window) branches on. Every error the package
// returns wraps one of them with a message meant for the user.
var (
	ErrNetwork  = errors.New("network error")         // the Hub cannot be reached or the connection dropped
	ErrAuth     = errors.New("access denied")         // 401/403: gated repository or bad token
	ErrNotFound = errors.New("not found")             // 404: repository, revision or file
	ErrServer   = errors.New("hub error")             // 429 and 5xx: try again later
	ErrChecksum = errors.New("checksum mismatch")     // a downloaded file is not what the Hub lists
	ErrDiskFull = errors.New("not enough disk space") // ENOSPC or too little free space to start
	ErrBusy     = errors.New("pull already running")  // another process holds the model's lock
	ErrNoModel  = errors.New("model not installed")   // Resolve found nothing
)

// HTTPError is a non-success answer from the Hub. Code and Message come from
// the X-Error-Code / X-Error-Message headers the Hub sets (RepoNotFound,
// GatedRepo, RevisionNotFound, EntryNotFound, ...), as huggingface_hub reads them.
type HTTPError struct {
	StatusCode int
	Code       string
	Message    string
	URL        string
	kind       error
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("HTTP %d from %s", e.StatusCode, e.URL)
	if e.Code != "" || e.Message != "" {
		s += " (" + strings.TrimSpace(e.Code+" "+e.Message) + ")"
	}
	return s
}

func (e *HTTPError) Unwrap() error { return e.kind }

// isTransient reports whether trying again (and resuming) may succeed.
func isTransient(err error) bool {
	return errors.Is(err, ErrNetwork) || errors.Is(err, ErrServer)
}

// statusError explains a failed Hub response. file is "" for the listing.
func (c *Client) statusError(resp *http.Response, repo, revision, file string) error {
	he := &HTTPError{
		StatusCode: resp.StatusCode,
		Code:       resp.Header.Get("X-Error-Code"),
		Message:    resp.Header.Get("X-Error-Message"),
		URL:        resp.Request.URL.Redacted(),
	}
	what := repo
	if file != "" {
		what = file + " in " + repo
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized && he.Code == "RepoNotFound" && c.Token == "",
		resp.StatusCode == http.StatusNotFound && (he.Code == "RepoNotFound" || he.Code == ""):
		he.kind = ErrNotFound
		if file != "" && he.Code == "" {
			return fmt.Errorf("%s was not found on %s: %w", what, c.Endpoint, he)
		}
		return fmt.Errorf("repository %s was not found on %s (a private repository needs HF_TOKEN); known models: %s: %w",
			repo, c.Endpoint, KnownNames(), he)
	case resp.StatusCode == http.StatusNotFound && he.Code == "RevisionNotFound":
		he.kind = ErrNotFound
		return fmt.Errorf("revision %q of %s was not found: %w", revision, repo, he)
	case resp.StatusCode == http.StatusNotFound:
		he.kind = ErrNotFound
		return fmt.Errorf("%s was not found: %w", what, he)
	case resp.StatusCode == http.StatusForbidden || he.Code == "GatedRepo":
		he.kind = ErrAuth
		tokenHint := "set HF_TOKEN to an access token of that account"
		if c.Token != "" {
			tokenHint = "check that HF_TOKEN belongs to that account and may read gated repositories"
		}
		return fmt.Errorf("access to %s is restricted: accept its licence at %s/%s while logged in, then %s: %w",
			repo, c.Endpoint, repo, tokenHint, he)
	case resp.StatusCode == http.StatusUnauthorized:
		he.kind = ErrAuth
		if c.Token != "" {
			return fmt.Errorf("the Hub rejected the token for %s: check HF_TOKEN (tokens are at %s/settings/tokens): %w",
				what, c.Endpoint, he)
		}
		return fmt.Errorf("%s needs a Hugging Face login: set HF_TOKEN to a token from %s/settings/tokens: %w",
			what, c.Endpoint, he)
	case resp.StatusCode == http.StatusTooManyRequests:
		he.kind = ErrServer
		return fmt.Errorf("the Hub is rate limiting downloads of %s; wait a minute and pull again: %w", what, he)
	case resp.StatusCode >= 500:
		he.kind = ErrServer
		return fmt.Errorf("the Hub failed to serve %s; try again later: %w", what, he)
	}
	he.kind = ErrServer
	return fmt.Errorf("unexpected answer for %s: %w", what, he)
}

// networkError explains a transport failure. Cancellation passes through
// unchanged so callers can tell it from a fault.
func networkError(err error, endpoint, what string) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) {
		return err
	}
	var dns *net.DNSError
	var nerr net.Error
	switch {
	case errors.As(err, &dns):
		return fmt.Errorf("%w: cannot reach %s: the name %s does not resolve (no network, or a wrong HF_ENDPOINT): %v",
			ErrNetwork, endpoint, dns.Name, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: cannot reach %s: connection refused (is the network up, is HF_ENDPOINT right?): %v",
			ErrNetwork, endpoint, err)
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return fmt.Errorf("%w: cannot reach %s: no route to the network: %v", ErrNetwork, endpoint, err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%w: the connection to %s dropped while fetching %s: %v", ErrNetwork, endpoint, what, err)
	case errors.As(err, &nerr) && nerr.Timeout():
		return fmt.Errorf("%w: %s timed out while fetching %s: %v", ErrNetwork, endpoint, what, err)
	}
	return fmt.Errorf("%w: fetching %s from %s: %v", ErrNetwork, what, endpoint, err)
}
