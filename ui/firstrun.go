package ui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/hub"
)

// FirstRunPuller downloads a model and returns its folder. *hub.Store
// implements it. Pull runs on a goroutine of the panel; progress is called on
// that goroutine.
type FirstRunPuller interface {
	Pull(ctx context.Context, repo string, progress func(hub.Progress)) (dir string, err error)
}

var _ FirstRunPuller = (*hub.Store)(nil)

// FirstRunPanel is shown when no model is installed: it offers the download,
// shows its progress, lets the user cancel and retry (a retry resumes), and
// hands the model folder to onReady when the download is complete.
type FirstRunPanel struct {
	widget.BaseWidget

	puller  FirstRunPuller
	onReady func(dir string)
	post    func(func())      // runs work on the UI goroutine (fyne.Do)
	repos   map[string]string // choice label -> repository

	choice   *widget.Select
	download *widget.Button
	cancel   *widget.Button
	bar      *widget.ProgressBar
	status   *widget.Label
	problem  *widget.Label
	content  fyne.CanvasObject

	// Only the UI goroutine touches these.
	running  bool
	stop     context.CancelFunc
	finished chan struct{} // closed once an attempt's outcome is on screen (tests wait on it)

	// Progress arrives on the download goroutine.
	reports latestOnly[hub.Progress]
}

// NewFirstRunPanel builds the panel. onReady is called on the UI goroutine
// with the downloaded model's folder; it should start slow work (loading the
// model) on its own goroutine. post hands work from the download goroutine to
// the UI goroutine, as Config.Post does for the window; nil means fyne.Do.
// The panel starts nothing until the user presses Download.
func NewFirstRunPanel(p FirstRunPuller, onReady func(dir string), post func(func())) *FirstRunPanel {
	if post == nil {
		post = fyne.Do
	}
	fr := &FirstRunPanel{puller: p, onReady: onReady, post: post, repos: map[string]string{}}
	var labels []string
	for _, k := range hub.Known {
		label := k.Alias + " (" + k.About + ")"
		fr.repos[label] = k.Repo
		labels = append(labels, label)
	}
	fr.choice = widget.NewSelect(labels, nil)
	fr.choice.SetSelectedIndex(0)
	fr.download = widget.NewButton("Download", fr.start)
	fr.download.Importance = widget.HighImportance
	fr.cancel = widget.NewButton("Cancel", fr.cancelDownload)
	fr.cancel.Hide()
	fr.bar = widget.NewProgressBar()
	fr.bar.Hide()
	fr.status = widget.NewLabel("")
	fr.status.Wrapping = fyne.TextWrapWord
	fr.problem = widget.NewLabel("")
	fr.problem.Wrapping = fyne.TextWrapWord
	fr.problem.Importance = widget.DangerImportance
	fr.problem.Hide()

	title := widget.NewLabelWithStyle("No voice model installed", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	about := widget.NewLabel("Talkbox needs a Qwen3-TTS model to speak. It is downloaded once from " +
		"Hugging Face and kept in your model folder; an interrupted download continues where it stopped.")
	about.Wrapping = fyne.TextWrapWord
	fr.content = container.NewVBox(title, about, fr.choice, fr.bar, fr.status, fr.problem,
		container.NewHBox(fr.download, fr.cancel))
	fr.ExtendBaseWidget(fr)
	return fr
}

// CreateRenderer implements fyne.Widget.
func (fr *FirstRunPanel) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(fr.content)
}

// start begins (or resumes) the download of the chosen model.
func (fr *FirstRunPanel) start() {
	if fr.running {
		return
	}
	repo := fr.repos[fr.choice.Selected]
	if repo == "" {
		repo = hub.DefaultRepo
	}
	ctx, stop := context.WithCancel(context.Background())
	fr.running, fr.stop = true, stop
	finished := make(chan struct{})
	fr.finished = finished
	fr.choice.Disable()
	fr.download.Hide()
	fr.cancel.Enable()
	fr.cancel.Show()
	fr.problem.Hide()
	fr.bar.SetValue(0)
	fr.bar.Show()
	fr.status.SetText("Contacting Hugging Face…")

	go func() {
		dir, err := fr.puller.Pull(ctx, repo, fr.progress)
		stop()
		fr.post(func() {
			fr.finish(dir, err)
			close(finished)
		})
	}()
}

