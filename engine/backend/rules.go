package backend

import (
	"errors"
	"fmt"

	"talkbox/engine/model"
	"talkbox/engine/sample"
)

// The talker's fixed rules. Both backends take them from here: engine/cpu
// applies them in Go, engine/cuda hands them to the native library.
const (
	// ControlTokens is the control range at the top of the talker's codec
	// vocabulary ([vocab-1024, vocab) = [2048, 3072) in the released models).
	// The official talker generate suppresses it at every step, EOS excepted.
	ControlTokens = 1024
	// MinNewTokens is the official generate's min_new_tokens: EOS is masked
	// until two group-0 tokens were generated.
	MinNewTokens = 2
	// DefaultPositions is the talker KV-cache length when the caller does not
	// choose one (capped by max_position_embeddings). Both backends use it, so
	// a request is accepted or refused alike on either. It holds what the
	// pipeline sends for ordinary text (a request of engine.MaxTextRunes
	// characters is roughly 1000-4000 prompt rows, and FrameCap allows
	// 100 + 25 frames a text token) while the GPU, which allocates the whole
	// cache up front at 112 KiB a position, spends 0.9 GiB on it instead of
	// the 3.5 GiB the model's 32768 positions would take. A request past it is
	// ErrBadPrompt, and a frame cap past it ends with StopCap.
	DefaultPositions = 8192
)

// Positions is the KV-cache length a backend holds: requested when it is
// positive, else DefaultPositions within the model's max_position_embeddings.
func Positions(t model.TalkerConfig, requested int) int {
	if requested > 0 {
		return requested
	}
	if t.MaxPositionEmbeddings > 0 {
		return min(t.MaxPositionEmbeddings, DefaultPositions)
	}
	return DefaultPositions
}

// ErrBadModel is wrapped when a checkpoint's talker cannot hold the rules.
var ErrBadModel = errors.New("talker config does not fit the frame loop")

// Spec is everything a backend reads from a checkpoint to run the frame loop
// the same way as every other backend: its limits, the group-0 rules and the
// frame cap used when the options set none.
type Spec struct {
	Limits
	EOS           int                // codec EOS id: ends the utterance unless ExactFrames is set
	Rules         sample.TalkerRules // group-0 suppression and EOS mask
	DefaultFrames int                // frame cap when GenerateOptions.MaxFrames is 0
}

// NewSpec derives the spec of m's talker with a KV cache of positions
// (Positions' rule applies).
func NewSpec(m *model.Model, positions int) (Spec, error) {
	if m == nil || m.Config == nil {
		return Spec{}, errors.New("no model loaded")
	}
	t := m.Config.Talker
	if t.VocabSize < ControlTokens || t.CodecEosID < 0 || t.CodecEosID >= t.VocabSize || t.CodePredictor.VocabSize <= 0 || t.HiddenSize <= 0 {
		return Spec{}, fmt.Errorf("%w: %s: codec vocabulary %d must hold EOS %d and the %d control ids; predictor vocabulary %d, hidden %d",
			ErrBadModel, m.Dir, t.VocabSize, t.CodecEosID, ControlTokens, t.CodePredictor.VocabSize, t.HiddenSize)
	}
	return Spec{
		Limits: Limits{Hidden: t.HiddenSize, Positions: Positions(t, positions), Vocab: t.VocabSize, PredictorVocab: t.CodePredictor.VocabSize},
		EOS:    t.CodecEosID,
		Rules: sample.TalkerRules{SuppressFrom: t.VocabSize - ControlTokens, SuppressTo: t.VocabSize, EOS: t.CodecEosID,
			MinNewTokens: MinNewTokens},
		DefaultFrames: MaxFrames(m.Generation.MaxNewTokens),
	}, nil
}

// MaxFrames is the most frames max_new_tokens allows: the official generate's
// last sampled token (EOS, or the cap's) never gets a frame. A missing or
// meaningless value falls back to the official default.
func MaxFrames(maxNewTokens int) int {
	if maxNewTokens <= 1 {
		maxNewTokens = model.DefaultGenerationConfig().MaxNewTokens
	}
	return maxNewTokens - 1
}

// FrameCap is the safety net against a talker that never says EOS: about two
// seconds of audio per text token plus eight seconds, within max_new_tokens.
// Real speech needs far less (roughly 3-5 frames per token).
func FrameCap(textTokens, maxNewTokens int) int {
	return min(100+25*max(textTokens, 1), MaxFrames(maxNewTokens))
}

// Validate checks a prompt and options against the spec's limits.
func (s Spec) Validate(p Prompt, opt GenerateOptions) error { return Validate(p, opt, s.Limits) }

// FrameLimit is how many frames a non-exact Generate may emit before it stops
// with StopCap: MaxFrames (DefaultFrames when 0), within the positions the
// prompt leaves. Frame s's talker step writes position prefillRows+s, so F
// frames take prefillRows+F positions, the step after the last frame (the
// one that samples EOS) included.
func (s Spec) FrameLimit(opt GenerateOptions, prefillRows int) int {
	c := opt.MaxFrames
	if c == 0 {
		c = s.DefaultFrames
	}
	return min(c, s.Positions-prefillRows)
}

// Sampling is generation_config.json's sampling for group 0 (talker) and
// groups 1..15 (code predictor, which the official generate runs without a
// repetition penalty).
func Sampling(g model.GenerationConfig) (talker, predictor sample.Params) {
	talker = sample.Params{DoSample: g.DoSample, Temperature: g.Temperature, TopK: g.TopK, TopP: g.TopP, RepetitionPenalty: g.RepetitionPenalty}
	predictor = sample.Params{DoSample: g.SubtalkerDoSample, Temperature: g.SubtalkerTemperature, TopK: g.SubtalkerTopK,
		TopP: g.SubtalkerTopP, RepetitionPenalty: 1}
	return talker, predictor
}
