package backend

import (
	"errors"
	"math"
	"testing"

	"talkbox/engine/model"
	"talkbox/engine/sample"
)

// releasedTalker has the released checkpoints' talker sizes that the rules read.
func releasedTalker() *model.Model {
	cfg := &model.Config{Talker: model.TalkerConfig{HiddenSize: 1024, VocabSize: 3072, CodecEosID: 2150, MaxPositionEmbeddings: 32768,
		CodePredictor: model.CodePredictorConfig{VocabSize: 2048}}}
	return &model.Model{Dir: "released", Config: cfg, Generation: model.DefaultGenerationConfig()}
}

func TestPositions(t *testing.T) {
	for _, c := range []struct{ maxEmb, requested, want int }{
		{32768, 0, DefaultPositions},
		{4096, 0, 4096},
		{0, 0, DefaultPositions},
		{32768, 256, 256},
		{4096, 9000, 9000}, // an explicit size is the caller's (the bench sizes its own)
	} {
		if got := Positions(model.TalkerConfig{MaxPositionEmbeddings: c.maxEmb}, c.requested); got != c.want {
			t.Errorf("Positions(max %d, requested %d) = %d, want %d", c.maxEmb, c.requested, got, c.want)
		}
	}
}

func TestNewSpecReadsTheRules(t *testing.T) {
	s, err := NewSpec(releasedTalker(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := sample.TalkerRules{SuppressFrom: 2048, SuppressTo: 3072, EOS: 2150, MinNewTokens: 2}
	if s.Rules != want || s.EOS != 2150 {
		t.Errorf("rules %+v, EOS %d; want %+v, 2150", s.Rules, s.EOS, want)
	}
	if s.Limits != (Limits{Hidden: 1024, Positions: DefaultPositions, Vocab: 3072, PredictorVocab: 2048}) {
		t.Errorf("limits %+v", s.Limits)
	}
	if s.DefaultFrames != 2047 {
		t.Errorf("default frames %d, want max_new_tokens-1 = 2047", s.DefaultFrames)
	}
}

func TestNewSpecRefusesTalkersTheRulesDoNotFit(t *testing.T) {
	for name, edit := range map[string]func(*model.TalkerConfig){
		"EOS past the vocabulary":        func(c *model.TalkerConfig) { c.CodecEosID = 3072 },
		"negative EOS":                   func(c *model.TalkerConfig) { c.CodecEosID = -1 },
		"vocabulary below control range": func(c *model.TalkerConfig) { c.VocabSize, c.CodecEosID = 1000, 10 },
		"no predictor vocabulary":        func(c *model.TalkerConfig) { c.CodePredictor.VocabSize = 0 },
		"no hidden size":                 func(c *model.TalkerConfig) { c.HiddenSize = 0 },
	} {
		m := releasedTalker()
		edit(&m.Config.Talker)
		if _, err := NewSpec(m, 0); !errors.Is(err, ErrBadModel) {
			t.Errorf("%s: %v, want ErrBadModel", name, err)
		}
	}
	if _, err := NewSpec(nil, 0); err == nil {
		t.Error("nil model accepted")
	}
}

func TestFrameLimits(t *testing.T) {
	s, err := NewSpec(releasedTalker(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ maxFrames, rows, want int }{
		{0, 10, 90},  // the default cap (2047) within the 90 positions left
		{5, 10, 5},   // the caller's cap
		{80, 20, 80}, // exactly the positions left: the last frame's step takes position 99
		{0, 99, 1},
	} {
		if got := s.FrameLimit(GenerateOptions{MaxFrames: c.maxFrames}, c.rows); got != c.want {
			t.Errorf("FrameLimit(MaxFrames %d, %d rows) = %d, want %d", c.maxFrames, c.rows, got, c.want)
		}
	}
	if got := MaxFrames(0); got != model.DefaultGenerationConfig().MaxNewTokens-1 {
		t.Errorf("MaxFrames(0) = %d", got)
	}
	for _, c := range []struct{ tokens, maxNew, want int }{
		{0, 2048, 125}, {10, 2048, 350}, {200, 2048, 2047}, {10, 300, 299}, {10, 0, 350},
	} {
		if got := FrameCap(c.tokens, c.maxNew); got != c.want {
			t.Errorf("FrameCap(%d, %d) = %d, want %d", c.tokens, c.maxNew, got, c.want)
		}
	}
}

func TestSamplingFromGenerationConfig(t *testing.T) {
	g := model.DefaultGenerationConfig()
	g.SubtalkerTopK, g.TopP = 7, 0.5
	talker, predictor := Sampling(g)
	if talker != (sample.Params{DoSample: true, Temperature: 0.9, TopK: 50, TopP: 0.5, RepetitionPenalty: 1.05}) {
		t.Errorf("talker %+v", talker)
	}
	if predictor != (sample.Params{DoSample: true, Temperature: 0.9, TopK: 7, TopP: 1, RepetitionPenalty: 1}) {
		t.Errorf("predictor %+v (the predictor runs without a repetition penalty)", predictor)
	}
}

// The edges of the position budget: F frames after N prefill rows take N+F
// positions.
func TestValidatePositionBudget(t *testing.T) {
	l := Limits{Hidden: 2, Positions: 10, Vocab: 3072, PredictorVocab: 2048}
	row := []float32{0, 1}
	rows := func(n int) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = row
		}
		return out
	}
	ok := GenerateOptions{Talker: sample.Greedy(), Predictor: sample.Greedy()}
	exact := func(n int) GenerateOptions { o := ok; o.ExactFrames = n; return o }
	for _, c := range []struct {
		rows int
		opt  GenerateOptions
		want error
	}{
		{9, ok, nil},
		{10, ok, ErrBadPrompt},
		{4, exact(6), nil},
		{4, exact(7), ErrBadOptions},
	} {
		err := Validate(Prompt{Prefill: rows(c.rows), TTSPad: row}, c.opt, l)
		if (c.want == nil && err != nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%d rows, ExactFrames %d: %v, want %v", c.rows, c.opt.ExactFrames, err, c.want)
		}
	}
	inf := []float32{0, float32(math.Inf(1))}
	if err := Validate(Prompt{Prefill: [][]float32{row}, TTSPad: inf}, ok, l); !errors.Is(err, ErrBadPrompt) {
		t.Errorf("infinite tts_pad: %v", err)
	}
}
