package ui

import (
	"fyne.io/fyne/v2/theme"
)

const (
	pauseLabel  = "Pause (Space)"
	resumeLabel = "Resume (Space)"
)

// TogglePause pauses the speech being played, or resumes it. Synthesis
// goes on while paused, so resuming has the audio ready. UI goroutine.
func (u *UI) TogglePause() {
	if u.cur == nil || u.cfg.Player == nil {
		return
	}
	if u.cfg.Player.Paused() {
		u.cfg.Player.Resume()
		u.showPaused(false)
		u.setStatus("Speaking…")
		return
	}
	u.cfg.Player.Pause()
	u.showPaused(true)
	u.setStatus("Paused. Press Space or Resume to go on.")
}

// showPaused sets the button to what a press will do next.
func (u *UI) showPaused(paused bool) {
	if paused {
		u.pauseBtn.SetText(resumeLabel)
		u.pauseBtn.SetIcon(theme.MediaPlayIcon())
		return
	}
	u.pauseBtn.SetText(pauseLabel)
	u.pauseBtn.SetIcon(theme.MediaPauseIcon())
}
