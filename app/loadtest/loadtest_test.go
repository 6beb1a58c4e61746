package loadtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestReport: against a stand-in server that streams 0.5 s of PCM (in two
// parts, 20 ms apart) and turns every third request away with 503, the
// report counts each outcome and derives audio seconds, TTFC and RTF.
func TestReport(t *testing.T) {
	var n atomic.Int32
	var gotVoice atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			json.NewEncoder(w).Encode(map[string]string{"model": "m", "device": "d"})
		case "/v1/voices":
			json.NewEncoder(w).Encode(map[string]any{"voices": []map[string]string{{"name": "ryan"}}})
		case "/v1/audio/speech":
			var body struct {
				Voice  string
				Frames int
			}
			json.NewDecoder(r.Body).Decode(&body)
			gotVoice.Store(body.Voice)
			if n.Add(1)%3 == 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("X-Sample-Rate", "24000")
			w.Write(make([]byte, 12000)) // 0.25 s of s16 at 24 kHz
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
			w.Write(make([]byte, 12000))
		}
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Config{URL: srv.URL + "/", Streams: 3, Requests: 9, Frames: 5})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK != 6 || rep.Rejected != 3 || rep.Errors != 0 {
		t.Fatalf("ok %d rejected %d errors %d", rep.OK, rep.Rejected, rep.Errors)
	}
	if gotVoice.Load() != "ryan" || rep.Model != "m" || rep.Device != "d" {
		t.Errorf("voice %v, model %q, device %q", gotVoice.Load(), rep.Model, rep.Device)
	}
	if rep.AudioSeconds != 3 {
		t.Errorf("audio %v s, want 3", rep.AudioSeconds)
	}
	if rep.TTFCms.P50 <= 0 || rep.TTFCms.P95 < rep.TTFCms.P50 || rep.RTF.P50 < 0.02/0.5 || rep.Throughput <= 0 {
		t.Errorf("ttfc %+v rtf %+v throughput %v", rep.TTFCms, rep.RTF, rep.Throughput)
	}
	if _, err := Run(context.Background(), Config{URL: srv.URL, Streams: 0, Requests: 1}); err == nil {
		t.Error("0 streams accepted")
	}
}

func TestStat(t *testing.T) {
	s := stat([]float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	if s.P50 != 10 || s.P95 != 19 {
		t.Errorf("%+v, want p50 10, p95 19", s)
	}
}
