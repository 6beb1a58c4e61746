package ui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"

	"talkbox/app/audio"
	"talkbox/engine"
	"talkbox/engine/model"
	"talkbox/engine/wav"
	"talkbox/ui/speech"
)

// tickInterval is the panel refresh period (about 10 Hz).
const tickInterval = 100 * time.Millisecond

// selectModel unloads the current model and loads model i in the
// background; the result comes back through Post.
func (u *UI) selectModel(i int) {
	if i < 0 || i >= len(u.cfg.Models) || i == u.modelIdx {
		return
	}
	u.modelIdx = i
	u.loadSeq++
	seq := u.loadSeq
	m := u.cfg.Models[i]
	old, cur := u.eng, u.cur
	u.eng = nil
	if cur != nil {
		cur.Cancel()
		u.cfg.Player.Stop()
	}
	u.speakBtn.Disable()
	u.exportBtn.Disable()
	u.device.SetText("Device: –")
	u.clearError()
	u.setStatus(fmt.Sprintf("Loading %s…", m.Name))
	open, opts := u.cfg.Open, OpenOptions{Precision: u.prefs.Precision}
	go func() {
		// Free the old model first: two large checkpoints may not fit.
		if old != nil {
			if cur != nil {
				<-cur.Done()
			}
			_ = old.Close()
		}
		var e Engine
		err := errors.New("no model loader configured")
		if open != nil {
			e, err = open(m.Dir, opts)
		}
		u.post(func() {
			if seq != u.loadSeq { // another model was picked meanwhile
				if e != nil {
					go e.Close()
				}
				return
			}
			if err != nil {
				u.setStatus("No model loaded.")
				u.showError(fmt.Sprintf("Could not load model %s: %v", m.Name, err))
				return
			}
			u.setEngine(e)
			u.saveSettingsLater()
		})
	}()
}

// setEngine fills the pickers from a freshly loaded model.
func (u *UI) setEngine(e Engine) {
	u.eng = e
	// Keep the voice and language across a model switch when the new model
	// has them; before any was picked, the ones remembered from last time.
	prevVoice, err := u.voices.value(u.voice.Selected)
	if err != nil {
		prevVoice = u.prefs.Voice
	}
	prevLang, err := u.langs.value(u.lang.Selected)
	if err != nil {
		prevLang = u.prefs.Language
	}
	u.voices = voicePicks(e.Voices(), u.known)
	u.voiceGuard = true
	u.voice.SetOptions(u.voices.labels)
	switch {
	case u.cloning():
		u.voiceGuard = false
		u.refreshClones(prevVoice)
	case len(u.voices.labels) == 0:
		u.voice.ClearSelected()
		u.voice.PlaceHolder = "(this model has no preset voices)"
		u.voice.Disable()
	case u.voices.labelOf(prevVoice) != "":
		u.voice.Enable()
		u.voice.SetSelected(u.voices.labelOf(prevVoice))
	default:
		u.voice.Enable()
		u.voice.SetSelectedIndex(0)
	}
	u.voiceGuard = false
	u.langs = languagePicks(e.Languages())
	u.lang.SetOptions(u.langs.labels)
	if l := u.langs.labelOf(prevLang); l != "" {
		u.lang.SetSelected(l)
	} else {
		u.lang.SetSelectedIndex(0)
	}
	u.designing = isVoiceDesign(e)
	switch {
	case u.designing:
		u.instructL.SetText("Voice description")
		u.instruct.SetPlaceHolder("Required: describe the voice, e.g. \"a calm, deep male narrator with a slight British accent\"")
		u.instructR.Show()
	case e.SupportsInstruct():
		u.instructL.SetText("Style (optional)")
		u.instruct.SetPlaceHolder("Optional speaking style, e.g. \"calm and slow\"")
		u.instructR.Show()
	default:
		u.instructR.Hide()
	}
	u.device.SetText(deviceLine(e))
	u.speakBtn.Enable()
	u.exportBtn.Enable()
	u.setStatus(fmt.Sprintf("Ready: %s on %s.", e.ModelName(), e.Device()))
}

// deviceLine names where the model runs and, when that is the CPU because
// the GPU could not be used, why (engines that know say it through GPUNote).
func deviceLine(e Engine) string {
	line := "Device: " + e.Device()
	if n, ok := e.(interface{ GPUNote() string }); ok && n.GPUNote() != "" {
		line += " · GPU not used: " + n.GPUNote()
	}
	return line
}

