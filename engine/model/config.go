// Package model knows the Qwen3-TTS-12Hz checkpoint layout: the typed configs,
// the tensors each model type needs with their shapes, and Load(dir), which
// opens and validates a checkpoint directory. It knows nothing of devices.
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"talkbox/internal/errtext"
	"talkbox/internal/regfile"
)

// Model types as spelled in config.json's tts_model_type.
const (
	TypeBase        = "base"
	TypeCustomVoice = "custom_voice"
	TypeVoiceDesign = "voice_design"
)

// Config is config.json. Every value is read from the file: the Python class
// defaults differ from the released files (codec ids, rope_theta).
type Config struct {
	ModelType        string         `json:"model_type"`
	TokenizerType    string         `json:"tokenizer_type"`
	TTSModelSize     string         `json:"tts_model_size"` // "0b6" or "1b7"
	TTSModelType     string         `json:"tts_model_type"` // base, custom_voice, voice_design
	IMStartTokenID   int            `json:"im_start_token_id"`
	IMEndTokenID     int            `json:"im_end_token_id"`
	TTSPadTokenID    int            `json:"tts_pad_token_id"`
	TTSBosTokenID    int            `json:"tts_bos_token_id"`
	TTSEosTokenID    int            `json:"tts_eos_token_id"`
	AssistantTokenID int            `json:"assistant_token_id"`
	Talker           TalkerConfig   `json:"talker_config"`
	SpeakerEncoder   *SpeakerEncCfg `json:"speaker_encoder_config,omitempty"`
	TransformersVer  string         `json:"transformers_version"`
}

// TalkerConfig is config.json's talker_config.
type TalkerConfig struct {
	HiddenSize            int                       `json:"hidden_size"`
	IntermediateSize      int                       `json:"intermediate_size"`
	NumHiddenLayers       int                       `json:"num_hidden_layers"`
	NumAttentionHeads     int                       `json:"num_attention_heads"`
	NumKeyValueHeads      int                       `json:"num_key_value_heads"`
	HeadDim               int                       `json:"head_dim"`
	VocabSize             int                       `json:"vocab_size"`
	TextVocabSize         int                       `json:"text_vocab_size"`
	TextHiddenSize        int                       `json:"text_hidden_size"`
	NumCodeGroups         int                       `json:"num_code_groups"`
	RMSNormEps            float64                   `json:"rms_norm_eps"`
	RopeTheta             float64                   `json:"rope_theta"`
	RopeScaling           *RopeScaling              `json:"rope_scaling"`
	MaxPositionEmbeddings int                       `json:"max_position_embeddings"`
	HiddenAct             string                    `json:"hidden_act"`
	CodecPadID            int                       `json:"codec_pad_id"`
	CodecBosID            int                       `json:"codec_bos_id"`
	CodecEosID            int                       `json:"codec_eos_token_id"`
	CodecThinkID          int                       `json:"codec_think_id"`
	CodecNoThinkID        int                       `json:"codec_nothink_id"`
	CodecThinkBosID       int                       `json:"codec_think_bos_id"`
	CodecThinkEosID       int                       `json:"codec_think_eos_id"`
	CodecLanguageID       map[string]int            `json:"codec_language_id"`
	SpeakerID             map[string]SpeakerIDValue `json:"spk_id"`
	SpeakerIsDialect      map[string]DialectValue   `json:"spk_is_dialect"`
	CodePredictor         CodePredictorConfig       `json:"code_predictor_config"`
}

// RopeScaling is the M-RoPE description; for TTS all three position streams
// are equal, so it reduces to plain rotate-half RoPE
// (docs/design/qwen3-tts-lm.md §4).
type RopeScaling struct {
	Interleaved  bool   `json:"interleaved"`
	MRopeSection []int  `json:"mrope_section"`
	RopeType     string `json:"rope_type"`
}

// CodePredictorConfig is talker_config.code_predictor_config.
type CodePredictorConfig struct {
	HiddenSize        int     `json:"hidden_size"`
	IntermediateSize  int     `json:"intermediate_size"`
	NumHiddenLayers   int     `json:"num_hidden_layers"`
	NumAttentionHeads int     `json:"num_attention_heads"`
	NumKeyValueHeads  int     `json:"num_key_value_heads"`
	HeadDim           int     `json:"head_dim"`
	VocabSize         int     `json:"vocab_size"`
	NumCodeGroups     int     `json:"num_code_groups"`
	RMSNormEps        float64 `json:"rms_norm_eps"`
	RopeTheta         float64 `json:"rope_theta"`
}

