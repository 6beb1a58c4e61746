//go:build !nogui

package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"talkbox/ui"
)

// A TALKBOX_MODEL that does not resolve or does not load is offered to the
// window, whose load shows that model's error; it used to be dropped, and
// the window said "No model installed".
func TestEnvModelErrorReachesWindow(t *testing.T) {
	t.Setenv("TALKBOX_MODELS", t.TempDir())
	for _, name := range []string{"no-such-model", t.TempDir()} {
		t.Setenv(envModel, name)
		_, models, err := installedModels(true)
		if err != nil || len(models) != 1 {
			t.Fatalf("%s: models %v, err %v", name, models, err)
		}
		_, err = openRealEngine(models[0].Dir, ui.OpenOptions{})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(name)) {
			t.Errorf("%s: load error %v does not name the model", name, err)
		}
	}
}

// With no display the window is not attempted (GLFW would panic with a
// goroutine dump): one line says so and lists the verbs.
func TestNoDisplayOneLine(t *testing.T) {
	for _, d := range []string{"", ":987654"} {
		t.Setenv("DISPLAY", d)
		var stdout, stderr bytes.Buffer
		code := run(nil, &stdout, &stderr)
		msg := stderr.String()
		if code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "no display found") || !strings.Contains(msg, "decode") || !strings.Contains(msg, "say") {
			t.Errorf("DISPLAY=%q: exit %d, %q", d, code, msg)
		}
	}
}
