package ui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"talkbox/app/hub"
)

// modelsPanel is the Models dialog's content: the installed models (size,
// type, completeness; resume or delete) and the known ones to download.
type modelsPanel struct {
	u       *UI
	rows    *fyne.Container
	choice  *widget.Select
	repos   map[string]string // choice label -> repository
	getBtn  *widget.Button
	bar     *widget.ProgressBar
	status  *widget.Label
	cancel  context.CancelFunc
	content fyne.CanvasObject
}

// modelsDialog opens the Models dialog.
func (u *UI) modelsDialog() {
	if u.cfg.Store == nil || u.win == nil {
		return
	}
	p := u.newModelsPanel()
	d := dialog.NewCustom("Models", "Close", container.NewGridWrap(fyne.NewSize(640, 420), p.content), u.win)
	d.SetOnClosed(func() {
		if p.cancel != nil {
			p.cancel() // a download stops; what arrived is kept for Resume
		}
	})
	d.Show()
}

func (u *UI) newModelsPanel() *modelsPanel {
	p := &modelsPanel{u: u, rows: container.NewVBox(), repos: map[string]string{}}
	p.choice = widget.NewSelect(nil, nil)
	p.getBtn = widget.NewButtonWithIcon("Download…", theme.DownloadIcon(), func() {
		if repo := p.repos[p.choice.Selected]; repo != "" {
			p.plan(repo)
		}
	})
	p.bar = widget.NewProgressBar()
	p.bar.Hide()
	p.status = widget.NewLabel("")
	p.status.Wrapping = fyne.TextWrapWord
	installed := widget.NewLabelWithStyle("Installed", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	more := widget.NewLabelWithStyle("Download another", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.content = container.NewBorder(installed,
		container.NewVBox(widget.NewSeparator(), more, container.NewBorder(nil, nil, nil, p.getBtn, p.choice), p.bar, p.status),
		nil, nil, container.NewVScroll(p.rows))
	p.refresh()
	return p
}

// modelRowText is the second line of an installed model's row.
func modelRowText(in hub.Installed) string {
	parts := []string{cmp.Or(strings.TrimSpace(in.SizeName+" "+hub.TypeLabel(in.Type)), "unknown type"), hub.FormatBytes(in.Size + in.Partial)}
	switch {
	case in.Complete:
		parts = append(parts, "complete")
	default:
		if pct, ok := in.Percent(); ok {
			parts = append(parts, fmt.Sprintf("download %d%% done", pct))
		} else {
			parts = append(parts, "incomplete: "+in.Problem)
		}
	}
	return strings.Join(parts, " · ")
}

// refresh relists the store.
func (p *modelsPanel) refresh() {
	list, err := p.u.cfg.Store.List()
	p.rows.RemoveAll()
	if err != nil {
		p.status.SetText("Could not list the models: " + err.Error())
	}
	have := map[string]bool{}
	for _, in := range list {
		in := in
		have[strings.ToLower(in.Repo)] = true
		name := widget.NewLabelWithStyle(in.DisplayName(), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		detail := widget.NewLabel(modelRowText(in))
		detail.Truncation = fyne.TextTruncateEllipsis
		del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), func() { p.confirmDelete(in) })
		buttons := container.NewHBox()
		if !in.Complete && in.Repo != "" {
			label := "Resume"
			if pct, ok := in.Percent(); ok {
				label = fmt.Sprintf("Resume, %d%% done", pct)
			}
			buttons.Add(widget.NewButtonWithIcon(label, theme.DownloadIcon(), func() { p.plan(in.Repo) }))
		}
		buttons.Add(del)
		p.rows.Add(container.NewBorder(nil, nil, nil, buttons, container.NewVBox(name, detail)))
	}
	if len(list) == 0 {
		p.rows.Add(widget.NewLabel("No model installed yet."))
	}
	var labels []string
	p.repos = map[string]string{}
	for _, k := range hub.Known {
		if have[strings.ToLower(k.Repo)] {
			continue
		}
		l := k.DisplayName() + " — " + k.About
		p.repos[l] = k.Repo
		labels = append(labels, l)
	}
	p.choice.SetOptions(labels)
	if len(labels) > 0 {
		p.choice.SetSelectedIndex(0)
		p.getBtn.Enable()
	} else {
		p.choice.ClearSelected()
		p.getBtn.Disable()
	}
	p.rows.Refresh()
}

// plan asks the Hub how big the download is, then shows size and free disk
// before anything is fetched, refusing when the disk is too small.
func (p *modelsPanel) plan(repo string) {
	if p.cancel != nil {
		return // one download at a time
	}
	p.status.SetText("Asking Hugging Face for the size of " + hub.DisplayName(repo, "") + "…")
	store := p.u.cfg.Store
	go func() {
		plan, err := store.Plan(context.Background(), repo)
		p.u.post(func() {
			if err != nil {
				p.status.SetText(firstRunErrorText(err))
				return
			}
			free := "unknown free space"
			if plan.FreeKnown {
				free = hub.FormatBytes(plan.Free) + " free on disk"
			}
			msg := fmt.Sprintf("%s: %s in all, %s still to download; %s.", hub.DisplayName(repo, ""),
				hub.FormatBytes(plan.Total), hub.FormatBytes(plan.Need), free)
			if !plan.Fits() {
				p.status.SetText("Not enough disk space. " + plan.Shortfall() + ".")
				dialog.ShowInformation("Not enough disk space", msg+"\n\n"+plan.Shortfall()+".", p.u.win)
				return
			}
			p.status.SetText(msg)
			dialog.ShowConfirm("Download "+hub.DisplayName(repo, ""), msg+"\n\nDownload it now?", func(ok bool) {
				if ok {
					p.pull(repo)
				}
			}, p.u.win)
		})
	}()
}

// pull downloads (or resumes) repo with progress; Cancel keeps what arrived.
func (p *modelsPanel) pull(repo string) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.getBtn.SetText("Cancel download")
	p.getBtn.OnTapped = cancel
	p.getBtn.Enable()
	p.bar.SetValue(0)
	p.bar.Show()
	var progress latestOnly[hub.Progress]
	show := func(pr hub.Progress) {
		if p.cancel == nil {
			return
		}
		p.bar.SetValue(pr.Fraction())
		p.status.SetText(firstRunProgressText(pr))
	}
	store := p.u.cfg.Store
	go func() {
		dir, err := store.Pull(ctx, repo, func(pr hub.Progress) { progress.offer(pr, p.u.post, show) })
		cancel()
		p.u.post(func() {
			p.cancel = nil
			p.getBtn.SetText("Download…")
			p.getBtn.OnTapped = func() {
				if r := p.repos[p.choice.Selected]; r != "" {
					p.plan(r)
				}
			}
			p.bar.Hide()
			switch {
			case err == nil:
				p.status.SetText(hub.DisplayName(repo, "") + " is ready.")
				p.u.AddModel(p.u.modelFor(dir))
			case errors.Is(err, context.Canceled):
				p.status.SetText("Download stopped. What arrived is kept; Resume continues from there.")
			default:
				p.status.SetText(firstRunErrorText(err))
			}
			p.refresh()
		})
	}()
}

