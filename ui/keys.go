package ui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
)

// The window's keys. Fyne hands a key to the focused widget only (the
// canvas sees it when nothing is focused), so every field of the window is
// one of the types here and passes Esc on; Ctrl+Enter reaches the canvas
// shortcut from a Select, and the text fields catch it themselves.
//
//   - Ctrl+Enter speaks and Esc stops, whatever is focused.
//   - Tab and Shift+Tab move the focus, also out of the text box; Ctrl+Tab
//     types a tab there.
//   - Space pauses and resumes when no field has the focus, or a slider has
//     it (in a field it types a space or opens the picker, as usual).
//   - Alt+Left and Alt+Right skip to the previous and the next sentence.

// keySelect is a picker that passes Esc to the window.
type keySelect struct {
	widget.Select
	onStop func()
}

func newKeySelect(options []string, changed func(string)) *keySelect {
	s := &keySelect{}
	s.Options, s.OnChanged = options, changed
	s.ExtendBaseWidget(s)
	return s
}

func (s *keySelect) TypedKey(k *fyne.KeyEvent) {
	if k.Name == fyne.KeyEscape && s.onStop != nil {
		s.onStop()
		return
	}
	s.Select.TypedKey(k)
}

// wireKeys connects the fields to Speak and Stop; build calls it.
func (u *UI) wireKeys() {
	for _, e := range []*speakEntry{u.text, u.instruct} {
		e.onSpeak, e.onStop, e.onSkip = u.Speak, u.Stop, u.Skip
	}
	u.text.onPaste = u.pasteLong
	u.reader.onStop = u.Stop
	for _, s := range []*keySelect{u.voice, u.lang, u.model, u.output} {
		s.onStop = u.Stop
	}
	for _, s := range []*keySlider{u.volume, u.speed} {
		s.onStop, s.onSpace = u.Stop, u.TogglePause
	}
}

// windowKey gets the keys typed while no widget has the focus.
func (u *UI) windowKey(k *fyne.KeyEvent) {
	switch k.Name {
	case fyne.KeyEscape:
		u.Stop()
	case fyne.KeySpace:
		u.TogglePause()
	}
}
