package ui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"

	"talkbox/app/audio"
	"talkbox/app/history"
	"talkbox/app/settings"
	"talkbox/engine"
	"talkbox/engine/audioenc"
	"talkbox/internal/atomicfile"
	"talkbox/ui/speech"
)

// currentSettings collects what the window remembers; UI goroutine only.
func (u *UI) currentSettings() settings.Settings {
	s := u.prefs
	if u.modelIdx >= 0 && u.modelIdx < len(u.cfg.Models) {
		s.Model = u.cfg.Models[u.modelIdx].Dir
	}
	if v, err := u.voices.value(u.voice.Selected); err == nil {
		s.Voice = v
	}
	if l, err := u.langs.value(u.lang.Selected); err == nil {
		s.Language = l
	}
	s.Instruct = u.instruct.Text
	if s.Draft = u.currentText(); len(s.Draft) > maxDraftBytes {
		s.Draft = "" // a book is opened again, not kept in the settings file
	}
	if u.win != nil {
		if sz := u.win.Canvas().Size(); sz.Width > 0 && sz.Height > 0 {
			s.Width, s.Height = int(sz.Width), int(sz.Height)
		}
	}
	u.prefs = s
	return s
}

// saveSettings writes the remembered state now (at Close).
func (u *UI) saveSettings() {
	if u.cfg.SaveSettings == nil {
		return
	}
	s := u.currentSettings()
	gen := u.settingsGen.Add(1)
	u.settingsMu.Lock()
	defer u.settingsMu.Unlock()
	u.savedGen = gen
	_ = u.cfg.SaveSettings(s) // at Close there is no window left to tell
}

// saveSettingsLater writes it on a background goroutine and reports a
// failure in the window.
func (u *UI) saveSettingsLater() {
	if u.cfg.SaveSettings == nil {
		return
	}
	s := u.currentSettings()
	save := u.cfg.SaveSettings
	gen := u.settingsGen.Add(1)
	go func() {
		u.settingsMu.Lock()
		var err error
		if gen > u.savedGen { // a newer state may have been written meanwhile
			u.savedGen = gen
			err = save(s)
		}
		u.settingsMu.Unlock()
		if err != nil {
			u.post(func() { u.showError("Could not save the settings: " + err.Error()) })
		}
	}()
}

// recordHistory keeps a finished utterance with its audio (not one that
// produced no audio) on a background goroutine, then refreshes the list.
func (u *UI) recordHistory(utt *speech.Utterance, end speech.Outcome, outcome string) {
	store := u.cfg.History
	if store == nil || len(end.PCM) == 0 {
		return
	}
	req := utt.Request()
	f := end.Figures
	voiceName := req.Voice
	if req.Clone != nil {
		voiceName = req.Clone.Name
	}
	e := history.Entry{Text: utt.Text(), Voice: voiceName, Language: req.Language, Instruct: req.Instruct, Seed: req.Seed,
		Outcome: outcome, Stats: history.Stats{TTFC: f.TTFC, FirstSound: f.FirstSound, RTF: f.RTF, BufferWait: f.BufferWait,
			FramesPerS: f.FramesPerS, Underruns: f.Underruns, Silent: f.Silent}}
	if u.modelIdx >= 0 && u.modelIdx < len(u.cfg.Models) {
		e.Model, e.ModelDir = u.cfg.Models[u.modelIdx].Name, u.cfg.Models[u.modelIdx].Dir
	}
	pcm := end.PCM
	go func() {
		_, dropped, err := store.Add(e, pcm, audio.SampleRate)
		u.post(func() {
			u.refreshHistory()
			if err != nil && !errors.Is(err, history.ErrEmpty) {
				u.showError("Could not keep this utterance in the history: " + err.Error())
			} else if len(dropped) > 0 {
				u.setStatus(u.status.Text + fmt.Sprintf(" (%d oldest history entries dropped to stay under %d MB)", len(dropped), u.prefs.HistoryMB))
			}
		})
	}()
}

// refreshHistory reloads the list and its size from the store.
func (u *UI) refreshHistory() {
	if u.cfg.History == nil {
		return
	}
	u.history.set(u.cfg.History.Entries())
	u.histHeader.SetText("History · " + historySize(u.cfg.History.Size(), u.prefs.HistoryMB))
}

func limitLabel(mb int) string { return "Keep " + strconv.Itoa(mb) + " MB" }

// setHistoryLimit applies a size limit picked in the history header.
func (u *UI) setHistoryLimit(label string) {
	mb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(label, "Keep "), " MB"))
	if err != nil || mb <= 0 || mb == u.prefs.HistoryMB {
		return
	}
	u.prefs.HistoryMB = mb
	u.saveSettingsLater()
	if store := u.cfg.History; store != nil {
		dropped, err := store.SetLimit(int64(mb) * 1e6)
		if err != nil {
			u.showError("History: " + err.Error())
		}
		if len(dropped) > 0 {
			u.setStatus(fmt.Sprintf("Dropped the %d oldest history entries to stay under %d MB.", len(dropped), mb))
		}
	}
	u.refreshHistory()
}

// stopReplay stops a history replay; it returns the channel that closes
// once the replay has let go of the player, or nil when none was running.
func (u *UI) stopReplay() chan struct{} {
	if u.replayStop == nil {
		return nil
	}
	u.replayStop()
	u.cfg.Player.Stop()
	done := u.replayDone
	u.replayStop, u.replayDone = nil, nil
	return done
}

