package ui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"

	"talkbox/ui/uitest"
)

// A Markdown file opens as prose, a dropped text file as it is, and a file
// that is not text shows an error and leaves the text box alone.
func TestOpenAndDropDocuments(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u := h.ui
	dir := t.TempDir()
	md := filepath.Join(dir, "notes.md")
	txt := filepath.Join(dir, "plain.txt")
	bin := filepath.Join(dir, "image.txt")
	for p, b := range map[string]string{md: "# Chapter One\n\nIt was **dark**. See [here](http://x.y).\n", txt: "Just *text*.\n", bin: "\xff\xd8\xff\xe0"} {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u.OpenDocument(md)
	h.waitFor("the Markdown file", func() bool { return strings.HasPrefix(u.status.Text, "Opened") || u.errorMsg.Visible() })
	if u.text.Text != "Chapter One.\n\nIt was dark. See here." {
		t.Fatalf("text box after opening Markdown: %q (error %q)", u.text.Text, u.errorMsg.Text)
	}

	u.dropped(fyne.NewPos(10, 10), []fyne.URI{storage.NewFileURI(txt)})
	h.waitFor("the dropped file", func() bool { return u.text.Text != "Chapter One.\n\nIt was dark. See here." || u.errorMsg.Visible() })
	if u.text.Text != "Just *text*.\n" {
		t.Fatalf("text box after a drop: %q", u.text.Text)
	}

	u.OpenDocument(bin)
	h.waitFor("the error", func() bool { return u.errorMsg.Visible() })
	if !strings.Contains(u.errorMsg.Text, "image.txt") || !strings.Contains(u.errorMsg.Text, "UTF-8") || u.text.Text != "Just *text*.\n" {
		t.Fatalf("binary file: error %q, text %q", u.errorMsg.Text, u.text.Text)
	}
}
