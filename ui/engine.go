// Package ui is the Talkbox window: text box, voice and language pickers,
// Speak/Stop, the live latency panel and the utterance history.
//
// It depends on small interfaces (Engine, Player) so tests drive it with a
// fake engine under Fyne's test driver; app/window.go wires the real ones.
// The constructor starts no goroutines; Start does (one ~10 Hz ticker), and
// every widget update from a goroutine goes through Config.Post (fyne.Do).
package ui

import (
	"context"

	"fyne.io/fyne/v2"

	"talkbox/app/audio"
	"talkbox/engine"
)

// Voice is one speaker preset of the loaded model.
type Voice struct {
	Name        string // the model's speaker name, sent in the request
	Description string // short description; assets/voices.json fills it when empty
	Dialect     string // e.g. "Sichuan dialect"; empty for standard speech
}

// Engine is what the window needs from a loaded model.
type Engine interface {
	// Synthesize streams PCM chunks; the last chunk has Final set, with
	// Stats, and Err on failure. The channel closes after it.
	Synthesize(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error)
	Voices() []Voice
	Languages() []string // "auto" first
	SupportsInstruct() bool
	Device() string // "CPU (2 threads)" or the GPU name
	ModelName() string
	Close() error
}

// Player plays a chunk stream; *audio.Player implements it.
type Player interface {
	Play(ctx context.Context, chunks <-chan engine.Chunk, o audio.PlayOptions) (audio.Result, error)
	Stop()
	Live() audio.Live
	NoDevice() bool
}

// Model is one checkpoint the model picker offers.
type Model struct {
	Name string // shown in the picker
	Dir  string // passed to Config.Open
}

// Config wires the window to the outside world.
type Config struct {
	Models []Model
	// Open loads a model; it runs on a background goroutine.
	Open   func(dir string) (Engine, error)
	Player Player
	// Post runs f on the UI goroutine; nil means fyne.Do. Tests pass a queue
	// they drain on the test goroutine, which is what fyne.Do does for real.
	Post func(f func())
	// Welcome, when set, is shown above the text box while no model is
	// available (the first-run download panel); AddModel hides it.
	Welcome fyne.CanvasObject
	// SaveDir is the folder the Save WAV dialog opens in; empty = home.
	SaveDir string
}
