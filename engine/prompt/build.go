// Package prompt builds the talker's input for one utterance: the prefill rows
// and the trailing text rows of docs/design/qwen3-tts-lm.md §3, for
// CustomVoice, VoiceDesign and Base (x-vector or ICL clone), in the
// streaming-text and non-streaming layouts. It works on token ids (engine/text
// makes them) and reads only the weight rows it needs.
package prompt

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"talkbox/engine/backend"
	"talkbox/engine/model"
)

// Request is one utterance in token ids.
type Request struct {
	// TextIDs is text.AssistantIDs(text): [im_start, assistant, \n] + T +
	// [im_end, \n, im_start, assistant, \n]. Only T and the first three ids
	// are embedded (qwen3-tts-lm.md §10.5).
	TextIDs  []int
	Speaker  string // CustomVoice preset voice, case-insensitive
	Language string // "auto" (also when empty) or a language name, case-insensitive
	// InstructIDs is text.InstructIDs(instruct) or nil. CustomVoice 1.7B
	// takes it as a style, VoiceDesign as the voice description; 0.6B
	// CustomVoice drops it, as the official wrapper does.
	InstructIDs []int
	XVector     []float32       // Base: the reference speaker embedding (width H)
	RefCodes    []backend.Codes // Base ICL: the reference audio's codes
	RefTextIDs  []int           // Base ICL: text.RefTextIDs(transcript)
	// Streaming selects the streaming-text layout (the text enters one token
	// per frame) instead of the non-streaming one (all text in the prefill).
	Streaming bool
}

// DefaultStreaming is the official wrapper's default layout for the model
// type: streaming for Base, non-streaming for CustomVoice and VoiceDesign.
func DefaultStreaming(c *model.Config) bool { return c.TTSModelType == model.TypeBase }

// Builder makes prompts for one opened model. It is safe for concurrent use
// and valid while the model stays open (it reads the mapped weights).
type Builder struct {
	cfg     *model.Config
	proj    projector
	codec   table   // talker.model.codec_embedding [codec vocab, H]
	cpCodec []table // code_predictor.model.codec_embedding.{0..14} [cp vocab, H]
	// P(tts_bos), P(tts_eos), P(tts_pad), computed once.
	ttsBos, ttsEos, ttsPad []float32
}

// New prepares a builder: it converts the text projection (at most two
// 2048 x 2048 matrices) and maps the embedding tables without converting them.
func New(m *model.Model) (*Builder, error) {
	if m == nil || m.Config == nil || m.LM == nil {
		return nil, fmt.Errorf("%w: prompt builder needs an opened model", model.ErrIncompleteCheckpoint)
	}
	cfg := m.Config
	tc := cfg.Talker
	H, th := tc.HiddenSize, tc.TextHiddenSize
	b := &Builder{cfg: cfg, proj: projector{textH: th, h: H, k: newKernels()}}
	var err error
	if b.proj.emb, err = openTable(m.LM, model.TensorTextEmbedding, tc.TextVocabSize, th); err != nil {
		return nil, err
	}
	if b.proj.fc1, err = readMatrix(m.LM, model.TensorTextFC1, th, th); err != nil {
		return nil, err
	}
	if b.proj.b1, err = readVector(m.LM, model.TensorTextFC1Bias, th); err != nil {
		return nil, err
	}
	if b.proj.fc2, err = readMatrix(m.LM, model.TensorTextFC2, H, th); err != nil {
		return nil, err
	}
	if b.proj.b2, err = readVector(m.LM, model.TensorTextFC2Bias, H); err != nil {
		return nil, err
	}
	if b.codec, err = openTable(m.LM, model.TensorCodecEmbedding, tc.VocabSize, H); err != nil {
		return nil, err
	}
	for g := 0; g < tc.NumCodeGroups-1; g++ {
		t, err := openTable(m.LM, model.PredictorEmbedding(g), tc.CodePredictor.VocabSize, H)
		if err != nil {
			return nil, err
		}
		b.cpCodec = append(b.cpCodec, t)
	}
	specials := []int{cfg.TTSBosTokenID, cfg.TTSEosTokenID, cfg.TTSPadTokenID, cfg.IMStartTokenID, cfg.IMEndTokenID}
	for _, id := range specials {
		if id < 0 || id >= tc.TextVocabSize {
			return nil, fmt.Errorf("%w: %s/config.json: special token id %d outside the text vocabulary of %d", model.ErrBadConfig, m.Dir, id, tc.TextVocabSize)
		}
	}
	rows := b.proj.project(specials[:3])
	b.ttsBos, b.ttsEos, b.ttsPad = rows[0], rows[1], rows[2]
	return b, nil
}

