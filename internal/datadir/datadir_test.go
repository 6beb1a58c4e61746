package datadir

import (
	"path/filepath"
	"testing"
)

func TestDirOrder(t *testing.T) {
	t.Setenv("TALKBOX_X", "/custom")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	t.Setenv("HOME", "/home/u")
	if d, _ := Dir("TALKBOX_X", "x"); d != "/custom" {
		t.Errorf("env set: %q", d)
	}
	t.Setenv("TALKBOX_X", "")
	if d, _ := Dir("TALKBOX_X", "x"); d != filepath.Join("/xdg", "talkbox", "x") {
		t.Errorf("XDG_DATA_HOME: %q", d)
	}
	t.Setenv("XDG_DATA_HOME", "relative/dir")
	if d, _ := Dir("TALKBOX_X", "x"); d != filepath.Join("/home/u", ".local", "share", "talkbox", "x") {
		t.Errorf("relative XDG_DATA_HOME not ignored: %q", d)
	}
	t.Setenv("HOME", "")
	if _, err := Dir("TALKBOX_X", "x"); err == nil {
		t.Error("no HOME: no error")
	}
}
