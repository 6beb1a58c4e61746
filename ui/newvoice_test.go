package ui

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"talkbox/app/audio"
	"talkbox/engine"
	"talkbox/engine/golden"
	"talkbox/engine/voice"
	"talkbox/engine/wav"
)

// shortEngine is the real engine with every request cut to a few frames:
// the tiny checkpoint's random weights never say EOS.
type shortEngine struct{ *engine.Engine }

func (e shortEngine) Synthesize(ctx context.Context, req engine.Request) (<-chan engine.Chunk, error) {
	req.ExactFrames = 3
	return e.Engine.Synthesize(ctx, req)
}

// TestNewVoiceFlow drives the window on the tiny Base checkpoint: the
// picker asks for a voice, Speak without one opens the New-voice dialog, a
// bad file's error shows in the dialog, a good file plus transcript is
// saved, the voice appears selected, and Speak works with it.
func TestNewVoiceFlow(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-base")
	c := golden.OpenCase(t, "base_icl_en_stream")
	test.NewTempApp(t)
	p, err := audio.Open(audio.Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tmp := t.TempDir()
	lib := &voice.Library{Dir: filepath.Join(tmp, "voices")}
	q := make(chan func(), 4096)
	u := New(Config{
		Models: []Model{{Name: "tiny base", Dir: dir}},
		Open: func(dir string, _ OpenOptions) (Engine, error) {
			e, err := engine.Open(context.Background(), dir, engine.Options{Backend: engine.BackendCPU})
			if err != nil {
				return nil, err
			}
			return shortEngine{e}, nil
		},
		Player: p,
		Post:   func(f func()) { q <- f },
		Voices: lib,
	})
	win := test.NewTempWindow(t, u.Content())
	win.Resize(fyne.NewSize(1000, 700))
	u.Bind(win)
	u.Start()
	defer func() {
		u.Close()
		if cur := u.cur; cur != nil {
			<-cur.Done()
		}
	}()
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.After(120 * time.Second)
		for !cond() {
			select {
			case f := <-q:
				f()
			case <-deadline:
				t.Fatalf("timed out waiting for %s (status %q, error %q)", what, u.status.Text, u.errorMsg.Text)
			}
		}
	}
	wait("the model", func() bool { return !u.speakBtn.Disabled() || u.errorMsg.Visible() })
	if !u.cloning() {
		t.Fatalf("tiny base not offered for cloning (error %q)", u.errorMsg.Text)
	}
	if got := u.voice.Options; len(got) != 1 || got[0] != newVoiceLabel {
		t.Fatalf("empty library: picker %q", got)
	}
	if !strings.Contains(u.voice.PlaceHolder, newVoiceLabel) {
		t.Errorf("placeholder %q does not point at %s", u.voice.PlaceHolder, newVoiceLabel)
	}
	// Speak with no voice asks for one instead of failing in the engine.
	u.text.SetText("Hello there.")
	u.Speak()
	if u.cur != nil || !u.errorMsg.Visible() || !strings.Contains(u.errorMsg.Text, "cloned from a recording") {
		t.Fatalf("Speak without a voice: speaking %v, error %q", u.cur != nil, u.errorMsg.Text)
	}

	d := u.NewVoice()
	bad := filepath.Join(tmp, "notes.wav")
	os.WriteFile(bad, []byte("these are my notes, not audio"), 0o644)
	d.LoadFile(bad)
	if !d.errMsg.Visible() || !strings.Contains(d.errMsg.Text, "not a WAV or FLAC") || !d.saveBtn.Disabled() {
		t.Fatalf("bad file: error %q, save enabled %v", d.errMsg.Text, !d.saveBtn.Disabled())
	}
	short := filepath.Join(tmp, "short.wav")
	wav.WriteFile(short, c.F32("ref_audio")[:12000], 24000, wav.F32)
	d.LoadFile(short)
	if !strings.Contains(d.errMsg.Text, "too short") {
		t.Fatalf("0.5 s file: error %q", d.errMsg.Text)
	}
	ref := filepath.Join(tmp, "anna.wav")
	if err := wav.WriteFile(ref, c.F32("ref_audio"), 24000, wav.F32); err != nil {
		t.Fatal(err)
	}
	d.LoadFile(ref)
	if d.errMsg.Visible() || d.saveBtn.Disabled() || d.name.Text != "anna" || !strings.Contains(d.clipInfo.Text, "3.0 s") {
		t.Fatalf("good file: error %q, name %q, info %q", d.errMsg.Text, d.name.Text, d.clipInfo.Text)
	}
	d.name.SetText("../anna")
	d.Save()
	if !strings.Contains(d.errMsg.Text, "another name") {
		t.Fatalf("path name: error %q", d.errMsg.Text)
	}
	d.name.SetText("Anna")
	refText, _ := c.Input("ref_text")
	d.transcript.SetText(refText.(string))
	d.Save()
	wait("the voice to be saved", func() bool { return u.voice.Selected == "Anna" || d.errMsg.Visible() })
	if d.errMsg.Visible() {
		t.Fatalf("save: %q", d.errMsg.Text)
	}
	if got := u.voice.Options; len(got) != 2 || got[0] != "Anna" || got[1] != newVoiceLabel {
		t.Fatalf("picker after save: %q", got)
	}
	saved, err := lib.Load("anna")
	if err != nil || saved.Mode() != "icl" || len(saved.Derived) != 1 {
		t.Fatalf("saved voice: %+v, %v", saved, err)
	}

	u.clearError()
	u.Speak()
	if u.cur == nil {
		t.Fatalf("Speak with a cloned voice did not start: %q", u.errorMsg.Text)
	}
	utt := u.cur
	wait("speech to finish", func() bool { return u.cur == nil })
	end := utt.Outcome()
	if end.Err != nil || len(end.PCM) != 3*1920 {
		t.Fatalf("speech: err %v, %d samples", end.Err, len(end.PCM))
	}
	if req := utt.Request(); req.Clone == nil || req.Clone.Name != "Anna" || req.Voice != "" {
		t.Errorf("request voice %q, clone %v", req.Voice, req.Clone)
	}
	// Picking New voice… opens the dialog and keeps the current choice.
	u.voice.SetSelected(newVoiceLabel)
	if u.voice.Selected != "Anna" {
		t.Errorf("after New voice…: selected %q", u.voice.Selected)
	}
}