// Speak cancels any utterance in flight and starts a new one: the text box's
// text, or the document in the read view from its marked sentence on. It
// never blocks: the work runs on the utterance's goroutines.
func (u *UI) Speak() {
	if u.doc != nil && !u.docTemp {
		u.speakFrom(u.doc, u.reader.cur)
		return
	}
	u.speakFrom(newDocument(u.text.Text), 0)
}

// speakFrom speaks d from sentence first on, showing it in the read view
// (the text box's own text there only while it is spoken).
func (u *UI) speakFrom(d *document, first int) {
	if u.eng == nil {
		u.showError("No model is loaded yet.")
		return
	}
	if d.len() == 0 {
		u.showError("Type some text to speak first.")
		return
	}
	first = min(max(0, first), d.len()-1)
	req := engine.Request{Language: "auto"}
	cloneBefore := 0
	if u.cloning() {
		v, ok := u.cloneForSpeak()
		if !ok {
			return
		}
		req.Clone, cloneBefore = v, len(v.Derived)
	} else if len(u.voices.labels) > 0 {
		v, err := u.voices.value(u.voice.Selected)
		if err != nil {
			u.showError("Pick a voice first.")
			return
		}
		req.Voice = v
	}
	if l, err := u.langs.value(u.lang.Selected); err == nil {
		req.Language = l
	}
	if u.instructR.Visible() {
		req.Instruct = strings.TrimSpace(u.instruct.Text)
	}
	if u.designing && req.Instruct == "" {
		u.showError("Describe the voice first (Voice description), e.g. \"a warm, bright young female voice, speaking quickly\".")
		return
	}
	u.clearError()
	prev := u.cur
	if prev != nil {
		prev.Cancel()
		u.cfg.Player.Stop()
	}
	replayDone := u.stopReplay()
	if prev != nil && d == u.curDoc {
		// A skip or a tap within the document being read: the reading goes
		// on, and the bit of audio it cut off is not a history entry.
		u.moved[prev] = true
	}
	if d != u.doc {
		u.refocus = u.win != nil && u.win.Canvas().Focused() == fyne.Focusable(u.text)
		u.showDocument(d, true)
		if u.refocus {
			u.win.Canvas().Unfocus() // keys go to the window: Space pauses, Esc stops
		}
	}
	u.reader.mark(first)
	u.nextID++
	text, sentences := d.from(first)
	// Played faster, the audio must be made faster too: the prebuffer
	// policy sees the RTF against playing time.
	utt := speech.NewSentences(u.nextID, text, sentences, req, u.eng, u.cfg.Player, u.lastRTF*u.prefs.Speed)
	u.cur = utt
	u.curDoc, u.curFrom = d, first
	u.current.Store(utt)
	u.stopBtn.Enable()
	u.showPaused(false)
	u.pauseBtn.Enable()
	u.panel.reset()
	if p := utt.Prebuffer(); p > 0 {
		u.setStatus(fmt.Sprintf("Speaking (holding %s of audio first: last RTF %.2f)…", formatSeconds(p), u.lastRTF))
	} else {
		u.setStatus("Speaking…")
	}
	u.saveSettingsLater()
	go func() {
		if replayDone != nil {
			<-replayDone // the ring has one producer
		}
		utt.Run(prev)
		u.post(func() {
			u.keepDerived(req.Clone, cloneBefore)
			u.finish(utt)
		})
	}()
}

// isVoiceDesign reports a VoiceDesign model (engines that expose their
// config; others are not).
func isVoiceDesign(e Engine) bool {
	m, ok := e.(interface{ Model() *model.Model })
	return ok && m.Model() != nil && m.Model().Config.TTSModelType == model.TypeVoiceDesign
}

// Stop silences the current utterance at once and cancels its synthesis.
func (u *UI) Stop() {
	if u.stopReplay() != nil {
		u.setStatus("Stopped.")
	}
	if u.cur == nil {
		return
	}
	u.cur.Cancel()
	u.cfg.Player.Stop()
	u.setStatus("Stopping…")
}

