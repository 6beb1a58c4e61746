package ui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/audio"
	"talkbox/app/export"
	"talkbox/engine"
	"talkbox/engine/audioenc"
)

// exportDialog asks where to export the text box's text, then renders it.
func (u *UI) exportDialog() {
	if u.win == nil || u.eng == nil {
		return
	}
	if strings.TrimSpace(u.currentText()) == "" {
		u.showError("Type some text to export first.")
		return
	}
	ext := "." + u.prefs.ExportFormat
	if f, err := audioenc.ParseFormat(u.prefs.ExportFormat); err == nil {
		ext = f.Ext()
	}
	u.askSavePath("Export", savedName(time.Now(), ext), []string{".wav", ".flac", ".ogg", ".opus"}, u.Export)
}

// exportRequest is the request Speak would send for the current pickers.
func (u *UI) exportRequest() (engine.Request, error) {
	req := engine.Request{Text: u.currentText(), Language: "auto"}
	if len(u.voices.labels) > 0 {
		v, err := u.voices.value(u.voice.Selected)
		if err != nil {
			return req, errors.New("pick a voice first")
		}
		req.Voice = v
	}
	if l, err := u.langs.value(u.lang.Selected); err == nil {
		req.Language = l
	}
	if u.instructR.Visible() {
		req.Instruct = strings.TrimSpace(u.instruct.Text)
	}
	return req, nil
}

// Export renders the text box's text to path at engine speed (the format
// from the extension; WAV when it has none), with a progress dialog whose
// Cancel leaves no file behind.
func (u *UI) Export(path string) {
	if u.eng == nil || u.exporting {
		return
	}
	if filepath.Ext(path) == "" {
		path += ".wav"
	}
	f, err := audioenc.FormatFromPath(path)
	if err != nil {
		u.showError("Export failed: " + err.Error())
		return
	}
	req, err := u.exportRequest()
	if err != nil {
		u.showError("Export: " + err.Error())
		return
	}
	u.prefs.ExportFormat = f.String()
	u.saveSettingsLater()
	u.clearError()

	ctx, cancel := context.WithCancel(context.Background())
	bar := widget.NewProgressBar()
	info := widget.NewLabel("Starting…")
	cancelBtn := widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), func() { cancel() })
	body := container.NewVBox(widget.NewLabel("Exporting to "+filepath.Base(path)), bar, info, container.NewCenter(cancelBtn))
	var dlg dialog.Dialog
	if u.win != nil {
		dlg = dialog.NewCustomWithoutButtons("Export", container.NewGridWrap(fyne.NewSize(420, body.MinSize().Height), body), u.win)
		dlg.Show()
	}
	u.exporting = true
	u.exportBtn.Disable()
	u.setStatus("Exporting " + path + "…")

	// Progress arrives on the render goroutine; one update is queued at a
	// time, so a fast render cannot flood the UI queue.
	var progress latestOnly[export.Progress]
	show := func(p export.Progress) {
		bar.SetValue(p.Fraction)
		info.SetText(fmt.Sprintf("Sentence %d of %d · %s of audio in %s", min(p.Sentence+1, p.Sentences), p.Sentences,
			formatSeconds(p.Audio), formatSeconds(p.Elapsed)))
	}
	job := export.Job{Engine: u.eng, Request: req, SampleRate: audio.SampleRate, Format: f, Path: path,
		Progress: func(p export.Progress) { progress.offer(p, u.post, show) }}
	go func() {
		res, err := export.Render(ctx, job)
		cancel()
		u.post(func() {
			u.exporting = false
			if u.eng != nil {
				u.exportBtn.Enable()
			}
			if dlg != nil {
				dlg.Hide()
			}
			switch {
			case errors.Is(err, context.Canceled):
				u.setStatus("Export cancelled; nothing was written.")
			case err != nil:
				u.setStatus("Export failed.")
				u.showError("Export failed: " + userMessage(err))
			default:
				u.setStatus(fmt.Sprintf("Exported %s: %s of audio in %s (RTF %.2f).", path, formatSeconds(res.Audio),
					formatSeconds(res.Wall), res.RTF))
			}
		})
	}()
}