// SpeakerEncCfg is speaker_encoder_config (Base models only).
// The released configs hold only enc_dim and sample_rate; ReadConfig fills
// the rest with the official class defaults (applyDefaults), so a zero field
// here means "as released" and is left out when written.
type SpeakerEncCfg struct {
	MelDim               int   `json:"mel_dim,omitempty"`
	EncDim               int   `json:"enc_dim"`
	EncChannels          []int `json:"enc_channels,omitempty"`
	EncKernelSizes       []int `json:"enc_kernel_sizes,omitempty"`
	EncDilations         []int `json:"enc_dilations,omitempty"`
	EncAttentionChannels int   `json:"enc_attention_channels,omitempty"`
	EncRes2NetScale      int   `json:"enc_res2net_scale,omitempty"`
	EncSEChannels        int   `json:"enc_se_channels,omitempty"`
	SampleRate           int   `json:"sample_rate,omitempty"`
}

// applyDefaults fills what config.json leaves out with the defaults of the
// official Qwen3TTSSpeakerEncoderConfig (qwen3-tts-codec.md §6).
func (s *SpeakerEncCfg) applyDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.MelDim, 128)
	def(&s.EncDim, 1024)
	def(&s.EncAttentionChannels, 128)
	def(&s.EncRes2NetScale, 8)
	def(&s.EncSEChannels, 128)
	def(&s.SampleRate, 24000)
	if s.EncChannels == nil {
		s.EncChannels = []int{512, 512, 512, 512, 1536}
	}
	if s.EncKernelSizes == nil {
		s.EncKernelSizes = []int{5, 3, 3, 3, 1}
	}
	if s.EncDilations == nil {
		s.EncDilations = []int{1, 2, 3, 4, 1}
	}
}

// SpeakerIDValue accepts a plain int or a one-element list, as the official code does.
type SpeakerIDValue int

func (s *SpeakerIDValue) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*s = SpeakerIDValue(n)
		return nil
	}
	var l []int
	if err := json.Unmarshal(b, &l); err != nil || len(l) != 1 {
		return fmt.Errorf("spk_id entry %s: want an int or a one-element list", b)
	}
	*s = SpeakerIDValue(l[0])
	return nil
}

// DialectValue is false or a dialect name such as "sichuan_dialect".
type DialectValue string

func (d *DialectValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*d = DialectValue(s)
		return nil
	}
	var f bool
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("spk_is_dialect entry %s: want false or a dialect name", b)
	}
	if f {
		return fmt.Errorf("spk_is_dialect entry true: want false or a dialect name")
	}
	*d = ""
	return nil
}

// GenerationConfig is generation_config.json, read as the official wrapper does.
type GenerationConfig struct {
	DoSample             bool    `json:"do_sample"`
	Temperature          float64 `json:"temperature"`
	TopK                 int     `json:"top_k"`
	TopP                 float64 `json:"top_p"`
	RepetitionPenalty    float64 `json:"repetition_penalty"`
	SubtalkerDoSample    bool    `json:"subtalker_dosample"`
	SubtalkerTemperature float64 `json:"subtalker_temperature"`
	SubtalkerTopK        int     `json:"subtalker_top_k"`
	SubtalkerTopP        float64 `json:"subtalker_top_p"`
	MaxNewTokens         int     `json:"max_new_tokens"`
}

// DefaultGenerationConfig holds the official wrapper's hard defaults, used for
// keys the file lacks.
func DefaultGenerationConfig() GenerationConfig {
	return GenerationConfig{DoSample: true, Temperature: 0.9, TopK: 50, TopP: 1.0, RepetitionPenalty: 1.05,
		SubtalkerDoSample: true, SubtalkerTemperature: 0.9, SubtalkerTopK: 50, SubtalkerTopP: 1.0, MaxNewTokens: 2048}
}

// CodecConfig is speech_tokenizer/config.json.
type CodecConfig struct {
	ModelType                 string             `json:"model_type"`
	EncoderValidNumQuantizers int                `json:"encoder_valid_num_quantizers"`
	InputSampleRate           int                `json:"input_sample_rate"`
	OutputSampleRate          int                `json:"output_sample_rate"`
	DecodeUpsampleRate        int                `json:"decode_upsample_rate"`
	EncodeDownsampleRate      int                `json:"encode_downsample_rate"`
	Decoder                   CodecDecoderConfig `json:"decoder_config"`
	Encoder                   json.RawMessage    `json:"encoder_config"`
}

