// Package settings keeps what the window remembers between runs (last model,
// voice, language, style, the unsent draft, window size, history limit,
// player volume, speed and output device, the Details fold, the CPU
// precision) in
// one JSON file in the user's config folder. Writes are atomic, so a crash
// mid-save leaves the previous file; a file that cannot be read back is
// reported, kept aside for the user, and replaced by the defaults.
package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"talkbox/internal/atomicfile"
	"talkbox/internal/regfile"
)

// EnvConfig overrides the settings file's folder (tests, portable installs).
const EnvConfig = "TALKBOX_CONFIG"

// fileName is the settings file inside the config folder.
const fileName = "settings.json"

// version is written into the file; a newer file still loads (unknown
// fields are ignored) so a downgrade never loses the draft.
const version = 1

// DefaultHistoryMB is the history's disk budget unless the user changes it.
const DefaultHistoryMB = 500

// Window size bounds: a remembered size outside them (a display that went
// away, a hand-edited file) falls back to the default.
const (
	DefaultWidth, DefaultHeight = 1040, 700
	minWidth, minHeight         = 480, 320
	maxSide                     = 16384
)

// Settings is everything the window restores on start.
type Settings struct {
	Version   int    `json:"version"`
	Model     string `json:"model,omitempty"`    // folder of the last loaded model
	Voice     string `json:"voice,omitempty"`    // speaker name as the model spells it
	Language  string `json:"language,omitempty"` // "auto" or the model's language name
	Instruct  string `json:"instruct,omitempty"` // style (CustomVoice) or voice description (VoiceDesign)
	Draft     string `json:"draft,omitempty"`    // the text box's unsent text
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	HistoryMB int    `json:"history_mb"` // history size limit; oldest entries are dropped past it
	// ExportFormat is the last format chosen in the Export dialog (wav, flac, opus).
	ExportFormat string `json:"export_format,omitempty"`
	// Theme is the window's colours: "" follows the desktop, "light" or "dark".
	Theme string `json:"theme,omitempty"`
	// Volume is the playback volume in percent (0..MaxVolume).
	Volume int `json:"volume"`
	// Speed is the playback speed (MinSpeed..MaxSpeed, pitch kept).
	Speed float64 `json:"speed"`
	// OutputDevice is the playback device's name; "" is the system default.
	OutputDevice string `json:"output_device,omitempty"`
	// Details unfolds the latency panel.
	Details bool `json:"details,omitempty"`
	// Precision is the CPU engine's weights, applied when a model loads:
	// "" the engine's default (int8), "int8", or "f32" (the exact reference).
	Precision string `json:"precision,omitempty"`
}

// Player bounds: app/audio plays within them, and values outside them are
// not kept.
const (
	DefaultVolume = 100
	MaxVolume     = 150
	MinSpeed      = 0.5
	MaxSpeed      = 2.0
)

// Defaults is the state of a first start.
func Defaults() Settings {
	return Settings{Version: version, Language: "auto", Width: DefaultWidth, Height: DefaultHeight,
		HistoryMB: DefaultHistoryMB, ExportFormat: "wav", Volume: DefaultVolume, Speed: 1}
}

// Dir is $TALKBOX_CONFIG, else the user's config folder (os.UserConfigDir:
// $XDG_CONFIG_HOME or ~/.config on Linux) + /talkbox.
func Dir() (string, error) {
	if d := os.Getenv(EnvConfig); d != "" {
		return d, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config folder (set %s): %w", EnvConfig, err)
	}
	return filepath.Join(base, "talkbox"), nil
}

// Path is the settings file in Dir.
func Path() (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, fileName), nil
}

// CorruptError says the settings file could not be read back. Load has
// already moved it to Kept and returned the defaults.
type CorruptError struct {
	Path string
	Kept string // where the damaged file now is; "" if it could not be moved
	Err  error
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("settings file %s is damaged (%v); using the defaults", e.Path, e.Err)
	if e.Kept != "" {
		msg += "; the damaged file was kept as " + e.Kept
	}
	return msg
}

func (e *CorruptError) Unwrap() error { return e.Err }

// maxFileBytes bounds the settings file (a few hundred bytes are written);
// a FIFO or device in its place is refused rather than read forever.
const maxFileBytes = 1 << 20

// Load reads the settings at path. A missing file gives the defaults and no
// error. A damaged one gives the defaults and a *CorruptError (the file is
// renamed to path+".corrupt" so the next Save does not destroy what the user
// may want to recover). Out-of-range values are replaced by their defaults.
func Load(path string) (Settings, error) {
	b, err := regfile.ReadFile(path, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Defaults(), nil
	}
	if err != nil {
		return Defaults(), fmt.Errorf("reading settings %s: %w", path, err)
	}
	s := Defaults()
	if err := json.Unmarshal(b, &s); err != nil {
		ce := &CorruptError{Path: path, Err: err}
		if os.Rename(path, path+".corrupt") == nil {
			ce.Kept = path + ".corrupt"
		}
		return Defaults(), ce
	}
	return s.sane(), nil
}

// sane replaces values no window can use by their defaults.
func (s Settings) sane() Settings {
	d := Defaults()
	if s.Width < minWidth || s.Width > maxSide || s.Height < minHeight || s.Height > maxSide {
		s.Width, s.Height = d.Width, d.Height
	}
	if s.HistoryMB <= 0 {
		s.HistoryMB = d.HistoryMB
	}
	if s.Language == "" {
		s.Language = d.Language
	}
	switch s.ExportFormat {
	case "wav", "flac", "opus":
	default:
		s.ExportFormat = d.ExportFormat
	}
	switch s.Theme {
	case "", "light", "dark":
	default:
		s.Theme = d.Theme
	}
	if s.Volume < 0 || s.Volume > MaxVolume {
		s.Volume = d.Volume
	}
	if !(s.Speed >= MinSpeed && s.Speed <= MaxSpeed) { // NaN too
		s.Speed = d.Speed
	}
	switch s.Precision {
	case "", "int8", "f32":
	default:
		s.Precision = d.Precision
	}
	s.Version = version
	return s
}

// Save writes s to path atomically, creating the folder when needed.
func Save(path string, s Settings) error {
	s.Version = version
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("saving settings: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("saving settings %s: %w", path, err)
	}
	return nil
}
