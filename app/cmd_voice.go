package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"talkbox/app/hub"
	"talkbox/engine"
	"talkbox/engine/backend"
	"talkbox/engine/voice"
)

func init() {
	register(verb{name: "voice", summary: "cloned voices for Base models: voice add NAME --audio FILE [--text T] | voice list | voice rm NAME", run: runVoice})
}

// EnvVoices overrides the voices folder (default: "voices" beside the models).
const EnvVoices = "TALKBOX_VOICES"

// voiceLibrary is the user's voices folder.
func voiceLibrary() (*voice.Library, error) {
	if d := os.Getenv(EnvVoices); d != "" {
		return &voice.Library{Dir: d}, nil
	}
	models, err := hub.DefaultModelsDir()
	if err != nil {
		return nil, err
	}
	return &voice.Library{Dir: voice.DirBeside(models)}, nil
}

func runVoice(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("talkbox voice add|list|rm ...")
	}
	switch args[0] {
	case "add":
		return runVoiceAdd(args[1:], stdout, stderr)
	case "list", "ls":
		return runVoiceList(args[1:], stdout, stderr)
	case "rm", "remove":
		return runVoiceRm(args[1:], stdout, stderr)
	}
	return usageErrorf("unknown voice command %q (want add, list or rm)", args[0])
}

// voiceAddResult is what `voice add --json` prints.
type voiceAddResult struct {
	Name     string          `json:"name"`
	Mode     string          `json:"mode"`
	Model    string          `json:"model"`
	Duration float64         `json:"duration"`
	Notices  []string        `json:"notices,omitempty"`
	XVector  []float32       `json:"xvector"`
	Codes    []backend.Codes `json:"codes,omitempty"`
	File     string          `json:"file"`
}

func runVoiceAdd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("voice add", stderr)
	modelFlag := fs.String("model", "", "Base model folder or installed name (default: the installed model)")
	audioPath := fs.String("audio", "", "reference recording: WAV or FLAC, 3-20 s of speech works best")
	text := fs.String("text", "", "what the recording says: gives a closer match (in-context cloning)")
	asJSON := fs.Bool("json", false, "print the result as JSON (name, mode, x-vector, codes, duration)")
	force := fs.Bool("force", false, "replace a voice of the same name")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 || *audioPath == "" {
		return usageErrorf("talkbox voice add NAME --model DIR --audio FILE [--text TRANSCRIPT] [--json]")
	}
	name := rest[0]
	if err := voice.ValidName(name); err != nil {
		return usageErrorf("%v", err)
	}
	lib, err := voiceLibrary()
	if err != nil {
		return err
	}
	if lib.Exists(name) && !*force {
		return fmt.Errorf("%w: %q (use --force to replace it, or voice rm)", voice.ErrExists, name)
	}
	clip, m, dir, err := openReference(*audioPath, *modelFlag)
	if err != nil {
		return err
	}
	defer m.Close()
	enc, err := voice.NewEncoders(m)
	if err != nil {
		return err
	}
	v := &voice.Voice{Name: name, Transcript: strings.TrimSpace(*text), Audio: clip.Samples,
		Source: filepath.Base(*audioPath), Created: time.Now()}
	start := time.Now()
	d, _, err := enc.Derive(v)
	if err != nil {
		return err
	}
	took := time.Since(start)
	if err := lib.Save(v); err != nil {
		return err
	}
	for _, n := range clip.Notices {
		fmt.Fprintln(stderr, "note:", n)
	}
	if *asJSON {
		b, err := json.Marshal(voiceAddResult{Name: name, Mode: v.Mode(), Model: enc.Key(), Duration: v.Seconds(),
			Notices: clip.Notices, XVector: d.XVector, Codes: d.Codes, File: lib.Dir})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "added voice %q (%s, %.1f s from %s): x-vector of %d values", name, v.Mode(), v.Seconds(), clip.Source.Format, len(d.XVector))
	if len(d.Codes) > 0 {
		fmt.Fprintf(stdout, ", %d reference frames", len(d.Codes))
	}
	fmt.Fprintf(stdout, " for %s in %.0f ms; saved in %s\n", filepath.Base(dir), float64(took.Microseconds())/1e3, lib.Dir)
	return nil
}

func runVoiceList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("voice list", stderr)
	asJSON := fs.Bool("json", false, "print the voices as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lib, err := voiceLibrary()
	if err != nil {
		return err
	}
	voices, errs := lib.List()
	for _, e := range errs {
		fmt.Fprintln(stderr, "skipped:", e)
	}
	if *asJSON {
		type entry struct {
			Name       string  `json:"name"`
			Mode       string  `json:"mode"`
			Duration   float64 `json:"duration"`
			Transcript string  `json:"transcript,omitempty"`
		}
		out := []entry{}
		for _, v := range voices {
			out = append(out, entry{v.Name, v.Mode, v.Seconds, v.Transcript})
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	if len(voices) == 0 {
		fmt.Fprintf(stdout, "no cloned voices in %s (talkbox voice add NAME --audio FILE)\n", lib.Dir)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODE\tSECONDS\tTRANSCRIPT")
	for _, v := range voices {
		t := v.Transcript
		if len([]rune(t)) > 40 {
			t = string([]rune(t)[:39]) + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\n", v.Name, v.Mode, v.Seconds, t)
	}
	return tw.Flush()
}

func runVoiceRm(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("voice rm", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("talkbox voice rm NAME")
	}
	lib, err := voiceLibrary()
	if err != nil {
		return err
	}
	if err := lib.Remove(fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed voice %q\n", fs.Arg(0))
	return nil
}

// loadClone finds a saved voice for `say --voice NAME` on a Base model.
func loadClone(name string) (*voice.Voice, *voice.Library, error) {
	lib, err := voiceLibrary()
	if err != nil {
		return nil, nil, err
	}
	v, err := lib.Load(name)
	if errors.Is(err, voice.ErrNotFound) {
		return nil, nil, fmt.Errorf("%w (add one: talkbox voice add %s --audio FILE)", err, name)
	}
	return v, lib, err
}

// useClone makes a Base model's request speak in the cloned voice named by
// req.Voice. Data the voice lacks for this model (a first use with it) is
// computed here and saved, so later uses skip the encoders.
func useClone(e *engine.Engine, req *engine.Request, stderr io.Writer) error {
	if !e.IsBase() {
		return nil
	}
	if strings.TrimSpace(req.Voice) == "" {
		return fmt.Errorf("%w (talkbox voice add NAME --audio FILE, then --voice NAME)", engine.ErrNeedsClone)
	}
	v, lib, err := loadClone(req.Voice)
	if err != nil {
		return err
	}
	enc, err := e.CloneEncoders()
	if err != nil {
		return err
	}
	if _, added, err := enc.Derive(v); err != nil {
		return err
	} else if added {
		if err := lib.Save(v); err != nil {
			fmt.Fprintln(stderr, "note: could not save the voice's data for this model:", err)
		}
	}
	req.Clone, req.Voice = v, ""
	return nil
}
