// Package codec is the pure-Go speech-tokenizer decoder of Qwen3-TTS-12Hz:
// 16 codes per 80 ms frame in, 1920 float32 samples at 24 kHz out.
//
// Pipeline (docs/design/qwen3-tts-codec.md §3): split-RVQ dequantisation,
// causal pre-conv, an 8-layer sliding-window (72) transformer with RoPE, two
// ConvNeXt upsampling stages, and a BigVGAN-style vocoder (SnakeBeta, causal
// convs, causal transposed convs, residual units with dilations 1, 3, 9),
// clamped to [-1, 1]. Every size comes from the checkpoint's decoder_config.
//
// Every op is written once, in streaming form (a causal op plus the state it
// needs from earlier frames), and everything else is built from it:
//   - Stream (backend.CodecStream): one continuous state; frames in any split
//     give one unchunked decoder pass, bit for bit.
//   - DecodeChunked / DecodeOfficial: the official chunked_decode, each chunk
//     a fresh state fed its left context first; equals the reference output.
//   - DecodeFull: one unchunked pass.
//
// Products run through engine/codec/gemm (packed weights, an AVX2/FMA C
// kernel chosen at run time, a portable one elsewhere), split across the
// cores engine/cores grants; the attention's dot products use dot_amd64.s.
package codec
