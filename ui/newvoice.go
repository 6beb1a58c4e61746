package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/audio"
	"talkbox/engine"
	"talkbox/engine/audioin"
	"talkbox/engine/voice"
)

// Recording limits of the New-voice dialog: at least 3 s of speech for a
// usable x-vector, at most 20 s (longer adds little and costs prompt rows).
const (
	recordMin       = 3 * time.Second
	recordMax       = 20 * time.Second
	recordCountdown = 3
)

// transcriptHelp explains the optional transcript box.
const transcriptHelp = "Optional: type exactly what the recording says. With a transcript the clone follows " +
	"the recording more closely (its sound and manner of speaking); without one only the voice's timbre is used."

// NewVoiceDialog is the dialog that makes a cloned voice from a file or a
// microphone recording. All fields are UI-goroutine state.
type NewVoiceDialog struct {
	u          *UI
	dlg        dialog.Dialog
	name       *widget.Entry
	transcript *widget.Entry
	clipInfo   *widget.Label
	errMsg     *widget.Label
	level      *widget.ProgressBar
	countdown  *widget.Label
	meter      *fyne.Container
	recordBtn  *widget.Button
	stopBtn    *widget.Button
	previewBtn *widget.Button
	saveBtn    *widget.Button
	content    fyne.CanvasObject

	clip      *audioin.Clip
	recCancel context.CancelFunc
	busy      bool
}

// NewVoice opens the New-voice dialog (UI goroutine). It returns the dialog
// so tests can drive it; nil when no Base model is loaded.
func (u *UI) NewVoice() *NewVoiceDialog {
	if !u.cloning() {
		u.showError("Voices are cloned with a Base model: pick one in the Model list first.")
		return nil
	}
	d := &NewVoiceDialog{u: u}
	d.name = widget.NewEntry()
	d.name.SetPlaceHolder("A name for the voice, e.g. Anna")
	d.transcript = widget.NewMultiLineEntry()
	d.transcript.SetPlaceHolder("What the recording says (optional)")
	d.transcript.SetMinRowsVisible(3)
	d.transcript.Wrapping = fyne.TextWrapWord
	help := widget.NewLabel(transcriptHelp)
	help.Wrapping = fyne.TextWrapWord
	help.Importance = widget.LowImportance
	d.clipInfo = widget.NewLabel("No recording yet: choose a file (WAV or FLAC) or record 3-20 s of speech.")
	d.clipInfo.Wrapping = fyne.TextWrapWord
	d.errMsg = widget.NewLabel("")
	d.errMsg.Importance = widget.DangerImportance
	d.errMsg.Wrapping = fyne.TextWrapWord
	d.errMsg.Hide()
	d.level = widget.NewProgressBar()
	d.level.TextFormatter = func() string { return "" }
	d.countdown = widget.NewLabel("")
	choose := widget.NewButtonWithIcon("Choose file…", theme.FolderOpenIcon(), d.chooseFile)
	d.recordBtn = widget.NewButtonWithIcon("Record", theme.MediaRecordIcon(), d.record)
	d.stopBtn = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), d.stopRecording)
	d.stopBtn.Disable()
	d.previewBtn = widget.NewButtonWithIcon("Preview", theme.MediaPlayIcon(), d.preview)
	d.previewBtn.Disable()
	sources := container.NewHBox(choose, d.recordBtn, d.stopBtn, d.previewBtn)
	if u.cfg.Record == nil {
		d.recordBtn.Hide()
		d.stopBtn.Hide()
	}
	// The level meter shows only while recording.
	d.meter = container.NewBorder(nil, nil, widget.NewLabel("Level"), d.countdown, d.level)
	d.meter.Hide()
	form := container.NewVBox(
		container.NewBorder(nil, nil, widget.NewLabel("Name"), nil, d.name),
		widget.NewLabelWithStyle("Reference recording", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		sources, d.meter, d.clipInfo,
		widget.NewLabelWithStyle("Transcript", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		d.transcript, help, d.errMsg,
	)
	d.saveBtn = widget.NewButtonWithIcon("Save", theme.DocumentSaveIcon(), d.Save)
	d.saveBtn.Importance = widget.HighImportance
	d.saveBtn.Disable()
	cancel := widget.NewButton("Cancel", d.close)
	d.content = container.NewBorder(nil, container.NewHBox(layout.NewSpacer(), cancel, d.saveBtn), nil, nil, form)
	if u.win != nil {
		d.dlg = dialog.NewCustomWithoutButtons("New voice", d.content, u.win)
		d.dlg.Resize(fyne.NewSize(620, 560))
		d.dlg.Show()
	}
	return d
}

// Content is the dialog's body (tests render it without a window).
func (d *NewVoiceDialog) Content() fyne.CanvasObject { return d.content }

func (d *NewVoiceDialog) fail(msg string) {
	d.errMsg.SetText(msg)
	d.errMsg.Show()
}

func (d *NewVoiceDialog) clearError() { d.errMsg.Hide() }

func (d *NewVoiceDialog) close() {
	d.stopRecording()
	if d.dlg != nil {
		d.dlg.Hide()
	}
}

func (d *NewVoiceDialog) chooseFile() {
	if d.u.win == nil {
		return
	}
	fd := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil {
			d.fail(err.Error())
			return
		}
		if r == nil {
			return // cancelled
		}
		go func() {
			defer r.Close()
			b, err := io.ReadAll(io.LimitReader(r, 512<<20))
			name := r.URI().Name()
			var clip *audioin.Clip
			if err == nil {
				clip, err = audioin.Load(b)
			}
			d.u.post(func() { d.setClip(clip, name, err) })
		}()
	}, d.u.win)
	fd.SetFilter(storage.NewExtensionFileFilter([]string{".wav", ".flac", ".WAV", ".FLAC"}))
	fd.Show()
}

