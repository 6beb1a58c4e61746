//go:build fakeengine && !nogui

// The fake engine for the smoke test and screenshots (ui/smoke.sh): only a
// binary built with -tags fakeengine has it, so the shipped one does not.

package main

import (
	"os"
	"strconv"
	"time"

	"talkbox/ui"
	"talkbox/ui/uitest"
)

// envFakeRTF sets the fake engine's real-time factor (default 0.4).
const envFakeRTF = "TALKBOX_FAKE_RTF"

func init() { fakeEngineModels = useFakeEngine }

func useFakeEngine(cfg *ui.Config) {
	rtf := 0.4
	if v, err := strconv.ParseFloat(os.Getenv(envFakeRTF), 64); err == nil && v > 0 {
		rtf = v
	}
	cfg.Models = []ui.Model{{Name: "Fake engine (testing only)", Dir: "fake"}}
	cfg.Open = func(string, ui.OpenOptions) (ui.Engine, error) {
		return &uitest.FakeEngine{RTF: rtf, Prefill: 30 * time.Millisecond, Instruct: true}, nil
	}
}
