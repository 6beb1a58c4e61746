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

// prevShortcut and nextShortcut skip to the previous and the next sentence.
var (
	prevShortcut = &desktop.CustomShortcut{KeyName: fyne.KeyLeft, Modifier: fyne.KeyModifierAlt}
	nextShortcut = &desktop.CustomShortcut{KeyName: fyne.KeyRight, Modifier: fyne.KeyModifierAlt}
)

// skipOf is -1 for the previous-sentence shortcut, 1 for the next, else 0.
func skipOf(s fyne.Shortcut) int {
	cs, ok := s.(*desktop.CustomShortcut)
	switch {
	case !ok || cs.Modifier != fyne.KeyModifierAlt:
		return 0
	case cs.KeyName == fyne.KeyLeft:
		return -1
	case cs.KeyName == fyne.KeyRight:
		return 1
	}
	return 0
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
	onSkip          func(delta int)
	// onPaste, when set, may take a paste instead of the field (text too
	// long for it); it reports whether it did.
	onPaste func(clip string) bool
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
	case skipOf(s) != 0 && e.onSkip != nil:
		e.onSkip(skipOf(s))
	case isPaste(s) && e.onPaste != nil && e.onPaste(s.(*fyne.ShortcutPaste).Clipboard.Content()):
	default:
		e.Entry.TypedShortcut(s)
	}
}

func isPaste(s fyne.Shortcut) bool {
	p, ok := s.(*fyne.ShortcutPaste)
	return ok && p.Clipboard != nil
}

func (e *speakEntry) TypedKey(k *fyne.KeyEvent) {
	if k.Name == fyne.KeyEscape && e.onStop != nil {
		e.onStop()
		return
	}
	e.Entry.TypedKey(k)
}
