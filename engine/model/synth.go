package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"talkbox/engine/cores"
	"talkbox/engine/safetensors"
	"talkbox/internal/atomicfile"
)

// SynthOptions describe a synthetic checkpoint: the real file layout and
// shapes with random weights, so speed can be measured without real weights.
// Random weights do not speak; the audio they make is noise.
type SynthOptions struct {
	Size          string // "0.6b" or "1.7b"
	Type          string // TypeCustomVoice (default), TypeVoiceDesign or TypeBase
	Seed          uint64
	Codec         bool   // also write speech_tokenizer/ with the real decoder shapes
	TokenizerFrom string // optional directory to copy vocab.json, merges.txt, tokenizer_config.json from
}

// SynthConfig returns the config.json of a released checkpoint of that size
// and type (values from docs/design/qwen3-tts-lm.md §1.2).
func SynthConfig(size, typ string) (*Config, error) {
	if typ == "" {
		typ = TypeCustomVoice
	}
	var hidden, inter int
	var sizeTag string
	switch strings.ToLower(strings.ReplaceAll(size, ".", "")) {
	case "06b", "0b6":
		hidden, inter, sizeTag = 1024, 3072, "0b6"
	case "17b", "1b7":
		hidden, inter, sizeTag = 2048, 6144, "1b7"
	default:
		return nil, fmt.Errorf("synthetic checkpoint: unknown size %q (want 0.6b or 1.7b)", size)
	}
	langs := map[string]int{"english": 2050, "german": 2053, "spanish": 2054, "chinese": 2055, "japanese": 2058,
		"french": 2061, "korean": 2064, "russian": 2069, "italian": 2070, "portuguese": 2071}
	c := &Config{ModelType: "qwen3_tts", TokenizerType: "qwen3_tts_tokenizer_12hz", TTSModelSize: sizeTag, TTSModelType: typ,
		IMStartTokenID: 151644, IMEndTokenID: 151645, TTSPadTokenID: 151671, TTSBosTokenID: 151672, TTSEosTokenID: 151673,
		AssistantTokenID: 77091, TransformersVer: "4.57.3",
		Talker: TalkerConfig{HiddenSize: hidden, IntermediateSize: inter, NumHiddenLayers: 28, NumAttentionHeads: 16,
			NumKeyValueHeads: 8, HeadDim: 128, VocabSize: 3072, TextVocabSize: 151936, TextHiddenSize: 2048, NumCodeGroups: 16,
			RMSNormEps: 1e-6, RopeTheta: 1e6, MaxPositionEmbeddings: 32768, HiddenAct: "silu",
			RopeScaling: &RopeScaling{Interleaved: true, MRopeSection: []int{24, 20, 20}, RopeType: "default"},
			CodecPadID:  2148, CodecBosID: 2149, CodecEosID: 2150, CodecThinkID: 2154, CodecNoThinkID: 2155,
			CodecThinkBosID: 2156, CodecThinkEosID: 2157, CodecLanguageID: langs,
			SpeakerID: map[string]SpeakerIDValue{}, SpeakerIsDialect: map[string]DialectValue{},
			CodePredictor: CodePredictorConfig{HiddenSize: 1024, IntermediateSize: 3072, NumHiddenLayers: 5, NumAttentionHeads: 16,
				NumKeyValueHeads: 8, HeadDim: 128, VocabSize: 2048, NumCodeGroups: 16, RMSNormEps: 1e-6, RopeTheta: 1e6}}}
	switch typ {
	case TypeCustomVoice:
		langs["sichuan_dialect"], langs["beijing_dialect"] = 2062, 2074
		for name, id := range map[string]int{"serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861,
			"ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878} {
			c.Talker.SpeakerID[name] = SpeakerIDValue(id)
			c.Talker.SpeakerIsDialect[name] = ""
		}
		c.Talker.SpeakerIsDialect["eric"] = "sichuan_dialect"
		c.Talker.SpeakerIsDialect["dylan"] = "beijing_dialect"
	case TypeVoiceDesign:
	case TypeBase:
		c.SpeakerEncoder = &SpeakerEncCfg{EncDim: hidden, SampleRate: 24000}
		c.SpeakerEncoder.applyDefaults()
	default:
		return nil, fmt.Errorf("synthetic checkpoint: unknown model type %q", typ)
	}
	return c, c.validate()
}