// CodecDecoderConfig is speech_tokenizer/config.json's decoder_config.
type CodecDecoderConfig struct {
	CodebookSize      int     `json:"codebook_size"`
	CodebookDim       int     `json:"codebook_dim"`
	LatentDim         int     `json:"latent_dim"`
	HiddenSize        int     `json:"hidden_size"`
	HeadDim           int     `json:"head_dim"`
	NumAttentionHeads int     `json:"num_attention_heads"`
	NumKeyValueHeads  int     `json:"num_key_value_heads"`
	IntermediateSize  int     `json:"intermediate_size"`
	NumHiddenLayers   int     `json:"num_hidden_layers"`
	SlidingWindow     int     `json:"sliding_window"`
	RopeTheta         float64 `json:"rope_theta"`
	RMSNormEps        float64 `json:"rms_norm_eps"`
	MaxPositionEmbeds int     `json:"max_position_embeddings"`
	NumQuantizers     int     `json:"num_quantizers"`
	UpsamplingRatios  []int   `json:"upsampling_ratios"`
	UpsampleRates     []int   `json:"upsample_rates"`
	DecoderDim        int     `json:"decoder_dim"`
}

// SamplesPerFrame is the product of all upsampling factors (1920 as released).
func (c CodecDecoderConfig) SamplesPerFrame() int {
	n := 1
	for _, r := range c.UpsamplingRatios {
		n *= r
	}
	for _, r := range c.UpsampleRates {
		n *= r
	}
	return n
}

// Upper bounds on config sizes, far above the released models (1.7B: 28
// layers, hidden 2048, intermediate 6144, text vocabulary 151936; codec: 8
// layers, 1920 samples per frame) and low enough that nothing sized from a
// config can exhaust memory before the weights are checked.
const (
	MaxLayers          = 512
	MaxWidth           = 1 << 16
	MaxHeads           = 1024
	MaxHeadDim         = 1024
	MaxVocab           = 1 << 22
	MaxPositions       = 1 << 24
	MaxNames           = 10000 // speakers or languages
	MaxUpsampleStages  = 16
	MaxUpsampleRate    = 64
	MaxSamplesPerFrame = 1 << 16
	MaxRes2NetScale    = 64 // the speaker encoder's sub-blocks per block (8 as released)
)

// limited is a config value and its upper bound.
type limited struct{ v, max int }

// checkLimits reports the first value (by name) above its bound.
func checkLimits(m map[string]limited) error {
	for _, k := range sortedKeys(m) {
		if m[k].v > m[k].max {
			return fmt.Errorf("%s is %d, more than the %d Talkbox accepts", k, m[k].v, m[k].max)
		}
	}
	return nil
}

// ErrBadConfig is wrapped by configuration errors.
var ErrBadConfig = errors.New("bad model config")

// MaxConfigBytes bounds a config file; the released ones are a few KiB.
const MaxConfigBytes = 1 << 20

func decodeJSON(path string, b []byte, v any) error {
	if len(b) > MaxConfigBytes {
		return fmt.Errorf("%w: %s: %d bytes, at most %d", ErrBadConfig, path, len(b), MaxConfigBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, path, errtext.Brief(err))
	}
	return nil
}

// ReadConfig reads and checks dir/config.json.
func ReadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := regfile.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, b)
}

// ParseConfig checks the bytes of a config.json; path names it in errors.
func ParseConfig(path string, b []byte) (*Config, error) {
	var c Config
	if err := decodeJSON(path, b, &c); err != nil {
		return nil, err
	}
	if c.SpeakerEncoder != nil {
		c.SpeakerEncoder.applyDefaults()
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadConfig, path, err)
	}
	return &c, nil
}