// finish records a finished utterance; UI goroutine.
func (u *UI) finish(utt *speech.Utterance) {
	end := utt.Outcome()
	f := end.Figures
	outcome := "done"
	switch {
	case end.Stopped:
		outcome = "stopped"
	case end.Err != nil:
		outcome = "failed"
	}
	if !u.moved[utt] {
		u.recordHistory(utt, end, outcome)
	}
	delete(u.moved, utt)
	if len(end.PCM) > 0 {
		u.lastPCM = end.PCM
		u.saveBtn.Enable()
	}
	if utt != u.cur {
		return // superseded by a newer Speak, which owns the panel now
	}
	u.cur = nil
	u.current.Store(nil)
	u.readingDone(outcome == "done")
	u.curDoc = nil
	u.stopBtn.Disable()
	u.showPaused(false)
	u.pauseBtn.Disable()
	u.panel.show(f)
	if !end.Stopped && f.RTF > 0 {
		u.lastRTF = f.RTF
	}
	switch outcome {
	case "stopped":
		u.setStatus("Stopped.")
	case "failed":
		u.setStatus("Speech failed.")
		u.showError(userMessage(end.Err))
	default:
		u.setStatus(fmt.Sprintf("Done: %s of audio in %s.", formatSeconds(f.Audio), formatSeconds(end.Finished)))
	}
}

// userMessage turns an engine error into a sentence for the window; the
// detail stays in the wrapped text.
func userMessage(err error) string {
	switch {
	case errors.Is(err, engine.ErrUnknownVoice):
		return "The model does not know this voice: " + err.Error()
	case errors.Is(err, engine.ErrUnknownLang):
		return "The model does not support this language: " + err.Error()
	case errors.Is(err, engine.ErrTextTooLong):
		return "The text is too long for one request: " + err.Error()
	case errors.Is(err, engine.ErrNeedsClone):
		return "This Base model speaks in a cloned voice: add one with " + newVoiceLabel + " in the Voice list."
	case errors.Is(err, engine.ErrUnsupportedReq):
		return "This model cannot do that: " + err.Error()
	}
	return "Speech failed: " + err.Error()
}

// tick refreshes the panel from atomics about ten times a second while an
// utterance runs. At most one update is queued at a time, so a busy UI
// goroutine never accumulates a backlog.
func (u *UI) tick() {
	t := time.NewTicker(tickInterval)
	defer t.Stop()
	for {
		select {
		case <-u.stop:
			return
		case <-t.C:
		}
		utt := u.current.Load()
		if utt == nil || !u.pending.CompareAndSwap(false, true) {
			continue
		}
		f := utt.Snapshot(u.cfg.Player.Live())
		u.post(func() {
			u.pending.Store(false)
			if u.cur == utt { // not finished or superseded meanwhile
				u.panel.show(f)
				u.markSpoken(f.Playing)
			}
		})
	}
}

// saveDialog asks where to save the last utterance.
func (u *UI) saveDialog() {
	if u.win == nil || len(u.lastPCM) == 0 {
		return
	}
	u.askSavePath("Save", savedName(time.Now(), ".wav"), []string{".wav"}, u.SaveWAV)
}

// SaveWAV writes the last utterance to path in the background and reports
// the outcome in the status line.
func (u *UI) SaveWAV(path string) {
	pcm := u.lastPCM
	if len(pcm) == 0 {
		u.showError("Nothing to save yet: speak something first.")
		return
	}
	if filepath.Ext(path) == "" {
		path += ".wav"
	}
	u.setStatus("Saving " + path + "…")
	go func() {
		err := wav.WriteFile(path, pcm, audio.SampleRate, wav.S16)
		u.post(func() {
			if err != nil {
				u.showError("Save failed: " + err.Error())
				return
			}
			u.setStatus(fmt.Sprintf("Saved %s (%s).", path, formatSeconds(time.Duration(float64(len(pcm))/audio.SampleRate*float64(time.Second)))))
		})
	}()
}

func (u *UI) setStatus(s string) { u.status.SetText(s) }

func (u *UI) showError(msg string) {
	u.errorMsg.SetText(msg)
	u.errorMsg.Show()
}

func (u *UI) clearError() {
	u.errorMsg.SetText("")
	u.errorMsg.Hide()
}

// homeDir is where the save dialog starts when no SaveDir is configured.
func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return "."
}
