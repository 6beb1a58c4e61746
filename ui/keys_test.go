package ui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"

	"talkbox/ui/uitest"
)

// press delivers a key the way Fyne's desktop driver routes it: Tab or
// Shift+Tab moves the focus unless the focused widget accepts tabs; a key
// with Ctrl or Alt is a shortcut, given to the focused widget when it takes
// shortcuts and else to the canvas; any other key goes to the focused
// widget, or to the canvas's key handler when nothing has the focus.
func press(t *testing.T, c fyne.Canvas, key fyne.KeyName, mod fyne.KeyModifier) {
	t.Helper()
	f := c.Focused()
	if key == fyne.KeyTab && mod&fyne.KeyModifierControl == 0 {
		if tb, ok := f.(fyne.Tabbable); !ok || !tb.AcceptsTab() {
			if mod == fyne.KeyModifierShift {
				c.FocusPrevious()
			} else {
				c.FocusNext()
			}
			return
		}
	}
	if mod&(fyne.KeyModifierControl|fyne.KeyModifierAlt) != 0 {
		s := &desktop.CustomShortcut{KeyName: key, Modifier: mod}
		if sc, ok := f.(fyne.Shortcutable); ok {
			sc.TypedShortcut(s)
			return
		}
		h, ok := c.(interface{ TypedShortcut(fyne.Shortcut) })
		if !ok {
			t.Fatal("the test canvas takes no shortcuts")
		}
		h.TypedShortcut(s)
		return
	}
	if f != nil {
		f.TypedKey(&fyne.KeyEvent{Name: key})
	} else if k := c.OnTypedKey(); k != nil {
		k(&fyne.KeyEvent{Name: key})
	}
}

// Tab leaves the text box (it does not type a tab), Shift+Tab comes back,
// and Ctrl+Tab types a tab.
func TestTabMovesFocusOutOfTextBox(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.2}, nil)
	h.ready()
	u, c := h.ui, h.win.Canvas()
	u.text.SetText("hello")
	c.Focus(u.text)
	press(t, c, fyne.KeyTab, 0)
	if got := c.Focused(); got == u.text || got == nil {
		t.Fatalf("Tab left the focus on %T", got)
	}
	if strings.Contains(u.text.Text, "\t") {
		t.Fatalf("Tab typed into the text box: %q", u.text.Text)
	}
	press(t, c, fyne.KeyTab, fyne.KeyModifierShift)
	if c.Focused() != u.text {
		t.Fatalf("Shift+Tab focused %T, want the text box", c.Focused())
	}
	press(t, c, fyne.KeyTab, fyne.KeyModifierControl)
	if c.Focused() != u.text || !strings.Contains(u.text.Text, "\t") {
		t.Fatalf("Ctrl+Tab: focus %T, text %q; want a tab typed in the text box", c.Focused(), u.text.Text)
	}
}

// Ctrl+Enter speaks and Esc stops from every field of the window and with
// nothing focused.
func TestSpeakAndStopFromEveryField(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.5, Instruct: true}, nil)
	h.ready()
	u, c := h.ui, h.win.Canvas()
	fields := map[string]fyne.Focusable{"text box": u.text, "style": u.instruct, "voice": u.voice, "language": u.lang, "model": u.model,
		"volume": u.volume, "speed": u.speed, "output": u.output, "nothing": nil}
	for name, f := range fields {
		u.text.SetText(strings.Repeat("A long sentence that keeps going on and on ", 8) + "and ends.")
		if f == nil {
			c.Unfocus()
		} else {
			c.Focus(f)
		}
		press(t, c, fyne.KeyReturn, fyne.KeyModifierControl)
		if u.cur == nil {
			t.Fatalf("%s: Ctrl+Enter did not speak (status %q, error %q)", name, u.status.Text, u.errorMsg.Text)
		}
		press(t, c, fyne.KeyEscape, 0)
		if u.status.Text != "Stopping…" {
			t.Fatalf("%s: Esc did not stop (status %q)", name, u.status.Text)
		}
		h.waitFor(name+": the stop to finish", h.idle)
		if u.status.Text != "Stopped." {
			t.Fatalf("%s: after Esc, status %q", name, u.status.Text)
		}
	}
}

