package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"talkbox/engine"
	"talkbox/engine/tempo"
)

// stubEngine answers the questions parseSpeech asks; it never synthesises.
type stubEngine struct{}

func (stubEngine) Synthesize(context.Context, engine.Request) (<-chan engine.Chunk, error) {
	return nil, errors.New("stub")
}
func (stubEngine) SampleRate() int        { return 24000 }
func (stubEngine) Voices() []engine.Voice { return []engine.Voice{{Name: "ryan"}, {Name: "vivian"}} }
func (stubEngine) Languages() []string    { return []string{"auto", "english"} }
func (stubEngine) ModelName() string      { return "stub" }
func (stubEngine) Device() string         { return "none" }
func (stubEngine) SupportsInstruct() bool { return false }
func (stubEngine) IsBase() bool           { return false }

// FuzzParseSpeech: any request body is either a job within every limit or a
// bad request (400) with a bounded message; never a panic.
func FuzzParseSpeech(f *testing.F) {
	f.Add([]byte(`{"input": "Hello!", "voice": "ryan", "response_format": "flac", "speed": 1.25}`))
	f.Add([]byte(`{"input": "hi", "voice": {"id": "vivian"}, "stream_format": "sse", "frames": 4, "instructions": "calm"}`))
	f.Add([]byte(`{"input": "", "voice": 7}`))
	f.Add([]byte(`{} {}`))
	s := New(stubEngine{}, Config{})
	f.Fuzz(func(t *testing.T, b []byte) {
		job, err := s.parseSpeech(b)
		if err != nil {
			var br *badRequest
			if !errors.As(err, &br) {
				t.Fatalf("not a bad request: %v", err)
			}
			if len(err.Error()) > 4000 {
				t.Fatalf("message of %d bytes", len(err.Error()))
			}
			return
		}
		txt := job.req.Text
		if strings.TrimSpace(txt) == "" || !utf8.ValidString(txt) || utf8.RuneCountInString(txt) > s.cfg.MaxInputRunes {
			t.Fatalf("accepted text %q", txt)
		}
		if job.speed < tempo.MinSpeed || job.speed > tempo.MaxSpeed {
			t.Fatalf("accepted speed %v", job.speed)
		}
		if job.req.ExactFrames < 0 || job.req.ExactFrames > maxFrames {
			t.Fatalf("accepted frames %d", job.req.ExactFrames)
		}
	})
}
