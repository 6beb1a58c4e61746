package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"talkbox/engine/safetensors"
)

// Model is an opened checkpoint directory: configs plus the mapped weight
// files. Weights stay in the page cache; backends convert what they need.
type Model struct {
	Dir        string
	Config     *Config
	Generation GenerationConfig
	Codec      *CodecConfig      // nil when speech_tokenizer/ is absent (LM-only use)
	LM         *safetensors.File // model.safetensors
	CodecFile  *safetensors.File // speech_tokenizer/model.safetensors, nil when absent
}

// Options select what Load requires.
type Options struct {
	// RequireCodec makes a missing speech_tokenizer/ an error (synthesis needs it).
	RequireCodec bool
}

// Load opens dir, reads every config and checks that all tensors the model type
// needs exist with the right shapes. Errors name the file and the tensors.
func Load(dir string, opt Options) (*Model, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("model %s: not a directory", dir)
	}
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	gen, err := ReadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	m := &Model{Dir: dir, Config: cfg, Generation: gen}
	m.LM, err = safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	lmSpecs := LMTensors(cfg)
	if err := CheckTensors(m.LM, lmSpecs); err != nil {
		m.Close()
		return nil, err
	}
	if err := CheckFinite(m.LM, lmSpecs); err != nil {
		m.Close()
		return nil, err
	}
	speechDir := filepath.Join(dir, "speech_tokenizer")
	if _, err := os.Stat(filepath.Join(speechDir, "config.json")); errors.Is(err, os.ErrNotExist) {
		if opt.RequireCodec {
			m.Close()
			return nil, fmt.Errorf("%w: %s: no speech_tokenizer/config.json", ErrIncompleteCheckpoint, dir)
		}
		return m, nil
	}
	if m.Codec, err = ReadCodecConfig(speechDir); err != nil {
		m.Close()
		return nil, err
	}
	if m.CodecFile, err = safetensors.Open(filepath.Join(speechDir, "model.safetensors")); err != nil {
		m.Close()
		return nil, err
	}
	codecSpecs := CodecDecoderTensors(m.Codec)
	if err := CheckTensors(m.CodecFile, codecSpecs); err != nil {
		m.Close()
		return nil, err
	}
	if err := CheckFinite(m.CodecFile, codecSpecs); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Close unmaps the weight files.
func (m *Model) Close() error {
	var errs []error
	if m.LM != nil {
		errs = append(errs, m.LM.Close())
	}
	if m.CodecFile != nil {
		errs = append(errs, m.CodecFile.Close())
	}
	return errors.Join(errs...)
}

// TensorF32 reads a main-model tensor as float32.
func (m *Model) TensorF32(name string) ([]float32, error) { return m.LM.F32(name) }