// SetTextProjector makes Build run the text projection on p (nil: back to
// the CPU). It may be called at any time, also while Build runs on other
// goroutines: a Build uses the projector it finds when it projects. The CPU
// stays the fallback: when p fails, Build logs the error (log/slog) and
// computes the rows on the CPU. P(tts_bos/eos/pad) were computed by New on
// the CPU and stay as they are. p must stay usable while set; clear it
// before p is closed, or let p return errors once closed (engine/cuda does).
func (b *Builder) SetTextProjector(p TextProjector) {
	if p == nil {
		b.proj.accel.Store(nil)
		return
	}
	b.proj.accel.Store(&accelerator{p})
}

// TTSPad returns P(tts_pad), the text term of every decode step past the
// trailing rows. The caller must not modify it.
func (b *Builder) TTSPad() []float32 { return b.ttsPad }

// voice is what the request resolved to.
type voice struct {
	langID   int       // codec language id, -1 for auto
	speaker  []float32 // the speaker row of the codec column, nil for none
	instruct []int     // instruct ids to embed, nil for none
	ref      []int     // ICL: reference text content R
	icl      bool
}

// Build makes the prompt for r.
func (b *Builder) Build(r Request) (backend.Prompt, error) {
	text, err := b.content("text", r.TextIDs, 5)
	if err != nil {
		return backend.Prompt{}, err
	}
	if len(text) == 0 {
		return backend.Prompt{}, fmt.Errorf("%w: nothing to say", ErrEmptyText)
	}
	v, err := b.resolve(r)
	if err != nil {
		return backend.Prompt{}, err
	}
	if n := b.prefillRows(r, v, len(text)); n > b.cfg.Talker.MaxPositionEmbeddings {
		return backend.Prompt{}, fmt.Errorf("%w: the prompt needs %d positions, more than the model's %d (shorten the text)", ErrUnsupported, n, b.cfg.Talker.MaxPositionEmbeddings)
	}

	// Every text-side row in one projection call, then sliced.
	role := r.TextIDs[:3]
	ids := slices.Concat(v.instruct, role, v.ref, text)
	p := b.proj.project(ids)
	pInstruct, p := p[:len(v.instruct)], p[len(v.instruct):]
	pRole, p := p[:3], p[3:]
	pRef, pText := p[:len(v.ref)], p[len(v.ref):]

	tc := b.cfg.Talker
	// Codec column K (qwen3-tts-lm.md §3): tags, speaker, pad, bos.
	var tags []int
	if v.langID < 0 {
		tags = []int{tc.CodecNoThinkID, tc.CodecThinkBosID, tc.CodecThinkEosID}
	} else {
		tags = []int{tc.CodecThinkID, tc.CodecThinkBosID, v.langID, tc.CodecThinkEosID}
	}
	var K [][]float32
	for _, id := range tags {
		K = append(K, b.codecRow(id))
	}
	if v.speaker != nil {
		K = append(K, v.speaker)
	}
	K = append(K, b.codecRow(tc.CodecPadID), b.codecRow(tc.CodecBosID))
	L := len(K)

	var prefill [][]float32
	prefill = append(prefill, pInstruct...) // text only, no codec term
	prefill = append(prefill, pRole...)     // text only
	for j := 0; j < L-1; j++ {              // tts_pad x (L-2), then tts_bos, over K[0..L-2]
		side := b.ttsPad
		if j == L-2 {
			side = b.ttsBos
		}
		prefill = append(prefill, add(side, K[j]))
	}
	codecPad, codecBos := K[L-2], K[L-1]

	var trailing [][]float32
	switch {
	case v.icl:
		prefill, trailing = b.iclTail(prefill, pRef, pText, r, codecPad, codecBos)
	case r.Streaming:
		prefill = append(prefill, add(pText[0], codecBos))
		trailing = append(slices.Clone(pText[1:]), b.ttsEos)
	default:
		for _, row := range pText {
			prefill = append(prefill, add(row, codecPad))
		}
		prefill = append(prefill, add(b.ttsEos, codecPad), add(b.ttsPad, codecBos))
		trailing = [][]float32{b.ttsPad}
	}
	return backend.Prompt{Prefill: prefill, Trailing: copyRows(trailing), TTSPad: slices.Clone(b.ttsPad)}, nil
}

