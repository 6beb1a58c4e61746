package ui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// speakShortcut is Ctrl+Enter.
var speakShortcut = &desktop.CustomShortcut{KeyName: fyne.KeyReturn, Modifier: fyne.KeyModifierControl}

// desktopEnter is Ctrl+keypad Enter, registered next to speakShortcut.
var desktopEnter = desktop.CustomShortcut{KeyName: fyne.KeyEnter, Modifier: fyne.KeyModifierControl}

// isSpeakShortcut accepts Ctrl+Return and Ctrl+keypad Enter.
func isSpeakShortcut(s fyne.Shortcut) bool {
	cs, ok := s.(*desktop.CustomShortcut)
	return ok && cs.Modifier == fyne.KeyModifierControl && (cs.KeyName == fyne.KeyReturn || cs.KeyName == fyne.KeyEnter)
}

// isCtrlTab is Ctrl+Tab, which types a tab into the text box (Tab itself
// moves the focus).
func isCtrlTab(s fyne.Shortcut) bool {
	cs, ok := s.(*desktop.CustomShortcut)
	return ok && cs.Modifier == fyne.KeyModifierControl && cs.KeyName == fyne.KeyTab
}

// speakEntry is a text field of the window (the multi-line text box and
// the one-line style field). A focused widget receives the shortcuts
// instead of the canvas, so the field itself turns Ctrl+Enter into Speak
// and Esc into Stop.
type speakEntry struct {
	widget.Entry
	onSpeak, onStop func()
}

func newSpeakEntry() *speakEntry {
	e := &speakEntry{}
	e.MultiLine = true
	e.Wrapping = fyne.TextWrapWord
	e.ExtendBaseWidget(e)
	return e
}

func newLineEntry() *speakEntry {
	e := &speakEntry{}
	e.ExtendBaseWidget(e)
	return e
}

// AcceptsTab is false so that Tab and Shift+Tab move the focus out of the
// text box as in every other field, instead of typing a tab.
func (e *speakEntry) AcceptsTab() bool { return false }

func (e *speakEntry) TypedShortcut(s fyne.Shortcut) {
	switch {
	case isSpeakShortcut(s) && e.onSpeak != nil:
		e.onSpeak()
	case isCtrlTab(s):
		if e.MultiLine {
			e.TypedRune('\t')
		}
	default:
		e.Entry.TypedShortcut(s)
	}
}

func (e *speakEntry) TypedKey(k *fyne.KeyEvent) {
	if k.Name == fyne.KeyEscape && e.onStop != nil {
		e.onStop()
		return
	}
	e.Entry.TypedKey(k)
}