// synthEncoderConfig is the released encoder_config (a transformers
// MimiConfig; docs/design/qwen3-tts-codec.md §5): SEANet 64 filters, strides
// 4-5-6-8, an 8-layer 512-wide transformer (8 heads x 64, MLP 2048, window
// 250), 32 RVQ levels of 2048 x 256, one of them semantic.
const synthEncoderConfig = `{"_frame_rate": 12.5, "attention_bias": false, "attention_dropout": 0.0, "audio_channels": 1,
"codebook_dim": 256, "codebook_size": 2048, "compress": 2, "dilation_growth_rate": 2, "head_dim": 64, "hidden_act": "gelu",
"hidden_size": 512, "initializer_range": 0.02, "intermediate_size": 2048, "kernel_size": 7, "last_kernel_size": 3,
"layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000, "norm_eps": 1e-05, "normalize": false,
"num_attention_heads": 8, "num_filters": 64, "num_hidden_layers": 8, "num_key_value_heads": 8, "num_quantizers": 32,
"num_residual_layers": 1, "num_semantic_quantizers": 1, "pad_mode": "constant", "residual_kernel_size": 3,
"rope_theta": 10000.0, "sampling_rate": 24000, "sliding_window": 250, "trim_right_ratio": 1.0, "upsample_groups": 512,
"upsampling_ratios": [8, 6, 5, 4], "use_cache": false, "use_causal_conv": true, "use_conv_shortcut": false,
"use_streaming": false, "vector_quantization_hidden_dimension": 256}`

// The two preprocessor configs every release carries (the main one is the
// processor's metadata; the speech tokenizer's is its feature extractor).
var (
	synthPreprocessor = map[string]any{"padding_side": "left", "padding_value": 0.0,
		"processor_class": "Qwen3TTSProcessor", "return_attention_mask": true}
	synthCodecPreprocessor = map[string]any{"chunk_length_s": nil, "feature_extractor_type": "EncodecFeatureExtractor",
		"feature_size": 1, "overlap": nil, "padding_side": "right", "padding_value": 0.0, "return_attention_mask": true,
		"sampling_rate": 24000}
)

// SynthCodecConfig is the released speech_tokenizer/config.json
// (docs/design/qwen3-tts-codec.md §1).
func SynthCodecConfig() *CodecConfig {
	return &CodecConfig{Encoder: json.RawMessage(synthEncoderConfig), ModelType: "qwen3_tts_tokenizer_12hz", EncoderValidNumQuantizers: 16, InputSampleRate: 24000,
		OutputSampleRate: 24000, DecodeUpsampleRate: 1920, EncodeDownsampleRate: 1920,
		Decoder: CodecDecoderConfig{CodebookSize: 2048, CodebookDim: 512, LatentDim: 1024, HiddenSize: 512, HeadDim: 64,
			NumAttentionHeads: 16, NumKeyValueHeads: 16, IntermediateSize: 1024, NumHiddenLayers: 8, SlidingWindow: 72,
			RopeTheta: 10000, RMSNormEps: 1e-5, MaxPositionEmbeds: 8000, NumQuantizers: 16, UpsamplingRatios: []int{2, 2},
			UpsampleRates: []int{8, 5, 4, 3}, DecoderDim: 1536}}
}

// WriteSynthetic writes a complete synthetic checkpoint into dir.
func WriteSynthetic(dir string, o SynthOptions) error {
	cfg, err := SynthConfig(o.Size, o.Type)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// config.json as released: the speaker encoder's section holds only
	// enc_dim and sample_rate (the loader fills in the class defaults).
	released := *cfg
	if cfg.SpeakerEncoder != nil {
		released.SpeakerEncoder = &SpeakerEncCfg{EncDim: cfg.SpeakerEncoder.EncDim, SampleRate: cfg.SpeakerEncoder.SampleRate}
	}
	if err := writeJSONFile(filepath.Join(dir, "config.json"), &released); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(dir, "preprocessor_config.json"), synthPreprocessor); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(dir, "generation_config.json"), DefaultGenerationConfig()); err != nil {
		return err
	}
	if err := writeRandomTensors(filepath.Join(dir, "model.safetensors"), LMTensors(cfg), safetensors.BF16, o.Seed); err != nil {
		return err
	}
	if o.TokenizerFrom != "" {
		for _, f := range []string{"vocab.json", "merges.txt", "tokenizer_config.json"} {
			if err := copyFile(filepath.Join(o.TokenizerFrom, f), filepath.Join(dir, f)); err != nil {
				return fmt.Errorf("synthetic checkpoint: tokenizer: %w", err)
			}
		}
	}
	if !o.Codec {
		return nil
	}
	sdir := filepath.Join(dir, "speech_tokenizer")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return err
	}
	ccfg := SynthCodecConfig()
	if err := writeJSONFile(filepath.Join(sdir, "config.json"), ccfg); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(sdir, "preprocessor_config.json"), synthCodecPreprocessor); err != nil {
		return err
	}
	tensors := CodecDecoderTensors(ccfg)
	// The encoder (audio to codes) only serves voice cloning: Base
	// checkpoints get it, the others stay lighter for benchmarks.
	if cfg.TTSModelType == TypeBase {
		ec, err := ccfg.EncoderConfig()
		if err != nil {
			return err
		}
		tensors = append(tensors, CodecEncoderTensors(ec)...)
	}
	return writeRandomTensors(filepath.Join(sdir, "model.safetensors"), tensors, safetensors.F32, o.Seed+1)
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := atomicfile.Create(dst, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Abort()
		return err
	}
	return out.Commit()
}