func (c *Config) validate() error {
	if c.ModelType != "qwen3_tts" {
		return fmt.Errorf("model_type is %q, want \"qwen3_tts\"", c.ModelType)
	}
	switch c.TTSModelType {
	case TypeBase, TypeCustomVoice, TypeVoiceDesign:
	default:
		return fmt.Errorf("tts_model_type %q is not base, custom_voice or voice_design", c.TTSModelType)
	}
	t := c.Talker
	positive := map[string]int{
		"talker hidden_size": t.HiddenSize, "talker intermediate_size": t.IntermediateSize,
		"talker num_hidden_layers": t.NumHiddenLayers, "talker num_attention_heads": t.NumAttentionHeads,
		"talker num_key_value_heads": t.NumKeyValueHeads, "talker head_dim": t.HeadDim,
		"talker vocab_size": t.VocabSize, "talker text_vocab_size": t.TextVocabSize,
		"talker text_hidden_size": t.TextHiddenSize, "code predictor hidden_size": t.CodePredictor.HiddenSize,
		"code predictor intermediate_size":   t.CodePredictor.IntermediateSize,
		"code predictor num_hidden_layers":   t.CodePredictor.NumHiddenLayers,
		"code predictor num_attention_heads": t.CodePredictor.NumAttentionHeads,
		"code predictor num_key_value_heads": t.CodePredictor.NumKeyValueHeads,
		"code predictor head_dim":            t.CodePredictor.HeadDim, "code predictor vocab_size": t.CodePredictor.VocabSize,
	}
	for _, k := range sortedKeys(positive) {
		if positive[k] <= 0 {
			return fmt.Errorf("%s must be positive, is %d", k, positive[k])
		}
	}
	// Upper bounds before anything is sized from these numbers: a config
	// asking for 10^6 layers must not build a tensor list of millions.
	if err := checkLimits(map[string]limited{
		"talker num_hidden_layers": {t.NumHiddenLayers, MaxLayers}, "code predictor num_hidden_layers": {t.CodePredictor.NumHiddenLayers, MaxLayers},
		"talker hidden_size": {t.HiddenSize, MaxWidth}, "talker intermediate_size": {t.IntermediateSize, MaxWidth},
		"talker text_hidden_size": {t.TextHiddenSize, MaxWidth}, "code predictor hidden_size": {t.CodePredictor.HiddenSize, MaxWidth},
		"code predictor intermediate_size": {t.CodePredictor.IntermediateSize, MaxWidth},
		"talker num_attention_heads":       {t.NumAttentionHeads, MaxHeads}, "code predictor num_attention_heads": {t.CodePredictor.NumAttentionHeads, MaxHeads},
		"talker head_dim": {t.HeadDim, MaxHeadDim}, "code predictor head_dim": {t.CodePredictor.HeadDim, MaxHeadDim},
		"talker vocab_size": {t.VocabSize, MaxVocab}, "talker text_vocab_size": {t.TextVocabSize, MaxVocab},
		"code predictor vocab_size":      {t.CodePredictor.VocabSize, MaxVocab},
		"talker max_position_embeddings": {t.MaxPositionEmbeddings, MaxPositions},
		"number of speakers (spk_id)":    {len(t.SpeakerID), MaxNames}, "number of languages (codec_language_id)": {len(t.CodecLanguageID), MaxNames},
	}); err != nil {
		return err
	}
	if t.NumCodeGroups != 16 {
		return fmt.Errorf("talker num_code_groups is %d; Talkbox supports 16", t.NumCodeGroups)
	}
	if t.NumAttentionHeads%t.NumKeyValueHeads != 0 || t.CodePredictor.NumAttentionHeads%t.CodePredictor.NumKeyValueHeads != 0 {
		return fmt.Errorf("attention heads must be a multiple of key/value heads")
	}
	if t.HeadDim%2 != 0 || t.CodePredictor.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim must be even for rotate-half RoPE")
	}
	if t.RopeTheta <= 0 || t.RMSNormEps <= 0 {
		return fmt.Errorf("talker rope_theta and rms_norm_eps must be positive")
	}
	if t.CodePredictor.RopeTheta <= 0 || t.CodePredictor.RMSNormEps <= 0 {
		return fmt.Errorf("code predictor rope_theta and rms_norm_eps must be positive")
	}
	for _, id := range []int{t.CodecPadID, t.CodecBosID, t.CodecEosID, t.CodecThinkID, t.CodecNoThinkID, t.CodecThinkBosID, t.CodecThinkEosID} {
		if id < 0 || id >= t.VocabSize {
			return fmt.Errorf("codec special id %d outside the codec vocabulary of %d", id, t.VocabSize)
		}
	}
	for name, id := range t.CodecLanguageID {
		if id < 0 || id >= t.VocabSize {
			return fmt.Errorf("language %q has codec id %d outside the codec vocabulary", name, id)
		}
	}
	for name, id := range t.SpeakerID {
		if int(id) < 0 || int(id) >= t.VocabSize {
			return fmt.Errorf("speaker %q has codec id %d outside the codec vocabulary", name, id)
		}
	}
	for name, d := range t.SpeakerIsDialect {
		if d != "" {
			if _, ok := t.CodecLanguageID[string(d)]; !ok {
				return fmt.Errorf("speaker %q has dialect %q that is not in codec_language_id", name, d)
			}
		}
	}
	if c.TTSModelType == TypeBase && c.SpeakerEncoder == nil {
		return fmt.Errorf("a base model needs speaker_encoder_config")
	}
	if se := c.SpeakerEncoder; se != nil {
		lim := map[string]limited{"speaker encoder enc_res2net_scale": {se.EncRes2NetScale, MaxRes2NetScale},
			"speaker encoder mel_dim": {se.MelDim, MaxWidth}, "speaker encoder enc_dim": {se.EncDim, MaxWidth},
			"speaker encoder enc_attention_channels": {se.EncAttentionChannels, MaxWidth}, "speaker encoder enc_se_channels": {se.EncSEChannels, MaxWidth}}
		for i, v := range se.EncChannels {
			lim[fmt.Sprintf("speaker encoder enc_channels[%d]", i)] = limited{v, MaxWidth}
		}
		if err := checkLimits(lim); err != nil {
			return err
		}
	}
	return nil
}

