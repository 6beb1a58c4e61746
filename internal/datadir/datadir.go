// Package datadir names the folders Talkbox keeps its user data in (models,
// history, ...): one rule for every store.
package datadir

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir is $env when set, else $XDG_DATA_HOME/talkbox/name, else
// ~/.local/share/talkbox/name. A relative XDG_DATA_HOME is ignored, as the
// XDG base-directory spec asks.
func Dir(env, name string) (string, error) {
	if d := os.Getenv(env); d != "" {
		return d, nil
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "talkbox", name), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no %s folder: set %s or HOME: %w", name, env, err)
	}
	return filepath.Join(home, ".local", "share", "talkbox", name), nil
}