// synthValueScale picks a plausible distribution per tensor so activations
// stay finite through 28 layers: norms near 1, SnakeBeta log-params and
// cluster usage positive-ish, weights ~ U with std 1/sqrt(fan_in).
func synthValueScale(t TensorSpec) (center, halfWidth float64) {
	name := t.Name
	switch {
	case strings.HasSuffix(name, "norm.weight") || strings.HasSuffix(name, "layernorm.weight"):
		return 1, 0.1
	case strings.HasSuffix(name, "cluster_usage"):
		return 1, 0.5
	case strings.HasSuffix(name, ".alpha") || strings.HasSuffix(name, ".beta"):
		return 0, 0.1
	case strings.HasSuffix(name, "scale") || strings.HasSuffix(name, "gamma"):
		return 0.1, 0.02
	case strings.HasSuffix(name, "bias"):
		return 0, 0.05
	case strings.Contains(name, "embedding") || strings.Contains(name, "embedding_sum"):
		return 0, math.Sqrt(3)
	}
	fanIn := 1
	for _, d := range t.Shape[1:] {
		fanIn *= d
	}
	return 0, math.Sqrt(3) / math.Sqrt(float64(fanIn))
}

// writeRandomTensors streams a safetensors file tensor by tensor, filling
// each in parallel from a per-tensor seed, so multi-GB files need little RAM.
func writeRandomTensors(path string, specs []TensorSpec, dt safetensors.DType, seed uint64) error {
	specs = append([]TensorSpec(nil), specs...)
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	header := map[string]any{"__metadata__": map[string]string{"format": "pt", "talkbox": "synthetic random weights"}}
	var off int64
	for _, s := range specs {
		n := int64(dt.Size())
		for _, d := range s.Shape {
			n *= int64(d)
		}
		header[s.Name] = map[string]any{"dtype": dt, "shape": s.Shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	w := bufio.NewWriterSize(f, 4<<20)
	binary.Write(w, binary.LittleEndian, uint64(len(hj)))
	w.Write(hj)
	for i, s := range specs {
		elems := 1
		for _, d := range s.Shape {
			elems *= d
		}
		buf := make([]byte, elems*dt.Size())
		center, hw := synthValueScale(s)
		fillRandom(buf, dt, center, hw, seed*1000003+uint64(i))
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("synthetic checkpoint: write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("synthetic checkpoint: write %s: %w", path, err)
	}
	return f.Commit()
}

// fillRandom fills buf with uniform values in center±halfWidth, split across
// goroutines; each block has its own splitmix64 stream.
func fillRandom(buf []byte, dt safetensors.DType, center, halfWidth float64, seed uint64) {
	size := dt.Size()
	n := len(buf) / size
	const block = 1 << 16
	blocks := (n + block - 1) / block
	workers := cores.Limit()
	var wg sync.WaitGroup
	next := make(chan int, blocks)
	for b := 0; b < blocks; b++ {
		next <- b
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				state := seed ^ (uint64(b)+1)*0x9e3779b97f4a7c15
				end := min((b+1)*block, n)
				for i := b * block; i < end; i++ {
					state += 0x9e3779b97f4a7c15
					z := state
					z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
					z = (z ^ (z >> 27)) * 0x94d049bb133111eb
					z ^= z >> 31
					u := float64(z>>11)/float64(1<<53)*2 - 1
					v := float32(center + halfWidth*u)
					if size == 2 {
						binary.LittleEndian.PutUint16(buf[2*i:], safetensors.F32ToBF16(v))
					} else {
						binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
					}
				}
			}
		}()
	}
	wg.Wait()
}
