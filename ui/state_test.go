package ui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/history"
	"talkbox/app/hub"
	"talkbox/app/hub/hubtest"
	"talkbox/app/settings"
	"talkbox/engine/audioenc"
	"talkbox/engine/golden"
	"talkbox/ui/uitest"
)

// Start restores the last model (not the first in the list), its voice,
// language, style and the unsent draft; a model the window cannot serve is
// never loaded on its own; Close saves what changed.
func TestSettingsRestoredAndSaved(t *testing.T) {
	var saved []settings.Settings
	h := newHarnessWith(t, &uitest.FakeEngine{RTF: 0.3, Instruct: true}, nil, func(c *Config) {
		c.Models = []Model{
			{Name: "A clone model", Dir: "/models/a", CannotServe: "voice cloning needs a reference clip"},
			{Name: "B first servable", Dir: "/models/b"},
			{Name: "C used last", Dir: "/models/c"},
		}
		c.Settings = settings.Settings{Model: "/models/c", Voice: "eric", Language: "chinese", Instruct: "calm",
			Draft: "Unsent draft.", Width: 900, Height: 600, HistoryMB: 250, ExportFormat: "flac"}
		c.SaveSettings = func(s settings.Settings) error { saved = append(saved, s); return nil }
	})
	h.ready()
	u := h.ui
	if u.model.Selected != "C used last" {
		t.Fatalf("started with %q, want the model used last", u.model.Selected)
	}
	if v, _ := u.voices.value(u.voice.Selected); v != "eric" {
		t.Errorf("voice %q, want eric", v)
	}
	if u.lang.Selected != "Chinese" || u.instruct.Text != "calm" || u.text.Text != "Unsent draft." {
		t.Errorf("restored language %q style %q draft %q", u.lang.Selected, u.instruct.Text, u.text.Text)
	}

	// Switching models keeps the language the new model has.
	u.lang.SetSelected("Japanese")
	u.model.SetSelected("B first servable")
	h.waitFor("the switch", func() bool { return u.modelIdx == 1 && u.eng != nil })
	if u.lang.Selected != "Japanese" {
		t.Errorf("language after a model switch %q, want Japanese kept", u.lang.Selected)
	}

	u.text.SetText("A new draft.")
	u.Close()
	if len(saved) == 0 {
		t.Fatal("nothing saved at Close")
	}
	last := saved[len(saved)-1]
	if last.Model != "/models/b" || last.Language != "japanese" || last.Draft != "A new draft." || last.Voice != "eric" || last.HistoryMB != 250 {
		t.Fatalf("saved %+v", last)
	}

	// Only unservable models: nothing is loaded on its own.
	if i := startModel([]Model{{Dir: "/x", CannotServe: "clone"}}, "/x"); i != -1 {
		t.Fatalf("startModel picked an unservable model: %d", i)
	}
	if i := startModel([]Model{{Dir: "/a"}, {Dir: "/b"}}, "/gone"); i != 0 {
		t.Fatalf("startModel with a vanished last model: %d", i)
	}
}

// Utterances are kept with their audio across restarts; rows replay, save
// as FLAC, delete, and "Use" keeps the replaced draft for Undo.
func TestHistoryKeptAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	store, err := history.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, &uitest.FakeEngine{RTF: 0.1}, nil, func(c *Config) { c.History = store })
	h.ready()
	u := h.ui
	u.text.SetText("Keep me.")
	test.Tap(u.speakBtn)
	h.waitFor("the utterance", h.idle)
	es := h.historyN(1)
	if es[0].Text != "Keep me." || es[0].Samples == 0 || es[0].Model != "fake model" {
		t.Fatalf("kept %+v", es[0])
	}
	if !strings.Contains(u.histHeader.Text, "MB of 500 MB") {
		t.Errorf("history header %q", u.histHeader.Text)
	}

	// A restart: a new store on the folder lists it.
	again, err := history.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Entries(); len(got) != 1 || got[0].ID != es[0].ID {
		t.Fatalf("after restart: %+v", got)
	}

	out := filepath.Join(t.TempDir(), "kept.flac")
	u.SaveEntry(es[0], out)
	h.waitFor("the save", func() bool { return strings.HasPrefix(u.status.Text, "Saved") || u.errorMsg.Visible() })
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := audioenc.Decode(b, audioenc.FLAC); err != nil || int64(len(d.PCM)) != es[0].Samples {
		t.Fatalf("saved FLAC: %v, %d samples, want %d", err, len(d.PCM), es[0].Samples)
	}

	u.replay(es[0])
	h.waitFor("the replay", func() bool { return strings.HasPrefix(u.status.Text, "Played") || u.errorMsg.Visible() })

	u.text.SetText("My unsent draft.")
	u.useEntry(es[0])
	if u.text.Text != "Keep me." || !u.undoBar.Visible() {
		t.Fatalf("Use: text %q, undo shown %v", u.text.Text, u.undoBar.Visible())
	}
	u.undoUse()
	if u.text.Text != "My unsent draft." || u.undoBar.Visible() {
		t.Fatalf("Undo: text %q", u.text.Text)
	}

	u.deleteEntry(es[0])
	if len(u.history.entries) != 0 || len(store.Entries()) != 0 {
		t.Fatalf("after delete: %d rows, %d kept", len(u.history.entries), len(store.Entries()))
	}
}

