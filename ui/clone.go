package ui

import (
	"fmt"
	"log/slog"

	"talkbox/engine/voice"
)

// newVoiceLabel is the voice picker's last entry on a Base model.
const newVoiceLabel = "New voice…"

// cloner is what a Base model's engine adds (*engine.Engine implements it).
type cloner interface {
	IsBase() bool
	CloneEncoders() (*voice.Encoders, error)
}

// cloning reports whether the loaded model speaks in cloned voices and the
// window has a voice library.
func (u *UI) cloning() bool {
	c, ok := u.eng.(cloner)
	return ok && c.IsBase() && u.cfg.Voices != nil
}

// refreshClones fills the voice picker with the saved voices and "New
// voice…", selecting name (or the first voice). UI goroutine.
func (u *UI) refreshClones(name string) {
	list, errs := u.cfg.Voices.List()
	for _, err := range errs {
		slog.Warn("skipped a voice file", "err", err)
	}
	u.voices = pickList{values: map[string]string{}}
	for _, v := range list {
		u.voices.labels = append(u.voices.labels, v.Name)
		u.voices.values[v.Name] = v.Name
	}
	u.voiceGuard = true
	u.voice.SetOptions(append(append([]string(nil), u.voices.labels...), newVoiceLabel))
	u.voice.Enable()
	switch {
	case len(list) == 0:
		u.voice.ClearSelected()
		u.voice.PlaceHolder = "(no voice yet: choose " + newVoiceLabel + ")"
		u.voice.Refresh()
	case u.voices.labelOf(name) != "":
		u.voice.SetSelected(u.voices.labelOf(name))
	default:
		u.voice.SetSelectedIndex(0)
	}
	u.voiceGuard = false
	u.lastVoice = u.voice.Selected
}

// voiceChanged opens the New-voice dialog when its entry is picked and puts
// the previous choice back.
func (u *UI) voiceChanged(s string) {
	if u.voiceGuard {
		return
	}
	if s != newVoiceLabel {
		u.lastVoice = s
		return
	}
	u.voiceGuard = true
	if u.lastVoice != "" {
		u.voice.SetSelected(u.lastVoice)
	} else {
		u.voice.ClearSelected()
	}
	u.voiceGuard = false
	u.NewVoice()
}

// cloneForSpeak loads the picked cloned voice, or asks for one.
func (u *UI) cloneForSpeak() (*voice.Voice, bool) {
	name, err := u.voices.value(u.voice.Selected)
	if err != nil || name == "" {
		u.showError("This Base model speaks in a voice cloned from a recording: add one with " + newVoiceLabel + " in the Voice list.")
		u.NewVoice()
		return nil, false
	}
	v, err := u.cfg.Voices.Load(name)
	if err != nil {
		u.showError(fmt.Sprintf("Could not load voice %q: %v", name, err))
		return nil, false
	}
	return v, true
}

// keepDerived saves a voice whose data for this model was computed while
// speaking (its first use with this model), so the next Speak skips it.
func (u *UI) keepDerived(v *voice.Voice, before int) {
	if v == nil || len(v.Derived) == before || u.cfg.Voices == nil {
		return
	}
	lib := u.cfg.Voices
	go func() {
		if err := lib.Save(v); err != nil {
			slog.Warn("saving a voice's derived data", "voice", v.Name, "err", err)
		}
	}()
}

// TryNewVoice opens the New-voice dialog when a Base model is loaded and
// reports whether it did (screenshots open it once the model is ready).
func (u *UI) TryNewVoice() bool {
	if !u.cloning() {
		return false
	}
	u.NewVoice()
	return true
}