// ReadGenerationConfig reads dir/generation_config.json over the official defaults.
// A missing file yields the defaults.
func ReadGenerationConfig(dir string) (GenerationConfig, error) {
	g := DefaultGenerationConfig()
	path := filepath.Join(dir, "generation_config.json")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return g, nil
	}
	b, err := regfile.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return g, err
	}
	return ParseGenerationConfig(path, b)
}

// ParseGenerationConfig reads generation_config.json bytes over the official
// defaults and checks the sampling values are usable.
func ParseGenerationConfig(path string, b []byte) (GenerationConfig, error) {
	g := DefaultGenerationConfig()
	if err := decodeJSON(path, b, &g); err != nil {
		return DefaultGenerationConfig(), err
	}
	bad := func(what string, v any) (GenerationConfig, error) {
		return DefaultGenerationConfig(), fmt.Errorf("%w: %s: %s is %v", ErrBadConfig, path, what, v)
	}
	switch {
	case g.Temperature < 0 || g.SubtalkerTemperature < 0:
		return bad("a temperature", fmt.Sprint(g.Temperature, ", ", g.SubtalkerTemperature))
	case g.TopK < 0 || g.TopK > MaxVocab || g.SubtalkerTopK < 0 || g.SubtalkerTopK > MaxVocab:
		return bad("a top_k", fmt.Sprint(g.TopK, ", ", g.SubtalkerTopK))
	case g.TopP < 0 || g.TopP > 1 || g.SubtalkerTopP < 0 || g.SubtalkerTopP > 1:
		return bad("a top_p (want 0..1)", fmt.Sprint(g.TopP, ", ", g.SubtalkerTopP))
	case g.RepetitionPenalty <= 0:
		return bad("repetition_penalty", g.RepetitionPenalty)
	case g.MaxNewTokens < 0 || g.MaxNewTokens > MaxPositions:
		return bad("max_new_tokens", g.MaxNewTokens)
	}
	return g, nil
}

// ReadCodecConfig reads and checks speechDir/config.json.
func ReadCodecConfig(speechDir string) (*CodecConfig, error) {
	path := filepath.Join(speechDir, "config.json")
	b, err := regfile.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return nil, err
	}
	return ParseCodecConfig(path, b)
}

