package ui

import (
	"os"
	"path/filepath"
	"testing"

	"talkbox/ui/uitest"
)

func TestHasCJK(t *testing.T) {
	for s, want := range map[string]bool{"你好": true, "こんにちは": true, "カタカナ": true, "안녕하세요": true, "Hello, café": false, "": false} {
		if got := hasCJK(s); got != want {
			t.Errorf("hasCJK(%q) = %v", s, got)
		}
	}
}

func TestFindCJKFont(t *testing.T) {
	none, some := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(none, "truetype", "dejavu", "DejaVuSans.ttf"), filepath.Join(some, "opentype", "noto", "NotoSansCJK-Regular.ttc")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := findCJKFont([]string{none, filepath.Join(none, "missing")}); got != "" {
		t.Errorf("found %q among non-CJK fonts", got)
	}
	if got := findCJKFont([]string{none, some}); filepath.Base(got) != "NotoSansCJK-Regular.ttc" {
		t.Errorf("found %q, want the Noto CJK file", got)
	}
}

// Without a CJK font the window names the package once.
func TestCJKNoteOnce(t *testing.T) {
	empty := t.TempDir()
	old := cjkFontDirs
	cjkFontDirs = func() []string { return []string{empty} }
	t.Cleanup(func() { cjkFontDirs = old })
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u := h.ui
	u.text.SetText("Hello")
	u.text.SetText("你好，世界")
	h.waitFor("the CJK note", func() bool { return u.status.Text == cjkNote })
	u.setStatus("Ready.")
	u.text.SetText("こんにちは")
	for len(h.q) > 0 {
		(<-h.q)()
	}
	if u.status.Text != "Ready." {
		t.Fatalf("the note came twice: %q", u.status.Text)
	}
}