// replay plays a history entry's kept audio.
func (u *UI) replay(e history.Entry) {
	if u.cfg.History == nil || u.cfg.Player == nil {
		return
	}
	prev := u.cur
	if prev != nil {
		prev.Cancel()
		u.cfg.Player.Stop()
	}
	prevReplay := u.stopReplay()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	u.replayStop, u.replayDone = cancel, done
	u.clearError()
	u.setStatus("Playing from the history: " + oneLine(truncate(e.Text, 60)))
	store, player := u.cfg.History, u.cfg.Player
	go func() {
		defer close(done)
		if prev != nil {
			<-prev.Done()
		}
		if prevReplay != nil {
			<-prevReplay
		}
		pcm, _, err := store.Audio(e.ID)
		if err == nil && ctx.Err() == nil {
			ch := make(chan engine.Chunk, 1)
			ch <- engine.Chunk{PCM: pcm, Frames: 1}
			close(ch)
			_, err = player.Play(ctx, ch, audio.PlayOptions{})
		}
		stopped := ctx.Err() != nil
		cancel()
		u.post(func() {
			if u.replayDone == done {
				u.replayStop, u.replayDone = nil, nil
			}
			switch {
			case err != nil && !stopped:
				u.showError("Could not play the entry: " + err.Error())
			case !stopped:
				u.setStatus("Played " + formatSeconds(e.Duration()) + " from the history.")
			}
		})
	}()
}

// copyEntry puts an entry's text on the clipboard.
func (u *UI) copyEntry(e history.Entry) {
	if a := fyne.CurrentApp(); a != nil {
		a.Clipboard().SetContent(e.Text)
		u.setStatus("Copied the text to the clipboard.")
	}
}

// deleteEntry removes an entry and its audio.
func (u *UI) deleteEntry(e history.Entry) {
	if u.cfg.History == nil {
		return
	}
	if err := u.cfg.History.Delete(e.ID); err != nil && !errors.Is(err, history.ErrNotFound) {
		u.showError("Could not delete the entry: " + err.Error())
		return
	}
	u.refreshHistory()
	u.setStatus("Deleted a history entry.")
}

// useEntry puts an entry's text in the text box; the draft it replaces can
// be brought back with Undo.
func (u *UI) useEntry(e history.Entry) {
	now := u.currentText()
	if now == e.Text {
		return
	}
	if strings.TrimSpace(now) != "" {
		u.undoText = now
		u.undoBar.Show()
	}
	u.setText(e.Text)
}

// undoUse brings back the draft the last "Use" replaced.
func (u *UI) undoUse() {
	u.setText(u.undoText)
	u.undoText = ""
	u.undoBar.Hide()
}

// saveEntryDialog asks where to save an entry's audio (WAV, FLAC or Ogg
// Opus by the extension).
func (u *UI) saveEntryDialog(e history.Entry) {
	if u.win == nil {
		return
	}
	u.askSavePath("Save", savedName(e.Time.Local(), ".flac"), []string{".wav", ".flac", ".ogg", ".opus"},
		func(path string) { u.SaveEntry(e, path) })
}

// SaveEntry writes an entry's audio to path in the format its extension
// names (FLAC when it has none), atomically, in the background.
func (u *UI) SaveEntry(e history.Entry, path string) {
	if filepath.Ext(path) == "" {
		path += ".flac"
	}
	f, err := audioenc.FormatFromPath(path)
	if err != nil {
		u.showError("Save failed: " + err.Error())
		return
	}
	store := u.cfg.History
	u.setStatus("Saving " + path + "…")
	go func() {
		pcm, rate, err := store.Audio(e.ID)
		if err == nil {
			err = writeAudio(path, f, pcm, rate)
		}
		u.post(func() {
			if err != nil {
				u.showError("Save failed: " + err.Error())
				return
			}
			u.setStatus(fmt.Sprintf("Saved %s (%s).", path, formatSeconds(e.Duration())))
		})
	}()
}

// writeAudio encodes pcm into path atomically.
func writeAudio(path string, f audioenc.Format, pcm []float32, rate int) error {
	out, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	enc, err := audioenc.New(out, f, rate)
	if err == nil {
		err = enc.Write(pcm)
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		out.Abort()
		return err
	}
	return out.Commit()
}

// startIn opens a file dialog in SaveDir (else the home folder).
// askSavePath asks where to save, in a dialog that opens in the save folder
// with name proposed and the extensions exts listed; save gets the path
// (nothing on cancel; a dialog error shows as "<what> failed: ...").
func (u *UI) askSavePath(what, name string, exts []string, save func(path string)) {
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil {
			u.showError(what + " failed: " + err.Error())
			return
		}
		if w == nil {
			return // cancelled
		}
		path := w.URI().Path()
		_ = w.Close()
		save(path)
	}, u.win)
	d.SetFileName(name)
	d.SetFilter(storage.NewExtensionFileFilter(exts))
	u.startIn(d)
	d.Show()
}

// savedName is the file name a save dialog proposes for audio made at t.
func savedName(t time.Time, ext string) string { return "talkbox-" + t.Format("20060102-150405") + ext }

func (u *UI) startIn(d *dialog.FileDialog) {
	dir := u.cfg.SaveDir
	if dir == "" {
		dir = homeDir()
	}
	if l, err := storage.ListerForURI(storage.NewFileURI(dir)); err == nil {
		d.SetLocation(l)
	}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