// iclTail appends the Base ICL rows (qwen3-tts-lm.md §3 C): text Xt = [P(R),
// P(T), tts_eos] against codec Xc = [C(bos), F_0..F_{Tref-1}].
func (b *Builder) iclTail(prefill, pRef, pText [][]float32, r Request, codecPad, codecBos []float32) (out, trailing [][]float32) {
	xt := slices.Concat(pRef, pText, [][]float32{b.ttsEos})
	xc := [][]float32{codecBos}
	for _, f := range r.RefCodes {
		xc = append(xc, b.frameRow(f))
	}
	if !r.Streaming {
		for _, row := range xt {
			prefill = append(prefill, add(row, codecPad))
		}
		for _, row := range xc {
			prefill = append(prefill, add(row, b.ttsPad))
		}
		return prefill, [][]float32{b.ttsPad}
	}
	for i, row := range xc {
		side := b.ttsPad
		if i < len(xt) {
			side = xt[i]
		}
		prefill = append(prefill, add(side, row))
	}
	if len(xt) > len(xc) {
		return prefill, xt[len(xc):]
	}
	return prefill, [][]float32{b.ttsPad}
}

// prefillRows is the prefill length Build will produce (checked against the
// model's positions before any work is done).
func (b *Builder) prefillRows(r Request, v voice, n int) int {
	L := 4 // tags (auto) + pad + bos, no speaker
	if v.langID >= 0 {
		L++
	}
	if v.speaker != nil {
		L++
	}
	head := len(v.instruct) + 3 + L - 1
	switch {
	case v.icl && r.Streaming:
		return head + len(r.RefCodes) + 1
	case v.icl:
		return head + len(v.ref) + n + 1 + len(r.RefCodes) + 1
	case r.Streaming:
		return head + 1
	}
	return head + n + 2
}

// content checks a templated id sequence (<|im_start|>role\n ... <|im_end|>
// + suffix-1 more ids) and returns the ids between head and suffix.
func (b *Builder) content(what string, ids []int, suffix int) ([]int, error) {
	if len(ids) == 0 && what == "text" {
		return nil, fmt.Errorf("%w: no text ids", ErrEmptyText)
	}
	if len(ids) < 3+suffix || ids[0] != b.cfg.IMStartTokenID || ids[len(ids)-suffix] != b.cfg.IMEndTokenID {
		return nil, fmt.Errorf("%w: %s ids %v are not in the chat template (build them with engine/text)", ErrUnsupported, what, head(ids))
	}
	for _, id := range ids {
		if id < 0 || id >= b.cfg.Talker.TextVocabSize {
			return nil, fmt.Errorf("%w: %s token id %d is outside the text vocabulary of %d", ErrUnsupported, what, id, b.cfg.Talker.TextVocabSize)
		}
	}
	return ids[3 : len(ids)-suffix], nil
}

// resolve checks the request against the model type and finds the codec
// language, the speaker row and the optional segments.
func (b *Builder) resolve(r Request) (voice, error) {
	cfg, tc := b.cfg, b.cfg.Talker
	lang := strings.ToLower(strings.TrimSpace(r.Language))
	if lang == "" {
		lang = "auto"
	}
	if langs := cfg.Languages(); !slices.Contains(langs, lang) {
		return voice{}, fmt.Errorf("%w: %q (valid: %s)", ErrUnknownLanguage, r.Language, strings.Join(langs, ", "))
	}
	v := voice{langID: -1}
	if lang != "auto" {
		v.langID = tc.CodecLanguageID[lang]
	}
	instruct, err := b.instruct(r.InstructIDs)
	if err != nil {
		return voice{}, err
	}
	clone := len(r.XVector) > 0 || len(r.RefCodes) > 0 || len(r.RefTextIDs) > 0
	switch cfg.TTSModelType {
	case model.TypeCustomVoice:
		if clone {
			return voice{}, fmt.Errorf("%w: reference audio (x-vector, codes or transcript): only Base models clone voices", ErrUnsupported)
		}
		name := strings.ToLower(strings.TrimSpace(r.Speaker))
		id, ok := tc.SpeakerID[name]
		if !ok {
			return voice{}, fmt.Errorf("%w: %q (valid: %s)", ErrUnknownVoice, r.Speaker, strings.Join(b.voiceNames(), ", "))
		}
		v.speaker = b.codecRow(int(id))
		// Dialect speakers speak their dialect when asked for Chinese or Auto.
		if d := tc.SpeakerIsDialect[name]; d != "" && (lang == "chinese" || lang == "auto") {
			v.langID = tc.CodecLanguageID[string(d)]
		}
		if cfg.SupportsInstruct() {
			v.instruct = instruct
		}
	case model.TypeVoiceDesign:
		if strings.TrimSpace(r.Speaker) != "" {
			return voice{}, fmt.Errorf("%w: voice %q: VoiceDesign has no preset voices; describe the voice in the instruction", ErrUnsupported, r.Speaker)
		}
		if clone {
			return voice{}, fmt.Errorf("%w: reference audio (x-vector, codes or transcript): only Base models clone voices", ErrUnsupported)
		}
		v.instruct = instruct
	case model.TypeBase:
		if strings.TrimSpace(r.Speaker) != "" {
			return voice{}, fmt.Errorf("%w: voice %q: Base models have no preset voices; give reference audio", ErrUnsupported, r.Speaker)
		}
		if len(instruct) > 0 {
			return voice{}, fmt.Errorf("%w: instruction of %d tokens: Base models take none", ErrUnsupported, len(instruct))
		}
		if err := b.clone(r, &v); err != nil {
			return voice{}, err
		}
	default:
		return voice{}, fmt.Errorf("%w: model type %q", ErrUnsupported, cfg.TTSModelType)
	}
	return v, nil
}

