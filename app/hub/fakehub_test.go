package hub

import (
	"testing"
	"time"

	"talkbox/app/hub/hubtest"
	"talkbox/engine/golden"
)

// newFakeHub serves the tiny CustomVoice checkpoint as repo from a loopback
// imitation of the Hub.
func newFakeHub(t *testing.T, repo string) *hubtest.Server {
	t.Helper()
	return hubtest.New(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), repo)
}

// testStore is a store in a fresh temp folder pulling from h, with no
// automatic retries so each test decides when to resume.
func testStore(t *testing.T, h *hubtest.Server) *Store {
	return &Store{Dir: t.TempDir(), Client: &Client{Endpoint: h.URL, HTTP: h.HTTPClient()}, RetryDelay: time.Millisecond}
}