// TestNewVoiceRecording: Record counts down, shows the level while the
// (stand-in) microphone records, and a recording shorter than 3 s or a
// missing microphone is explained in the dialog.
func TestNewVoiceRecording(t *testing.T) {
	test.NewTempApp(t)
	q := make(chan func(), 4096)
	var give []float32
	var giveErr error
	levels := 0
	u := New(Config{Post: func(f func()) { q <- f }, Voices: &voice.Library{Dir: t.TempDir()},
		Record: func(ctx context.Context, max time.Duration, level func(float32, time.Duration)) ([]float32, error) {
			if max != recordMax {
				t.Errorf("max %v", max)
			}
			level(0.5, time.Second)
			return give, giveErr
		}})
	u.eng = baseStandIn{}
	d := u.NewVoice()
	if d == nil || d.recordBtn.Hidden {
		t.Fatal("no Record button with a recorder configured")
	}
	run := func() {
		t.Helper()
		d.record()
		if !d.meter.Visible() || !d.recordBtn.Disabled() {
			t.Fatal("recording: meter hidden or Record enabled")
		}
		deadline := time.After(20 * time.Second)
		for d.recCancel != nil {
			select {
			case f := <-q:
				f()
				if d.level.Value == 0.5 {
					levels++
				}
			case <-deadline:
				t.Fatal("recording never ended")
			}
		}
	}
	give = make([]float32, 24000) // 1 s
	for i := range give {
		give[i] = float32(0.3 * math.Sin(float64(i)/7))
	}
	run()
	if !strings.Contains(d.errMsg.Text, "too short") || !d.saveBtn.Disabled() {
		t.Errorf("1 s recording: error %q", d.errMsg.Text)
	}
	give = append(give, append(append([]float32(nil), give...), give...)...) // 3 s
	run()
	if d.errMsg.Visible() || d.clip == nil || d.saveBtn.Disabled() || !strings.Contains(d.clipInfo.Text, "microphone: 3.0 s") {
		t.Errorf("3 s recording: error %q, info %q", d.errMsg.Text, d.clipInfo.Text)
	}
	give, giveErr = nil, audio.ErrNoMicrophone
	run()
	if !strings.Contains(d.errMsg.Text, "No microphone") {
		t.Errorf("no microphone: error %q", d.errMsg.Text)
	}
	if levels == 0 {
		t.Error("the level meter never moved")
	}
	if d.meter.Visible() {
		t.Error("meter still shown after recording")
	}
}

// baseStandIn is a loaded Base model as far as the dialog is concerned.
type baseStandIn struct{ Engine }

func (baseStandIn) IsBase() bool                            { return true }
func (baseStandIn) CloneEncoders() (*voice.Encoders, error) { return nil, errors.New("stand-in") }