// instruct returns the ids to embed for an instruction: all of them, or nil
// when there is none (an empty instruction counts as none, as upstream).
func (b *Builder) instruct(ids []int) ([]int, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	body, err := b.content("instruct", ids, 2)
	if err != nil || len(body) == 0 {
		return nil, err
	}
	return ids, nil
}

// clone checks the Base inputs: an x-vector always, and for ICL both the
// reference codes and the reference transcript.
func (b *Builder) clone(r Request, v *voice) error {
	H := b.cfg.Talker.HiddenSize
	if len(r.XVector) != H {
		return fmt.Errorf("%w: x-vector has %d values, this model needs %d (Base clones from a reference speaker embedding)", ErrUnsupported, len(r.XVector), H)
	}
	for i, x := range r.XVector {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: x-vector value %d is %v", ErrUnsupported, i, x)
		}
	}
	v.speaker = slices.Clone(r.XVector)
	if len(r.RefCodes) == 0 && len(r.RefTextIDs) == 0 {
		return nil // x-vector only
	}
	if len(r.RefCodes) == 0 {
		return fmt.Errorf("%w: a reference transcript without reference codes", ErrUnsupported)
	}
	ref, err := b.content("reference text", r.RefTextIDs, 2)
	if err != nil {
		return err
	}
	if len(ref) == 0 {
		return fmt.Errorf("%w: in-context cloning needs the reference audio's transcript", ErrUnsupported)
	}
	limit := b.cfg.Talker.CodePredictor.VocabSize
	for f, frame := range r.RefCodes {
		for g, c := range frame {
			if c < 0 || int(c) >= limit || (g == 0 && int(c) >= b.cfg.Talker.VocabSize) {
				return fmt.Errorf("%w: reference code %d at frame %d, group %d is outside 0..%d", ErrUnsupported, c, f, g, limit-1)
			}
		}
	}
	v.ref, v.icl = ref, true
	return nil
}

func (b *Builder) voiceNames() []string {
	var names []string
	for _, s := range b.cfg.Speakers() {
		n := s.Name
		if s.Dialect != "" {
			n += " (" + s.Dialect + ")"
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return []string{"none: this model has no preset voices"}
	}
	return names
}

// codecRow is C(id), a copy of one talker codec-embedding row (ids come from
// the validated config, so they are in range).
func (b *Builder) codecRow(id int) []float32 {
	row := make([]float32, b.cfg.Talker.HiddenSize)
	b.codec.addRow(id, row)
	return row
}

// frameRow is F = C(code0) + sum_k E_k(code_k), the embedding of one frame
// (the same sum as a decode-step input, without its text term).
func (b *Builder) frameRow(f backend.Codes) []float32 {
	row := make([]float32, b.cfg.Talker.HiddenSize)
	b.codec.addRow(int(f[0]), row)
	for g := 1; g < len(f); g++ {
		b.cpCodec[g-1].addRow(int(f[g]), row)
	}
	return row
}

func add(a, c []float32) []float32 {
	out := make([]float32, len(a))
	for i := range out {
		out[i] = a[i] + c[i]
	}
	return out
}

// copyRows gives the caller rows it owns (trailing may alias the cached
// special rows).
func copyRows(rows [][]float32) [][]float32 {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = slices.Clone(r)
	}
	return out
}

func head(ids []int) []int {
	if len(ids) > 8 {
		return ids[:8]
	}
	return ids
}
