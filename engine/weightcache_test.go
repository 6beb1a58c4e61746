package engine

import (
	"path/filepath"
	"testing"
)

// TestDefaultWeightCache: the environment variable wins ("off" turns the
// cache off), else the user's cache folder.
func TestDefaultWeightCache(t *testing.T) {
	t.Setenv(EnvWeightCache, "/somewhere")
	if d := DefaultWeightCache(); d != "/somewhere" {
		t.Errorf("with %s set: %q", EnvWeightCache, d)
	}
	t.Setenv(EnvWeightCache, "off")
	if d := DefaultWeightCache(); d != "" {
		t.Errorf("off: %q", d)
	}
	t.Setenv(EnvWeightCache, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg-cache")
	if d := DefaultWeightCache(); d != filepath.Join("/xdg-cache", "talkbox", "int8") {
		t.Errorf("XDG_CACHE_HOME: %q", d)
	}
}
