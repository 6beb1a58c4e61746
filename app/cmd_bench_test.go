package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"talkbox/engine/golden"
)

// TestBenchVerb runs the bench on a tiny golden checkpoint: one JSON object
// whose timings are positive and whose frame count is the one asked for.
func TestBenchVerb(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-customvoice-1b7")
	var out, errb bytes.Buffer
	if rc := run([]string{"bench", "--model", dir, "--backend", "cpu", "--frames", "6", "--runs", "2", "--threads", "1"}, &out, &errb); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	var rep benchReport
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if dec.More() {
		t.Error("more than one JSON value printed")
	}
	if rep.Frames != 6 || rep.Model != "1.7B" || rep.PromptRows != 40 || rep.Device == "" {
		t.Errorf("report %+v: want 6 frames of the 1.7B layout, 40 prompt rows, a device", rep)
	}
	if !(rep.PrefillMS > 0 && rep.TalkerStepMS > 0 && rep.PredictorStepMS > 0 && rep.FrameMS > 0) {
		t.Errorf("timings not all positive: %+v", rep)
	}
	// The stability run checks every code of a long sampled utterance.
	out.Reset()
	if rc := run([]string{"bench", "--model", dir, "--backend", "cpu", "--frames", "2", "--runs", "1", "--codec-frames", "0", "--stability", "40"}, &out, &errb); rc != 0 {
		t.Fatalf("stability: exit %d: %s", rc, errb.String())
	}
	rep = benchReport{}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Stability == nil {
		t.Fatalf("stability report missing: %v %s", err, out.String())
	}
	if s := rep.Stability; s.Frames != 40 || s.BadCodes != 0 || s.Stop != "exact" {
		t.Errorf("stability %+v: want 40 frames, 0 bad codes, exact stop", s)
	}
	if rc := run([]string{"bench", "--model", dir, "--backend", "tpu"}, &out, &errb); rc != 2 {
		t.Errorf("unknown backend: exit %d, want 2", rc)
	}
}

// TestBenchCloneOnly: on a Base checkpoint the bench times both voice-clone
// encoders on a clip of the asked length.
func TestBenchCloneOnly(t *testing.T) {
	dir := golden.Checkpoint(t, "qwen3-tts-tiny-base")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "--model", dir, "--clone-only", "--clone-seconds", "2", "--runs", "2"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep benchReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Clone
	if c == nil || c.ClipSeconds != 2 || c.Frames != 25 || c.XVectorDim != 64 || c.SpeakerEncoderMS <= 0 || c.SpeechEncoderMS <= 0 {
		t.Fatalf("clone report %+v", c)
	}
	if code := run([]string{"bench", "--model", dir, "--clone-only", "--clone-seconds", "45"}, &stdout, &stderr); code != 2 {
		t.Errorf("--clone-seconds 45: exit %d", code)
	}
}