// confirmDelete asks, then deletes a model folder. The loaded model is
// refused: pick another one first.
func (p *modelsPanel) confirmDelete(in hub.Installed) {
	u := p.u
	if u.modelIdx >= 0 && u.modelIdx < len(u.cfg.Models) && sameDir(u.cfg.Models[u.modelIdx].Dir, in.Dir) {
		p.status.SetText(in.DisplayName() + " is the model in use; pick another model before deleting it.")
		return
	}
	msg := fmt.Sprintf("Delete %s (%s) from %s?", in.DisplayName(), hub.FormatBytes(in.Size+in.Partial), filepath.Dir(in.Dir))
	dialog.ShowConfirm("Delete model", msg, func(ok bool) {
		if !ok {
			return
		}
		if err := u.cfg.Store.Delete(in.Dir); err != nil {
			p.status.SetText("Could not delete: " + err.Error())
			return
		}
		u.removeModel(in.Dir)
		p.status.SetText("Deleted " + in.DisplayName() + ".")
		p.refresh()
	}, u.win)
}

// modelFor names a folder for the picker.
func (u *UI) modelFor(dir string) Model {
	if u.cfg.ModelFor != nil {
		return u.cfg.ModelFor(dir)
	}
	return Model{Name: filepath.Base(dir), Dir: dir}
}

// removeModel takes a deleted model out of the picker.
func (u *UI) removeModel(dir string) {
	for i, m := range u.cfg.Models {
		if !sameDir(m.Dir, dir) {
			continue
		}
		cur := ""
		if u.modelIdx >= 0 && u.modelIdx < len(u.cfg.Models) {
			cur = u.cfg.Models[u.modelIdx].Dir
		}
		u.cfg.Models = append(u.cfg.Models[:i:i], u.cfg.Models[i+1:]...)
		names := make([]string, len(u.cfg.Models))
		for j, m := range u.cfg.Models {
			names[j] = m.Name
			if m.Dir == cur {
				u.modelIdx = j
			}
		}
		u.model.Options = names
		u.model.Refresh()
		return
	}
}

func sameDir(a, b string) bool { return filepath.Clean(a) == filepath.Clean(b) }