// Space pauses and resumes when no field has the focus; in the text box it
// types a space. The Pause button does the same.
func TestSpacePausesOutsideTextBox(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.3}, nil)
	h.ready()
	u, c := h.ui, h.win.Canvas()
	if !u.pauseBtn.Disabled() {
		t.Fatal("Pause enabled with nothing speaking")
	}
	u.text.SetText("A sentence of about three seconds, no more.") // one 80 ms frame a character
	test.Tap(u.speakBtn)
	h.waitFor("sound to start", func() bool { return u.panel.firstSound.Text != "–" })
	if u.pauseBtn.Disabled() {
		t.Fatal("Pause disabled while speaking")
	}

	if u.text.Visible() {
		t.Fatal("the text box shows while its text is spoken (the read view should)")
	}
	test.Tap(u.editBtn) // back to the text box, still speaking
	if c.Focused() != fyne.Focusable(u.text) || h.idle() {
		t.Fatalf("Edit while speaking: focused %v, idle %v", c.Focused(), h.idle())
	}
	before := u.text.Text
	press(t, c, fyne.KeySpace, 0)
	u.text.TypedRune(' ') // the driver follows a Space key with its rune
	if h.player.Paused() || u.text.Text == before {
		t.Fatalf("Space in the text box: paused=%v, text unchanged=%v", h.player.Paused(), u.text.Text == before)
	}

	c.Unfocus()
	press(t, c, fyne.KeySpace, 0)
	if !h.player.Paused() || u.pauseBtn.Text != resumeLabel || !strings.HasPrefix(u.status.Text, "Paused") {
		t.Fatalf("Space did not pause: paused=%v button %q status %q", h.player.Paused(), u.pauseBtn.Text, u.status.Text)
	}
	press(t, c, fyne.KeySpace, 0)
	if h.player.Paused() || u.pauseBtn.Text != pauseLabel {
		t.Fatalf("Space did not resume: paused=%v button %q", h.player.Paused(), u.pauseBtn.Text)
	}
	for _, s := range []*keySlider{u.volume, u.speed} {
		c.Focus(s)
		press(t, c, fyne.KeySpace, 0)
		paused := h.player.Paused()
		press(t, c, fyne.KeySpace, 0)
		if !paused || h.player.Paused() {
			t.Fatalf("Space on a slider: paused %v then %v, want a pause and a resume", paused, h.player.Paused())
		}
	}
	c.Unfocus()
	test.Tap(u.pauseBtn)
	if !h.player.Paused() {
		t.Fatal("the Pause button did not pause")
	}
	test.Tap(u.pauseBtn)
	if h.player.Paused() {
		t.Fatal("the Resume button did not resume")
	}
	h.waitFor("the utterance to end", h.idle)
	if !u.pauseBtn.Disabled() || u.pauseBtn.Text != pauseLabel {
		t.Errorf("after the end: pause disabled=%v text %q", u.pauseBtn.Disabled(), u.pauseBtn.Text)
	}
	if got := h.historyN(1)[0].Outcome; got != "done" {
		t.Errorf("outcome %q after pause and resume, want done", got)
	}
}

// Stop while paused ends the pause, so the next Speak is heard.
func TestStopWhilePaused(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.3}, nil)
	h.ready()
	u := h.ui
	u.text.SetText(strings.Repeat("A long sentence that keeps going on and on ", 8) + "and ends.")
	test.Tap(u.speakBtn)
	h.waitFor("sound to start", func() bool { return u.panel.firstSound.Text != "–" })
	u.TogglePause()
	test.Tap(u.stopBtn)
	h.waitFor("the stop", h.idle)
	if h.player.Paused() || u.pauseBtn.Text != pauseLabel {
		t.Fatalf("after Stop: paused=%v button %q", h.player.Paused(), u.pauseBtn.Text)
	}
}
