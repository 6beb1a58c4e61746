package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"talkbox/engine/golden"
)

// TestServeDrainsOnSIGTERM: `talkbox serve` on loopback answers, and on
// SIGTERM stops taking connections but lets the stream in flight finish
// whole, then returns.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	ck := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runServe([]string{"--model", ck, "--listen", "127.0.0.1:0", "--backend", "cpu", "--threads", "1"}, pw, io.Discard)
		pw.Close()
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	addr := ""
	for addr == "" && lines.Scan() {
		if m := regexp.MustCompile(`http://(\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("serve printed no address; it returned %v", <-done)
	}
	go func() {
		for lines.Scan() {
		}
	}()

	var voices struct{ Voices []struct{ Name string } }
	r, err := http.Get("http://" + addr + "/v1/voices")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(r.Body).Decode(&voices)
	r.Body.Close()

	const frames = 30
	body, _ := json.Marshal(map[string]any{"input": "Hello there.", "voice": voices.Voices[0].Name, "response_format": "pcm", "frames": frames})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/audio/speech", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 2)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || 2+len(rest) != frames*1920*2 {
		t.Fatalf("the stream in flight was cut: %v, %d bytes of %d", err, 2+len(rest), frames*1920*2)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after SIGTERM")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still answering after shutdown")
	}
}
