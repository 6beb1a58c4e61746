package ui

import (
	"strings"

	"fyne.io/fyne/v2"
)

// ReadClipboard puts the clipboard's text in the text box and speaks it
// (the Read clipboard button). A global shortcut is not offered: Fyne has
// none, so the button works while the window is open. UI goroutine only.
func (u *UI) ReadClipboard() {
	a := fyne.CurrentApp()
	if a == nil {
		return
	}
	text := a.Clipboard().Content()
	if strings.TrimSpace(text) == "" {
		u.showError("The clipboard holds no text.")
		return
	}
	u.setText(text)
	u.Speak()
}
