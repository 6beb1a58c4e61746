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
	"talkbox/app/history"
	"talkbox/app/hub"
	"talkbox/app/settings"
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
	// Pause holds playback where it is and Resume goes on from the next
	// sample; Stop ends a pause.
	Pause()
	Resume()
	Paused() bool
	// SetVolume (0..audio.MaxVolume) and SetSpeed (audio.MinSpeed..MaxSpeed,
	// pitch kept) apply at once, also to the audio already buffered.
	SetVolume(v float64)
	SetSpeed(speed float64)
	Live() audio.Live
	NoDevice() bool
}

// OpenOptions are the remembered choices a model is loaded with.
type OpenOptions struct {
	// Precision of the CPU engine's weights: "" (the engine's default,
	// int8), "int8" or "f32"; see settings.Settings.Precision.
	Precision string
}

// Model is one checkpoint the model picker offers.
type Model struct {
	Name string // shown in the picker (hub.DisplayName)
	Dir  string // passed to Config.Open
	// CannotServe, when set, says why the window cannot use this model
	// (e.g. voice cloning needs a reference clip the window does not take);
	// such a model is listed but never loaded on its own at start.
	CannotServe string
}

// ModelStore is the installed-model folder the Models dialog manages;
// *hub.Store implements it.
type ModelStore interface {
	List() ([]hub.Installed, error)
	Plan(ctx context.Context, name string) (hub.Plan, error)
	Pull(ctx context.Context, name string, progress func(hub.Progress)) (string, error)
	Delete(dir string) error
}

// Config wires the window to the outside world.
type Config struct {
	Models []Model
	// Open loads a model; it runs on a background goroutine.
	Open   func(dir string, o OpenOptions) (Engine, error)
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

	// Settings is the remembered state restored at start (the zero value
	// means settings.Defaults()); SaveSettings, when set, keeps it (at
	// close, after each Speak and model load).
	Settings     settings.Settings
	SaveSettings func(settings.Settings) error
	// Notice is shown in the status line at start (a damaged settings file).
	Notice string
	// History keeps utterances with their audio; nil keeps them only for
	// this run (in a temporary folder removed at Close).
	History *history.Store
	// Store, when set, enables the Models dialog.
	Store ModelStore
	// ModelFor describes a folder the Models dialog just downloaded, for
	// the picker; nil uses the folder name.
	ModelFor func(dir string) Model
}

var _ ModelStore = (*hub.Store)(nil)

var (
	_ Engine = (*engine.Engine)(nil)
	_ Player = (*audio.Player)(nil)
)
