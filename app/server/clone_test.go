package server

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"talkbox/engine"
	"talkbox/engine/golden"
	"talkbox/engine/voice"
)

// TestClonedVoices: a Base model speaks in the library's cloned voices by
// name; /v1/voices lists them; an unknown name or one that is not a valid
// voice name (a path) gets 400 with the list and never reaches a file; the
// speaker embedding derived on first use is kept in the voice file.
func TestClonedVoices(t *testing.T) {
	base, err := engine.Open(context.Background(), golden.Checkpoint(t, "qwen3-tts-tiny-base"), engine.Options{Backend: engine.BackendCPU, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	lib := &voice.Library{Dir: filepath.Join(t.TempDir(), "voices")}
	ref := make([]float32, 2*voice.SampleRate)
	for i := range ref {
		ref[i] = float32(0.3 * math.Sin(2*math.Pi*180*float64(i)/voice.SampleRate) * math.Sin(math.Pi*float64(i)/float64(len(ref))))
	}
	if err := lib.Save(&voice.Voice{Name: "Grandpa Joe", Audio: ref, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	s := New(base, Config{Voices: lib})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	r, err := http.Get(ts.URL + "/v1/voices")
	if err != nil {
		t.Fatal(err)
	}
	var vs struct{ Voices []voiceInfo }
	json.NewDecoder(r.Body).Decode(&vs)
	r.Body.Close()
	if len(vs.Voices) != 1 || vs.Voices[0].Name != "Grandpa Joe" || vs.Voices[0].Type != "cloned" || vs.Voices[0].Mode != "x-vector" {
		t.Fatalf("voices: %+v", vs.Voices)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := map[string]any{"input": "Hello there.", "voice": "grandpa joe", "response_format": "pcm", "frames": 4, "language": "english"}
	resp := post(t, ctx, ts.URL, req)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != 4*frameSamples*2 {
		t.Fatalf("cloned voice: %d, %d bytes: %s", resp.StatusCode, len(b), b[:min(len(b), 200)])
	}
	v, err := lib.Load("Grandpa Joe")
	if err != nil || len(v.Derived) != 1 {
		t.Errorf("derived data not kept: %v, %d entries", err, len(v.Derived))
	}

	outside := filepath.Join(filepath.Dir(lib.Dir), "secret.voice")
	os.WriteFile(outside, []byte("not a voice"), 0o644)
	for _, name := range []string{"nobody", "../secret", "", "a/b"} {
		req["voice"] = name
		resp := post(t, ctx, ts.URL, req)
		e := apiErr(t, resp)
		if resp.StatusCode != 400 || e.Param == nil || *e.Param != "voice" || !strings.Contains(e.Message, "Grandpa Joe") {
			t.Errorf("voice %q: %d %+v", name, resp.StatusCode, e)
		}
	}
}
