package cpu

import (
	"testing"

	"talkbox/engine/backendtest"
	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// TestPureGoEngineMatchesGolden runs the engine on the pure-Go kernels (the
// -tags noblas default; engine/linalg checks the products themselves) against
// a golden case per layout.
func TestPureGoEngineMatchesGolden(t *testing.T) {
	golden.Require(t)
	for _, name := range []string{"cv_en_ryan_nonstream", "cv1b7_en_ryan_instruct_stream"} {
		c := golden.OpenCase(t, name)
		mdl, err := model.Load(c.Checkpoint, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lm, err := New(mdl, Options{Threads: 2, Precision: F32, pureGo: true})
		mdl.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := backendtest.Codes(c.I64("codes"))
		run := backendtest.MustGenerate(t, lm, backendtest.Prompt(t, c), backendtest.Greedy(len(want)), true)
		t.Logf("pure Go %s", compareRun(t, c, run, "", 1e-4))
		checkCodes(t, name+" (pure Go)", run.Codes, want)
	}
}
