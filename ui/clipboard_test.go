package ui

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"talkbox/ui/uitest"
)

func TestReadClipboardSpeaksIt(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u := h.ui
	fyne.CurrentApp().Clipboard().SetContent("   ")
	test.Tap(u.clipBtn)
	if !u.errorMsg.Visible() || u.cur != nil {
		t.Fatalf("empty clipboard: error shown=%v, speaking=%v", u.errorMsg.Visible(), u.cur != nil)
	}
	fyne.CurrentApp().Clipboard().SetContent("Copied words.")
	test.Tap(u.clipBtn)
	if u.text.Text != "Copied words." || u.cur == nil {
		t.Fatalf("text %q, speaking=%v", u.text.Text, u.cur != nil)
	}
	h.waitFor("the utterance", h.idle)
	if got := h.fake.Requests(); len(got) == 0 {
		t.Fatal("the engine got no request")
	}
}
