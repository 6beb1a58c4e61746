//go:build !nogui

// The window; leave it out with -tags nogui for a CLI-only binary (servers,
// benchmark machines without X11/GL libraries).

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"talkbox/app/audio"
	"talkbox/app/history"
	"talkbox/app/hub"
	"talkbox/app/settings"
	"talkbox/assets"
	"talkbox/engine"
	"talkbox/engine/model"
	"talkbox/ui"
)

// Hidden switches for smoke tests and screenshots (not user features).
const (
	// envFakeEngine=1 replaces the model with a fake engine (a hum at a set
	// real-time factor) in a binary built with -tags fakeengine (make smoke);
	// see window_fake.go.
	envFakeEngine = "TALKBOX_FAKE_ENGINE"
	// envQuitAfter (a Go duration) quits the app after that long, so a
	// headless run can never hang.
	envQuitAfter = "TALKBOX_QUIT_AFTER"
	// envShowNewVoice=1 opens the New-voice dialog as soon as a Base model
	// has loaded (its screenshot in docs/).
	envShowNewVoice = "TALKBOX_SHOW_NEW_VOICE"
)

// appID matches FyneApp.toml, so preferences land in one place.
const appID = "io.github.talkbox"

// openRealEngine loads a checkpoint with the engine's default backend
// choice (CUDA when usable, else the CPU) and the remembered CPU precision.
func openRealEngine(dir string, o ui.OpenOptions) (ui.Engine, error) {
	dir, err := hub.Resolve(dir)
	if err != nil {
		return nil, err
	}
	// Warnings only: what the engine says at info level (a CPU fallback,
	// for one) the window shows on its device line, so stderr stays quiet.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := engine.Open(context.Background(), dir, engine.Options{Logger: logger, Precision: o.Precision, WeightCache: engine.DefaultWeightCache()})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// fakeEngineModels, set only in a binary built with -tags fakeengine,
// fills cfg with the fake engine for the smoke test.
var fakeEngineModels func(cfg *ui.Config)

func init() { windowMain = runWindow }

func runWindow() error {
	fake := os.Getenv(envFakeEngine) == "1"
	if fake && fakeEngineModels == nil {
		return fmt.Errorf("%s=1 needs a binary built with -tags fakeengine (make smoke builds one)", envFakeEngine)
	}
	a := fyneapp.NewWithID(appID)
	a.SetIcon(fyne.NewStaticResource("talkbox.png", assets.IconPNG()))
	w := a.NewWindow("Talkbox")

	player, err := audio.Open(audio.Options{})
	if err != nil {
		return fmt.Errorf("audio output: %w", err)
	}
	if player.NoDevice() {
		// The window says so (audio.NoDeviceMessage); stderr stays quiet.
		slog.Debug("no audio output device; audio will be discarded", "reason", player.FallbackReason())
	}

	cfg := ui.Config{Player: player, Record: audio.Record}
	if lib, err := voiceLibrary(); err == nil {
		cfg.Voices = lib
	} else {
		slog.Warn("no voices folder; voice cloning is off", "err", err)
	}
	cfg.ModelFor = func(dir string) ui.Model { return pickerModel(hub.Inspect(dir), cfg.Voices != nil) }
	rememberedState(&cfg)
	var u *ui.UI
	store, models, err := installedModels(cfg.Voices != nil)
	if err != nil {
		slog.Warn("listing models", "err", err)
	}
	if store != nil {
		cfg.Store = store
	}
	if fake {
		fakeEngineModels(&cfg)
	} else {
		cfg.Open = openRealEngine
		cfg.Models = models
		if store != nil {
			cfg.Welcome = ui.NewFirstRunPanel(store, func(dir string) {
				u.AddModel(cfg.ModelFor(dir))
			}, fyne.Do)
		}
	}
	u = ui.New(cfg)
	w.SetContent(u.Content())
	u.Bind(w)
	w.Resize(fyne.NewSize(float32(cfg.Settings.Width), float32(cfg.Settings.Height)))
	w.SetOnClosed(u.Close)
	// Every way the app stops tells the window first (see ui.UI.Quitting):
	// Fyne's own SIGINT/SIGTERM handler quits the app, so this one only
	// marks it; OnStopped covers the rest (a Quit menu item).
	a.Lifecycle().SetOnStopped(u.Quitting)
	stopping := make(chan os.Signal, 1)
	signal.Notify(stopping, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stopping)
	go func() {
		<-stopping
		u.Quitting()
	}()

	if d, err := time.ParseDuration(os.Getenv(envQuitAfter)); err == nil && d > 0 {
		go func() {
			time.Sleep(d)
			u.Quitting()
			fyne.Do(a.Quit)
		}()
	}
	u.Start()
	if os.Getenv(envShowNewVoice) == "1" {
		go func() {
			for i := 0; i < 120; i++ {
				time.Sleep(250 * time.Millisecond)
				opened := make(chan bool, 1)
				fyne.Do(func() { opened <- u.TryNewVoice() })
				if <-opened {
					return
				}
			}
		}()
	}
	w.ShowAndRun()
	u.Close()
	return player.Close()
}

// installedModels lists the complete models of the store (or the one named
// by TALKBOX_MODEL), for the model picker.
func installedModels(canClone bool) (*hub.Store, []ui.Model, error) {
	store, err := hub.DefaultStore()
	if err != nil {
		return nil, nil, err
	}
	if name := os.Getenv(envModel); name != "" {
		dir, err := store.Resolve(name)
		if err != nil {
			// Still offered: loading it shows this error in the window,
			// rather than "No model installed" hiding what was asked for.
			return store, []ui.Model{{Name: name, Dir: name}}, nil
		}
		return store, []ui.Model{pickerModel(hub.Inspect(dir), canClone)}, nil
	}
	list, err := store.List()
	if err != nil {
		return store, nil, err
	}
	var models []ui.Model
	for _, in := range list {
		if !in.Complete {
			continue
		}
		models = append(models, pickerModel(in, canClone))
	}
	return store, models, nil
}

// pickerModel is how the picker shows an installed model: its one display
// name, and why the window cannot use it when that is so (a Base model
// speaks only in cloned voices, which need the voices folder).
func pickerModel(in hub.Installed, canClone bool) ui.Model {
	m := ui.Model{Name: in.DisplayName(), Dir: in.Dir}
	if in.Type == model.TypeBase && !canClone {
		m.CannotServe = "voice cloning needs the voices folder, which could not be opened"
	}
	return m
}

// rememberedState loads the settings (a damaged file is reported in the
// window and replaced by the defaults) and opens the history.
func rememberedState(cfg *ui.Config) {
	cfg.Settings = settings.Defaults()
	path, err := settings.Path()
	if err != nil {
		slog.Warn("settings are not kept", "err", err)
	} else {
		s, err := settings.Load(path)
		cfg.Settings = s
		var corrupt *settings.CorruptError
		if errors.As(err, &corrupt) {
			cfg.Notice = corrupt.Error()
		} else if err != nil {
			cfg.Notice = err.Error()
		}
		cfg.SaveSettings = func(s settings.Settings) error { return settings.Save(path, s) }
	}
	dir, err := history.DefaultDir()
	if err == nil {
		cfg.History, err = history.Open(dir, int64(cfg.Settings.HistoryMB)*1e6)
	}
	if err != nil {
		slog.Warn("the history is kept for this run only", "err", err)
		cfg.History = nil
	}
}
