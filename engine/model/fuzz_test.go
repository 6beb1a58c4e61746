package model

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func addSeeds(f *testing.F, dir string) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seed", dir, "*.json"))
	if len(seeds) == 0 {
		f.Fatalf("no seed files in testdata/seed/%s", dir)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"talker_config": {"num_hidden_layers": 1000000}}`))
}

// maxSpecs bounds the tensor list any accepted config may ask for: every
// count that sizes it is capped (layers, upsampling stages, res2net blocks).
const maxSpecs = 2*MaxLayers*11 + 2*16 + 40 + 3*2*MaxRes2NetScale + 60

// FuzzParseConfig: config.json bytes never panic; what is accepted has
// bounded sizes and a bounded tensor list; what is rejected wraps
// ErrBadConfig.
func FuzzParseConfig(f *testing.F) {
	addSeeds(f, "config")
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("config.json", b)
		if err != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("error does not wrap ErrBadConfig: %v", err)
			}
			if len(err.Error()) > 4000 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if n := len(LMTensors(c)); n > maxSpecs {
			t.Fatalf("accepted config asks for %d tensors", n)
		}
		_ = c.Speakers()
		_ = c.Languages()
	})
}

func FuzzParseGenerationConfig(f *testing.F) {
	addSeeds(f, "generation")
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGenerationConfig("generation_config.json", b)
		if err != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("error does not wrap ErrBadConfig: %v", err)
			}
			return
		}
		if g.TopP < 0 || g.TopP > 1 || g.TopK < 0 || g.Temperature < 0 || g.RepetitionPenalty <= 0 || g.MaxNewTokens < 0 {
			t.Fatalf("accepted unusable values %+v", g)
		}
	})
}

func FuzzParseCodecConfig(f *testing.F) {
	addSeeds(f, "codec")
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCodecConfig("speech_tokenizer/config.json", b)
		if err != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("error does not wrap ErrBadConfig: %v", err)
			}
			return
		}
		if n := len(CodecDecoderTensors(c)); n > maxSpecs {
			t.Fatalf("accepted config asks for %d tensors", n)
		}
		if spf := c.Decoder.SamplesPerFrame(); spf <= 0 || spf > MaxSamplesPerFrame {
			t.Fatalf("samples per frame %d", spf)
		}
	})
}
