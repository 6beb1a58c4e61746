package main

import (
	"os"
	"testing"

	"talkbox/engine"
)

// TestMain keeps the int8 weight cache of the commands under test (and of
// the binaries they re-run) in a folder of its own, not the user's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "talkbox-app-test-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv(engine.EnvWeightCache, dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
