// Package ui is the Talkbox window: text box, voice and language pickers,
// Speak/Stop, the live latency panel and the utterance history.
//
// It depends on small interfaces (Engine, Player) so tests drive it with a
// fake engine (ui/uitest) under Fyne's test driver; app/window.go wires the
// real ones. What one Speak does (sentences, streaming, prebuffer, figures)
// is package ui/speech, which has no Fyne in it.
// The constructor starts no goroutines; Start does (one ~10 Hz ticker), and
// every widget update from a goroutine goes through Config.Post (fyne.Do).
package ui

import (
	"context"
	"time"

	"fyne.io/fyne/v2"

	"talkbox/app/audio"
	"talkbox/engine"
	"talkbox/engine/voice"
	"talkbox/ui/speech"
)

// Engine is what the window needs from a loaded model; *engine.Engine
// implements it.
type Engine interface {
	speech.Synthesizer
	// Voices are the preset speakers; an empty Description is filled from
	// assets/voices.json.
	Voices() []engine.Voice
	Languages() []string // "auto" first
	SupportsInstruct() bool
	Device() string // "CPU (2 threads)" or the GPU name
	ModelName() string
	Close() error
}

// Player plays a chunk stream; *audio.Player implements it.
type Player interface {
	speech.Player
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
	// Voices is the library of cloned voices that Base models speak in;
	// nil leaves cloning out of the window.
	Voices *voice.Library
	// Record captures microphone audio for the New-voice dialog
	// (audio.Record); nil hides the Record button.
	Record func(ctx context.Context, max time.Duration, level func(peak float32, elapsed time.Duration)) ([]float32, error)
}

var (
	_ Engine = (*engine.Engine)(nil)
	_ Player = (*audio.Player)(nil)
)
