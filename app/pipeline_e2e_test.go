package main

import (
	"context"
	"testing"
	"time"

	"talkbox/app/audio"
	"talkbox/app/hub"
	"talkbox/app/hub/hubtest"
	"talkbox/engine"
	"talkbox/engine/golden"
	"talkbox/engine/sample"
)

// A user's first run: pull the model from the (fake) Hub, load it, synthesise
// on the CPU engine, and play the real PCM through the Null audio device.
func TestPullLoadSynthesizePlay(t *testing.T) {
	const repo = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
	srv := hubtest.New(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), repo)
	store := &hub.Store{Dir: t.TempDir(), Client: &hub.Client{Endpoint: srv.URL, HTTP: srv.HTTPClient()}}
	dir, err := store.Pull(context.Background(), repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(dir, engine.Options{Backend: engine.BackendCPU})
	if err != nil {
		t.Fatalf("pulled model does not load: %v", err)
	}
	defer e.Close()

	player, err := audio.Open(audio.Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	defer player.Close()
	g := sample.Greedy()
	const frames = 25 // 2 s of audio
	start := time.Now()
	chunks, err := e.Synthesize(context.Background(), engine.Request{Text: "Hello from the pulled model.", Voice: "ryan",
		Language: "english", Talker: &g, Predictor: &g, ExactFrames: frames, ChunkFrames: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := player.Play(context.Background(), chunks, audio.PlayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	audioLen := time.Duration(frames) * 80 * time.Millisecond
	if res.Played != audioLen {
		t.Errorf("played %v of real audio, want %v", res.Played, audioLen)
	}
	if res.FirstSound == 0 {
		t.Error("no audible callback")
	}
	// The tiny model synthesises far faster than real time, so playback of
	// real PCM through the ring must not starve.
	if res.Underruns != 0 {
		t.Errorf("%d underruns (%v silence) at CPU speed on the tiny model", res.Underruns, res.Silent)
	}
	t.Logf("pulled %s, synthesised and played %v in %v (underruns %d)", repo, res.Played, time.Since(start).Round(time.Millisecond), res.Underruns)
}