// ParseCodecConfig checks the bytes of a speech_tokenizer/config.json.
func ParseCodecConfig(path string, b []byte) (*CodecConfig, error) {
	var c CodecConfig
	if err := decodeJSON(path, b, &c); err != nil {
		return nil, err
	}
	d := c.Decoder
	if err := checkLimits(map[string]limited{
		"decoder num_hidden_layers": {d.NumHiddenLayers, MaxLayers}, "decoder hidden_size": {d.HiddenSize, MaxWidth},
		"decoder intermediate_size": {d.IntermediateSize, MaxWidth}, "decoder latent_dim": {d.LatentDim, MaxWidth},
		"decoder codebook_dim": {d.CodebookDim, MaxWidth}, "decoder decoder_dim": {d.DecoderDim, MaxWidth},
		"decoder head_dim": {d.HeadDim, MaxHeadDim}, "decoder num_attention_heads": {d.NumAttentionHeads, MaxHeads},
		"decoder num_key_value_heads": {d.NumKeyValueHeads, MaxHeads}, "decoder codebook_size": {d.CodebookSize, MaxVocab},
		"decoder sliding_window": {d.SlidingWindow, MaxPositions}, "decoder max_position_embeddings": {d.MaxPositionEmbeds, MaxPositions},
		"decoder upsampling_ratios entries": {len(d.UpsamplingRatios), MaxUpsampleStages}, "decoder upsample_rates entries": {len(d.UpsampleRates), MaxUpsampleStages},
	}); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadConfig, path, err)
	}
	spf := 1
	for _, r := range append(append([]int(nil), d.UpsamplingRatios...), d.UpsampleRates...) {
		if r <= 0 || r > MaxUpsampleRate {
			return nil, fmt.Errorf("%w: %s: upsampling factor %d outside 1..%d", ErrBadConfig, path, r, MaxUpsampleRate)
		}
		if spf *= r; spf > MaxSamplesPerFrame {
			return nil, fmt.Errorf("%w: %s: the upsampling factors give more than %d samples per frame", ErrBadConfig, path, MaxSamplesPerFrame)
		}
	}
	if c.ModelType != "qwen3_tts_tokenizer_12hz" {
		return nil, fmt.Errorf("%w: %s: model_type is %q, want \"qwen3_tts_tokenizer_12hz\"", ErrBadConfig, path, c.ModelType)
	}
	if d.NumQuantizers != 16 || d.CodebookSize <= 0 || d.CodebookDim <= 1 || d.LatentDim <= 0 || d.HiddenSize <= 0 ||
		d.HeadDim <= 0 || d.NumAttentionHeads <= 0 || d.NumHiddenLayers <= 0 || d.SlidingWindow <= 0 ||
		len(d.UpsampleRates) == 0 || d.DecoderDim <= 0 || d.NumKeyValueHeads <= 0 || d.IntermediateSize <= 0 {
		return nil, fmt.Errorf("%w: %s: decoder_config has missing or non-positive sizes", ErrBadConfig, path)
	}
	if d.NumAttentionHeads%d.NumKeyValueHeads != 0 {
		return nil, fmt.Errorf("%w: %s: decoder num_attention_heads %d is not a multiple of num_key_value_heads %d", ErrBadConfig, path, d.NumAttentionHeads, d.NumKeyValueHeads)
	}
	if c.DecodeUpsampleRate != 0 && c.DecodeUpsampleRate != d.SamplesPerFrame() {
		return nil, fmt.Errorf("%w: %s: decode_upsample_rate %d does not equal the product of the upsampling factors %d", ErrBadConfig, path, c.DecodeUpsampleRate, d.SamplesPerFrame())
	}
	return &c, nil
}

// Speaker is one preset voice of a CustomVoice model.
type Speaker struct {
	Name    string // as in config.json (lower case)
	CodecID int
	Dialect string // "" or e.g. "sichuan_dialect"
}

// Speakers lists the preset voices sorted by name.
func (c *Config) Speakers() []Speaker {
	var out []Speaker
	for name, id := range c.Talker.SpeakerID {
		out = append(out, Speaker{Name: name, CodecID: int(id), Dialect: string(c.Talker.SpeakerIsDialect[name])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Languages lists the selectable language names: "auto" first, then every key of
// codec_language_id that is not a dialect, sorted.
func (c *Config) Languages() []string {
	var langs []string
	for name := range c.Talker.CodecLanguageID {
		if !strings.Contains(name, "dialect") {
			langs = append(langs, name)
		}
	}
	sort.Strings(langs)
	return append([]string{"auto"}, langs...)
}

// SizeName is "0.6B" or "1.7B" (or the raw value if unknown).
func (c *Config) SizeName() string {
	switch c.TTSModelSize {
	case "0b6":
		return "0.6B"
	case "1b7":
		return "1.7B"
	}
	return c.TTSModelSize
}

// InstructModels names the models SupportsInstruct accepts, for messages.
const InstructModels = "the 1.7B CustomVoice and the VoiceDesign models"

// SupportsInstruct reports whether an instruct (style) text reaches the model:
// VoiceDesign always, CustomVoice except the 0.6B size (the official wrapper
// drops it there), Base never.
func (c *Config) SupportsInstruct() bool {
	switch c.TTSModelType {
	case TypeVoiceDesign:
		return true
	case TypeCustomVoice:
		return !strings.Contains("0b6", c.TTSModelSize) // the official test is a substring test
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