// Export renders the text box's text to a file at engine speed.
func TestExportFromWindow(t *testing.T) {
	h := newHarness(t, &uitest.FakeEngine{RTF: 0.05}, nil)
	h.ready()
	u := h.ui
	u.text.SetText("First sentence. Second sentence!")
	out := filepath.Join(t.TempDir(), "out.ogg")
	u.Export(out)
	h.waitFor("the export", func() bool { return !u.exporting })
	if !strings.HasPrefix(u.status.Text, "Exported") {
		t.Fatalf("status %q, error %q", u.status.Text, u.errorMsg.Text)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := float64(h.fake.FramesFor("First sentence.")+h.fake.FramesFor("Second sentence!")) * 0.08
	d, err := audioenc.Decode(b, audioenc.Opus)
	if got := float64(len(d.PCM)) / float64(d.SampleRate); err != nil || got < want-0.05 || got > want+0.05 {
		t.Fatalf("exported %.3f s (%v), want %.3f s", got, err, want)
	}
	if u.prefs.ExportFormat != "opus" {
		t.Errorf("export format not remembered: %q", u.prefs.ExportFormat)
	}
}

// The Models dialog lists an interrupted download as "Resume, N% done"
// after a restart, and deletes a model.
func TestModelsPanelResumeAndDelete(t *testing.T) {
	const repo = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
	srv := hubtest.New(t, golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), repo)
	store := &hub.Store{Dir: t.TempDir(), Client: &hub.Client{Endpoint: srv.URL, HTTP: srv.HTTPClient()}}
	srv.DropAfter("model.safetensors", 2_000_000)
	if _, err := store.Pull(context.Background(), repo, nil); err == nil {
		t.Fatal("the dropped pull succeeded")
	}
	h := newHarnessWith(t, &uitest.FakeEngine{RTF: 0.3}, nil, func(c *Config) { c.Store = store })
	h.ready()
	p := h.ui.newModelsPanel()
	list, _ := store.List()
	pct, ok := list[0].Percent()
	if !ok || pct <= 0 || pct >= 100 {
		t.Fatalf("percent %d %v", pct, ok)
	}
	want := "Resume, " + strings.TrimSpace(strings.Split(modelRowText(list[0]), "download ")[1])
	want = strings.TrimSuffix(want, " done") + " done"
	if !containsButton(p.rows, want) {
		t.Fatalf("no %q button in the Models dialog", want)
	}
	if !containsLabel(p.rows, "Qwen3-TTS 0.6B CustomVoice") {
		t.Fatal("the model is not listed under its display name")
	}
	if err := store.Delete(list[0].Dir); err != nil {
		t.Fatal(err)
	}
	p.refresh()
	if !containsLabel(p.rows, "No model installed yet.") {
		t.Fatal("deleted model still listed")
	}
}

func containsButton(o fyne.CanvasObject, text string) bool {
	switch w := o.(type) {
	case *widget.Button:
		return w.Text == text
	case *fyne.Container:
		for _, c := range w.Objects {
			if containsButton(c, text) {
				return true
			}
		}
	}
	return false
}

func containsLabel(o fyne.CanvasObject, text string) bool {
	switch w := o.(type) {
	case *widget.Label:
		return w.Text == text
	case *fyne.Container:
		for _, c := range w.Objects {
			if containsLabel(c, text) {
				return true
			}
		}
	}
	return false
}