func (fr *FirstRunPanel) cancelDownload() {
	if fr.stop != nil {
		fr.stop()
	}
	fr.cancel.Disable()
	fr.status.SetText("Stopping…")
}

// progress runs on the download goroutine.
func (fr *FirstRunPanel) progress(p hub.Progress) {
	fr.reports.offer(p, fr.post, fr.showProgress)
}

func (fr *FirstRunPanel) showProgress(p hub.Progress) {
	if !fr.running {
		return // a late report after the outcome is shown
	}
	fr.bar.SetValue(p.Fraction())
	fr.status.SetText(firstRunProgressText(p))
}

// finish shows the outcome of an attempt.
func (fr *FirstRunPanel) finish(dir string, err error) {
	fr.running, fr.stop = false, nil
	fr.cancel.Hide()
	fr.choice.Enable()
	switch {
	case err == nil:
		fr.bar.SetValue(1)
		fr.status.SetText("Download complete. Loading the model…")
		fr.choice.Disable()
		if fr.onReady != nil {
			fr.onReady(dir)
		}
		return
	case errors.Is(err, context.Canceled):
		fr.status.SetText("Download cancelled. What arrived is kept; Resume continues from there.")
		fr.download.SetText("Resume download")
	default:
		fr.status.SetText("The download did not finish.")
		fr.problem.SetText(firstRunErrorText(err))
		fr.problem.Show()
		fr.download.SetText("Retry")
	}
	fr.download.Show()
}

// firstRunProgressText is the status line under the bar.
func firstRunProgressText(p hub.Progress) string {
	switch p.Event {
	case hub.EventListing:
		return "Asking Hugging Face for the file list…"
	case hub.EventVerifying:
		return fmt.Sprintf("Checking %s, already on disk…", p.File)
	case hub.EventRetry:
		return "Connection trouble, retrying: " + p.Note
	case hub.EventDone:
		return "Download complete."
	}
	s := fmt.Sprintf("%s of %s", hub.FormatBytes(p.Done), hub.FormatBytes(p.Total))
	if p.File != "" {
		s = fmt.Sprintf("%s (file %d of %d) · %s", p.File, p.FileIndex, p.FileCount, s)
	}
	if p.Rate > 0 {
		s += " · " + hub.FormatBytes(int64(p.Rate)) + "/s"
	}
	if p.ETA >= 0 {
		s += " · about " + p.ETA.Round(time.Second).String() + " left"
	}
	return s
}

// firstRunErrorText leads with what the user can do; the hub's message
// carries the detail.
func firstRunErrorText(err error) string {
	lead := ""
	switch {
	case errors.Is(err, hub.ErrNetwork):
		lead = "Hugging Face cannot be reached. Check the network connection, then retry; the download resumes."
	case errors.Is(err, hub.ErrAuth):
		lead = "Hugging Face refused access. Set HF_TOKEN (and accept the model's licence on its page), then retry."
	case errors.Is(err, hub.ErrNotFound):
		lead = "The model was not found on Hugging Face."
	case errors.Is(err, hub.ErrDiskFull):
		lead = "The disk is full. Free some space, then retry; the download resumes."
	case errors.Is(err, hub.ErrChecksum):
		lead = "A downloaded file was damaged and has been deleted. Retry to fetch it again."
	case errors.Is(err, hub.ErrBusy):
		lead = "Another Talkbox is downloading this model. Wait for it to finish, then retry."
	}
	if lead == "" {
		return err.Error()
	}
	return lead + "\n\n" + err.Error()
}