// LoadFile reads a reference file (the file chooser's path, and tests').
// It blocks; call it off the UI goroutine for large files.
func (d *NewVoiceDialog) LoadFile(path string) {
	clip, err := audioin.LoadFile(path)
	d.setClip(clip, filepath.Base(path), err)
}

// setClip shows a loaded clip or the reason it cannot be used.
func (d *NewVoiceDialog) setClip(clip *audioin.Clip, source string, err error) {
	if err != nil {
		d.fail(clipError(err))
		return
	}
	d.clearError()
	d.clip = clip
	info := fmt.Sprintf("%s: %.1f s (%s).", source, clip.Seconds(), clip.Source.Format)
	if len(clip.Notices) > 0 {
		info += " Note: " + strings.Join(clip.Notices, "; ") + "."
	}
	d.clipInfo.SetText(info)
	d.previewBtn.Enable()
	d.saveBtn.Enable()
	if strings.TrimSpace(d.name.Text) == "" && source != "" && source != "microphone" {
		d.name.SetText(strings.TrimSuffix(source, filepath.Ext(source)))
	}
}

// clipError says what is wrong with the audio in words for the dialog.
func clipError(err error) string {
	switch {
	case errors.Is(err, audioin.ErrNotAudio):
		return "This is not a WAV or FLAC recording: " + err.Error()
	case errors.Is(err, audioin.ErrTruncated):
		return "The file is cut short (truncated): " + err.Error()
	case errors.Is(err, audioin.ErrEmpty), errors.Is(err, audioin.ErrTooShort):
		return "The recording is too short: record at least 3 seconds of speech. (" + err.Error() + ")"
	case errors.Is(err, audioin.ErrSilent):
		return "The recording is silent: check the microphone and its level. (" + err.Error() + ")"
	case errors.Is(err, audio.ErrNoMicrophone):
		return "No microphone: " + err.Error() + ". Choose a file instead."
	}
	return err.Error()
}

