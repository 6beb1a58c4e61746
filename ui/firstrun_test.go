package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"talkbox/app/hub"
)

// firstRunCall is one Pull the panel made; the test answers it.
type firstRunCall struct {
	ctx      context.Context
	repo     string
	progress func(hub.Progress)
	result   chan firstRunResult
}

type firstRunResult struct {
	dir string
	err error
}

// firstRunFake hands every Pull to the test and waits for its answer.
type firstRunFake struct{ calls chan firstRunCall }

func (f *firstRunFake) Pull(ctx context.Context, repo string, progress func(hub.Progress)) (string, error) {
	c := firstRunCall{ctx: ctx, repo: repo, progress: progress, result: make(chan firstRunResult)}
	f.calls <- c
	r := <-c.result
	return r.dir, r.err
}

func firstRunNextCall(t *testing.T, f *firstRunFake) firstRunCall {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("the panel did not call Pull")
	}
	return firstRunCall{}
}

// firstRunAnswer returns a result to Pull and runs the panel's posted work
// on the test goroutine until the panel has shown it.
func firstRunAnswer(t *testing.T, fr *FirstRunPanel, q chan func(), c firstRunCall, r firstRunResult) {
	t.Helper()
	finished := fr.finished
	c.result <- r
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-finished:
			return
		case f := <-q:
			f()
		case <-deadline:
			t.Fatal("the panel did not show the outcome")
		}
	}
}

// firstRunDrain runs the work the panel has posted so far, as the UI
// goroutine would.
func firstRunDrain(q chan func()) {
	for {
		select {
		case f := <-q:
			f()
		default:
			return
		}
	}
}

func TestFirstRunPanelDownloadCancelRetry(t *testing.T) {
	test.NewTempApp(t)
	fake := &firstRunFake{calls: make(chan firstRunCall)}
	var readyDir string
	var readyCalls int
	q := make(chan func(), 64)
	fr := NewFirstRunPanel(fake, func(dir string) { readyDir = dir; readyCalls++ }, func(f func()) { q <- f })
	test.NewTempWindow(t, fr)

	if fr.download.Hidden || !fr.cancel.Hidden || !fr.bar.Hidden {
		t.Fatal("before a download only the Download button shows")
	}

	// 1. Download the default model, see progress, cancel.
	test.Tap(fr.download)
	c := firstRunNextCall(t, fake)
	if c.repo != hub.DefaultRepo {
		t.Fatalf("pulled %q, want the default %q", c.repo, hub.DefaultRepo)
	}
	if !fr.download.Hidden || fr.cancel.Hidden || fr.cancel.Disabled() || !fr.choice.Disabled() {
		t.Fatal("while downloading, Cancel shows and the choice is locked")
	}
	c.progress(hub.Progress{Event: hub.EventBytes, File: "model.safetensors", FileIndex: 10, FileCount: 10,
		FileDone: 4_000_000, FileSize: 14_000_000, Done: 11_550_000, Total: 23_100_000, Rate: 2e6, ETA: 6 * time.Second})
	if fr.bar.Value != 0 {
		t.Fatal("progress touched the widgets from the download goroutine instead of posting")
	}
	firstRunDrain(q)
	if fr.bar.Value != 0.5 {
		t.Fatalf("bar at %v, want 0.5", fr.bar.Value)
	}
	for _, want := range []string{"model.safetensors", "file 10 of 10", "11.6 MB of 23.1 MB", "2.00 MB/s", "about 6s left"} {
		if !strings.Contains(fr.status.Text, want) {
			t.Errorf("status %q lacks %q", fr.status.Text, want)
		}
	}
	test.Tap(fr.cancel)
	select {
	case <-c.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Cancel did not cancel the pull's context")
	}
	firstRunAnswer(t, fr, q, c, firstRunResult{err: fmt.Errorf("download of model.safetensors stopped: %w", context.Canceled)})
	if !strings.Contains(fr.status.Text, "cancelled") || fr.download.Text != "Resume download" || fr.download.Hidden {
		t.Fatalf("after cancel: status %q, button %q hidden=%v", fr.status.Text, fr.download.Text, fr.download.Hidden)
	}
	if !fr.problem.Hidden || readyCalls != 0 {
		t.Fatal("a cancel is not an error and loads nothing")
	}

	// 2. Resume with another model chosen; the network fails.
	fr.choice.SetSelectedIndex(2)
	test.Tap(fr.download)
	c = firstRunNextCall(t, fake)
	if c.repo != hub.Known[2].Repo {
		t.Fatalf("pulled %q, want the chosen %q", c.repo, hub.Known[2].Repo)
	}
	firstRunAnswer(t, fr, q, c, firstRunResult{err: fmt.Errorf("%w: cannot reach https://huggingface.co: connection refused", hub.ErrNetwork)})
	if fr.problem.Hidden || !strings.Contains(fr.problem.Text, "cannot be reached") || !strings.Contains(fr.problem.Text, "connection refused") {
		t.Fatalf("network error shown as %q (hidden=%v)", fr.problem.Text, fr.problem.Hidden)
	}
	if fr.download.Text != "Retry" || fr.download.Hidden || !fr.cancel.Hidden {
		t.Fatalf("after an error the button reads %q", fr.download.Text)
	}

	// 3. Retry succeeds: the callback gets the folder.
	test.Tap(fr.download)
	c = firstRunNextCall(t, fake)
	if !fr.problem.Hidden {
		t.Fatal("the old error stays on screen during the retry")
	}
	c.progress(hub.Progress{Event: hub.EventDone, Done: 100, Total: 100})
	firstRunDrain(q)
	firstRunAnswer(t, fr, q, c, firstRunResult{dir: "/models/Qwen--Qwen3-TTS-12Hz-1.7B-CustomVoice"})
	if readyCalls != 1 || readyDir != "/models/Qwen--Qwen3-TTS-12Hz-1.7B-CustomVoice" {
		t.Fatalf("onReady called %d times with %q", readyCalls, readyDir)
	}
	if fr.bar.Value != 1 || !fr.download.Hidden || !fr.cancel.Hidden {
		t.Fatal("after success the bar is full and no button offers another download")
	}
}

func TestFirstRunErrorTexts(t *testing.T) {
	cases := map[error]string{
		fmt.Errorf("x: %w", hub.ErrAuth):     "HF_TOKEN",
		fmt.Errorf("x: %w", hub.ErrDiskFull): "disk is full",
		fmt.Errorf("x: %w", hub.ErrChecksum): "damaged",
		fmt.Errorf("x: %w", hub.ErrNotFound): "not found",
		errors.New("odd failure"):            "odd failure",
	}
	for err, want := range cases {
		if got := firstRunErrorText(err); !strings.Contains(got, want) || !strings.Contains(got, err.Error()) {
			t.Errorf("%v shown as %q, want it to mention %q and the detail", err, got, want)
		}
	}
}
