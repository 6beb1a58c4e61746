package ui

import (
	"fmt"
	"path/filepath"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"

	"talkbox/internal/regfile"
	"talkbox/ui/doctext"
)

// maxDocumentBytes bounds a document read into the text box, as `say`
// bounds its --file (16 MB).
const maxDocumentBytes = 16 << 20

// openDialog is the Open… button: a .txt or .md file into the text box.
func (u *UI) openDialog() {
	if u.win == nil {
		return
	}
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil {
			u.showError("Could not open the file: " + err.Error())
			return
		}
		if r == nil {
			return // cancelled
		}
		path := r.URI().Path()
		_ = r.Close() // read again through regfile, which bounds the size
		u.OpenDocument(path)
	}, u.win)
	d.SetFilter(storage.NewExtensionFileFilter([]string{".txt", ".md", ".markdown"}))
	u.startIn(d)
	d.Show()
}

// OpenDocument reads a text or Markdown file (Markdown as plain prose, see
// package doctext) into the text box, replacing what was there. The file is
// read on a goroutine; UI goroutine only.
func (u *UI) OpenDocument(path string) {
	name := filepath.Base(path)
	u.setStatus("Opening " + name + "…")
	go func() {
		data, err := regfile.ReadFile(path, maxDocumentBytes)
		var text string
		if err == nil {
			text, err = doctext.Load(path, data)
		}
		u.post(func() {
			if err != nil {
				u.setStatus("")
				u.showError("Could not open " + name + ": " + err.Error())
				return
			}
			u.clearError()
			u.setText(text)
			u.setStatus(fmt.Sprintf("Opened %s (%d characters).", name, utf8.RuneCountInString(text)))
		})
	}()
}

// dropped opens the first local file dropped on the window.
func (u *UI) dropped(_ fyne.Position, uris []fyne.URI) {
	for _, uri := range uris {
		if uri.Scheme() == "file" {
			u.OpenDocument(uri.Path())
			return
		}
	}
}