// record counts down, then captures up to recordMax from the microphone,
// showing the level; Stop ends it early.
func (d *NewVoiceDialog) record() {
	rec := d.u.cfg.Record
	if rec == nil || d.recCancel != nil {
		return
	}
	d.clearError()
	ctx, cancel := context.WithCancel(context.Background())
	d.recCancel = cancel
	d.recordBtn.Disable()
	d.stopBtn.Enable()
	d.meter.Show()
	go func() {
		for i := recordCountdown; i > 0; i-- {
			n := i
			d.u.post(func() { d.countdown.SetText(fmt.Sprintf("Recording in %d…", n)) })
			select {
			case <-ctx.Done():
				d.u.post(d.recordingDone)
				return
			case <-time.After(time.Second):
			}
		}
		pcm, err := rec(ctx, recordMax, func(peak float32, el time.Duration) {
			d.u.post(func() {
				d.level.SetValue(float64(min(peak, 1)))
				d.countdown.SetText(fmt.Sprintf("● %.0f / %.0f s", el.Seconds(), recordMax.Seconds()))
			})
		})
		var clip *audioin.Clip
		if err == nil {
			if len(pcm) < int(recordMin.Seconds()*audio.SampleRate) {
				err = fmt.Errorf("%w: %.1f s; record at least %.0f s", audioin.ErrTooShort, float64(len(pcm))/audio.SampleRate, recordMin.Seconds())
			} else {
				clip, err = audioin.Prepare(pcm, audioin.Source{Format: "microphone", SampleRate: audio.SampleRate, Channels: 1, Frames: len(pcm)})
			}
		}
		d.u.post(func() {
			d.recordingDone()
			d.setClip(clip, "microphone", err)
		})
	}()
}

func (d *NewVoiceDialog) stopRecording() {
	if d.recCancel != nil {
		d.recCancel()
	}
}

func (d *NewVoiceDialog) recordingDone() {
	if d.recCancel != nil {
		d.recCancel()
		d.recCancel = nil
	}
	d.recordBtn.Enable()
	d.stopBtn.Disable()
	d.level.SetValue(0)
	d.countdown.SetText("")
	d.meter.Hide()
}

// preview plays the reference clip.
func (d *NewVoiceDialog) preview() {
	if d.clip == nil || d.u.cfg.Player == nil {
		return
	}
	pcm := d.clip.Samples
	ch := make(chan engine.Chunk, 2)
	ch <- engine.Chunk{PCM: pcm, Frames: 1}
	ch <- engine.Chunk{Final: true}
	close(ch)
	d.u.cfg.Player.Stop()
	go func() { _, _ = d.u.cfg.Player.Play(context.Background(), ch, audio.PlayOptions{}) }()
}

// Save checks the name, computes the voice's data with the loaded model's
// encoders (seconds on a real model, so off the UI goroutine), stores it and
// selects it. Errors stay in the dialog.
func (d *NewVoiceDialog) Save() {
	if d.busy {
		return
	}
	name := strings.TrimSpace(d.name.Text)
	lib := d.u.cfg.Voices
	switch err := voice.ValidName(name); {
	case d.clip == nil:
		d.fail("Choose a file or record your voice first.")
		return
	case err != nil:
		d.fail("Pick another name: " + err.Error())
		return
	case lib.Exists(name):
		d.fail(fmt.Sprintf("A voice called %q exists already: pick another name.", name))
		return
	}
	cl, ok := d.u.eng.(cloner)
	if !ok {
		d.fail("The loaded model cannot clone voices.")
		return
	}
	d.clearError()
	d.busy = true
	d.saveBtn.Disable()
	d.clipInfo.SetText("Analysing the voice…")
	v := &voice.Voice{Name: name, Transcript: strings.TrimSpace(d.transcript.Text), Audio: d.clip.Samples,
		Source: d.clip.Source.Format, Created: time.Now()}
	go func() {
		enc, err := cl.CloneEncoders()
		if err == nil {
			_, _, err = enc.Derive(v)
		}
		if err == nil {
			err = lib.Save(v)
		}
		d.u.post(func() {
			d.busy = false
			if err != nil {
				d.saveBtn.Enable()
				d.fail("Could not save the voice: " + err.Error())
				return
			}
			d.close()
			d.u.refreshClones(v.Name)
			d.u.setStatus(fmt.Sprintf("Added voice %q (%s). Type text and press Speak.", v.Name, modeWords(v.Mode())))
		})
	}()
}

func modeWords(mode string) string {
	if mode == "icl" {
		return "with its transcript"
	}
	return "voice only"
}
