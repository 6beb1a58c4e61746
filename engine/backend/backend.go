// Package backend is the contract between the pipeline and the compute
// backends (cpu, cuda): a language model that turns prefill rows into frames of
// 16 codes, and a codec that turns frames into PCM. The pipeline, the tests and
// the benchmark are written once against these interfaces.
package backend

import (
	"context"
	"time"

	"talkbox/engine/sample"
)

// NumGroups is the number of codes per frame (1 talker + 15 code predictor).
const NumGroups = 16

// Codes is one frame: group 0 from the talker, groups 1..15 from the predictor.
type Codes [NumGroups]int32

// Frame is one generated frame with its position in the utterance.
type Frame struct {
	Index int
	Codes Codes
}

// Prompt is what the prompt builder produces for one utterance.
type Prompt struct {
	Prefill  [][]float32 // one row of width H per prefill position
	Trailing [][]float32 // text-side row added to decode input s (s < len); afterwards TTSPad
	TTSPad   []float32   // P(tts_pad), width H
}

// StopReason says why generation ended.
type StopReason string

const (
	StopEOS       StopReason = "eos"       // the talker sampled the codec EOS
	StopExact     StopReason = "exact"     // ExactFrames reached
	StopCap       StopReason = "cap"       // safety cap hit: logged, the model never said EOS
	StopCancelled StopReason = "cancelled" // the context was cancelled
)

// GenerateOptions control one utterance.
type GenerateOptions struct {
	Talker    sample.Params // group-0 sampling
	Predictor sample.Params // groups 1..15 sampling (no repetition penalty)
	Seed      uint64        // counter-based RNG seed: same seed, same codes
	// MaxFrames caps the frames emitted (safety net; hitting it is logged).
	MaxFrames int
	// ExactFrames > 0 generates exactly this many frames, ignoring EOS
	// (tests and benchmarks).
	ExactFrames int
	// TeacherCodes, when set, are fed back instead of the sampled codes
	// (teacher forcing for correctness checks); frame i uses TeacherCodes[i].
	TeacherCodes []Codes
	// OnLogits, when set, receives the processed-free raw group-0 logits of each
	// talker step and the raw code-predictor logits (tests only; slows the loop).
	OnLogits func(LogitsEvent)
	// HoldAfterFirst, when set, makes the LM wait after emitting the first
	// frame until it is closed (or the context ends). The engine sets it
	// when the LM and the codec share the CPU's cores, so the first chunk
	// is decoded without the LM's next frame competing for them; the wait
	// is not counted in the frame times.
	HoldAfterFirst <-chan struct{}
	// CodecNear, when set, reports whether the codec will be decoding on
	// the same GPU while the given frame is generated (a push in flight or
	// due just before it). A GPU LM that leaves SMs to the codec
	// (cuda.LM.ReserveSMs) takes every SM for the frames it answers false;
	// the codes are the same either way. Nil: the SMs are always left.
	CodecNear func(frame int) bool
}

// LogitsEvent reports raw logits for checks against the official outputs.
type LogitsEvent struct {
	Frame  int
	Group  int       // 0 = talker head; g = 1..15: code predictor lm_head[g-1]
	Logits []float32 // raw, before any sampling processor
	Hidden []float32 // talker: final-normed hidden state that produced group 0 (Group 0 only)
}

// Result summarises one Generate call.
type Result struct {
	Frames      int
	Stop        StopReason
	Prefill     time.Duration
	FrameTimes  []time.Duration // wall time of each frame (talker step + predictor)
	PrefillRows int
}

// LM generates frames. Generate sends each frame on out as soon as it exists
// and returns when generation stops; it never closes out. A cancelled context
// returns ctx.Err() promptly and leaves the LM usable for the next call.
// Implementations are not required to support concurrent Generate calls.
type LM interface {
	Generate(ctx context.Context, p Prompt, opt GenerateOptions, out chan<- Frame) (Result, error)
	// Device names where it runs, e.g. "CPU (2 threads)" or "NVIDIA H100 80GB HBM3".
	Device() string
	Close() error
}

// CodecStream decodes one utterance incrementally, keeping its state between
// pushes, so every frame's audio is produced exactly once.
type CodecStream interface {
	// Push decodes frames and returns len(frames)*SamplesPerFrame samples.
	Push(frames []Codes) ([]float32, error)
	Close() error
}

// Codec makes streams. It is safe to hold several streams at once.
type Codec interface {
	NewStream() (CodecStream, error)
	SamplesPerFrame() int
	SampleRate() int
}
