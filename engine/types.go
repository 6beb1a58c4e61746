package engine

import (
	"errors"
	"time"

	"talkbox/engine/backend"
	"talkbox/engine/prompt"
	"talkbox/engine/sample"
	"talkbox/engine/text"
	"talkbox/engine/voice"
)

// Sentinel errors a caller can branch on. The request errors are the prompt
// builder's and the tokenizer's own, so there is one value per condition.
var (
	ErrNoGPU          = errors.New("no usable GPU")
	ErrUnknownVoice   = prompt.ErrUnknownVoice
	ErrUnknownLang    = prompt.ErrUnknownLanguage
	ErrEmptyText      = prompt.ErrEmptyText
	ErrUnsupportedReq = prompt.ErrUnsupported
	ErrTextTooLong    = text.ErrTextTooLong // the tokenizer's: one value for "too long" wherever it is found
	ErrCancelled      = errors.New("cancelled")
	// ErrNeedsClone: a Base model speaks only in a cloned voice.
	ErrNeedsClone = errors.New("this Base model speaks in a cloned voice: add one from a recording first")
)

// Request is one utterance to synthesise.
type Request struct {
	Text  string
	Voice string // CustomVoice speaker name (case-insensitive); empty for VoiceDesign
	// Clone is a cloned voice for a Base model (required there, refused
	// elsewhere). Data it lacks for this model (x-vector, reference codes) is
	// computed and added to Clone.Derived before Synthesize returns; save
	// the voice afterwards to keep it (Clone.Derived grows by one entry).
	Clone    *voice.Voice
	Language string // "auto" (default) or a language name (case-insensitive)
	Instruct string // style (CustomVoice 1.7B) or voice description (VoiceDesign)
	// StreamingText selects the prompt layout: nil = the model's default
	// (non-streaming for CustomVoice and VoiceDesign, streaming for Base).
	StreamingText *bool
	// Talker and Predictor override generation_config.json when non-nil.
	Talker, Predictor *sample.Params
	Seed              uint64
	ExactFrames       int // > 0: exactly this many frames, ignoring EOS
	// ChunkFrames is the number of frames per PCM chunk after the first
	// (the first chunk is always one frame). 0 = the engine's choice: each
	// chunk as large as the audio already sent covers twice over, up to 8
	// frames, so a machine far ahead of real time decodes in fewer, larger
	// pushes without making the listener wait.
	ChunkFrames int
}

// Chunk is a piece of audio on its way to the speaker.
type Chunk struct {
	PCM        []float32 // 24 kHz mono, in [-1, 1]
	FirstFrame int       // index of the first frame in this chunk
	Frames     int
	Codes      []backend.Codes
	Final      bool          // the last chunk of the utterance (may hold no PCM)
	Since      time.Duration // from Synthesize being called to this chunk being ready
	Err        error         // set on the final chunk when synthesis failed
	Stats      *Stats        // set on the final chunk
}

// Stats describe one utterance; the UI and `bench` both use them.
type Stats struct {
	TTFC          time.Duration // request -> first PCM chunk ready
	Prepare       time.Duration // tokenizer + prompt builder (part of TTFC)
	Prefill       time.Duration // LM prefill (part of TTFC)
	FirstFrameLM  time.Duration // LM time of frame 0 after the prefill (part of TTFC)
	FirstCodec    time.Duration // codec time of the first chunk (part of TTFC)
	Frames        int
	LMPerFrame    time.Duration // mean talker+predictor wall time per frame
	CodecPerFrame time.Duration // mean codec time per frame
	Wall          time.Duration
	AudioSeconds  float64
	RTF           float64 // Wall / AudioSeconds
	Stop          backend.StopReason
	Device        string
}
