package voice

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"talkbox/engine/codec"
	"talkbox/engine/model"
	"talkbox/engine/safetensors"
	"talkbox/engine/speaker"
)

// Encoders derive a voice's data for one Base model: the speaker encoder's
// x-vector, and the speech tokenizer's reference codes. Safe for concurrent
// use.
type Encoders struct {
	key     string
	speaker *speaker.Encoder
	speech  *codec.Encoder
}

// NewEncoders opens both encoders of a Base model.
func NewEncoders(m *model.Model) (*Encoders, error) {
	if m.Config.TTSModelType != model.TypeBase {
		return nil, fmt.Errorf("%s is a %s model: only Base models clone voices", filepath.Base(m.Dir), m.Config.TTSModelType)
	}
	key, err := ModelKey(m)
	if err != nil {
		return nil, err
	}
	spk, err := speaker.New(m)
	if err != nil {
		return nil, err
	}
	enc, err := codec.NewEncoder(m)
	if err != nil {
		return nil, err
	}
	return &Encoders{key: key, speaker: spk, speech: enc}, nil
}

// Key is the model key derived data is stored under.
func (e *Encoders) Key() string { return e.key }

// Speaker and Speech expose the two encoders (benchmarks, `talkbox encode`).
func (e *Encoders) Speaker() *speaker.Encoder { return e.speaker }
func (e *Encoders) Speech() *codec.Encoder    { return e.speech }

// Derive returns v's data for this model, computing and storing it in
// v.Derived when it is missing (or lacks the codes a transcript needs);
// added reports that v changed and should be saved.
func (e *Encoders) Derive(v *Voice) (d Derived, added bool, err error) {
	icl := v.Mode() == "icl"
	if d, ok := v.Derived[e.key]; ok && len(d.XVector) == e.speaker.Dim() && (!icl || len(d.Codes) > 0) {
		return d, false, nil
	}
	if len(v.Audio) < e.speaker.MinSamples() {
		return Derived{}, false, fmt.Errorf("voice %q: %.2f s of reference audio is too short", v.Name, v.Seconds())
	}
	if d.XVector, err = e.speaker.Embed(v.Audio); err != nil {
		return Derived{}, false, err
	}
	if icl {
		if d.Codes, err = e.speech.Encode(v.Audio); err != nil {
			return Derived{}, false, err
		}
	}
	if v.Derived == nil {
		v.Derived = map[string]Derived{}
	}
	v.Derived[e.key] = d
	return d, true, nil
}

// ModelKey names a Base model's encoders independently of where the model
// is installed: its size and a digest of the first 64 KiB of the speaker
// encoder's output layer and of the speech encoder's first codebook. A
// re-download of the same model reuses derived data; a different model
// (another size or another fine-tune) never does.
func ModelKey(m *model.Model) (string, error) {
	if m.CodecFile == nil {
		return "", fmt.Errorf("%s has no speech tokenizer", m.Dir)
	}
	h := sha256.New()
	for _, t := range []struct {
		f    *safetensors.File
		name string
	}{
		{m.LM, "speaker_encoder.fc.weight"}, {m.LM, "speaker_encoder.fc.bias"},
		{m.CodecFile, "encoder.quantizer.semantic_residual_vector_quantizer.layers.0.codebook.embed_sum"},
	} {
		_, b, err := t.f.Raw(t.name)
		if err != nil {
			return "", err
		}
		h.Write(b[:min(len(b), 1<<16)])
	}
	size := strings.ToLower(strings.ReplaceAll(m.Config.SizeName(), ".", ""))
	return size + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}
