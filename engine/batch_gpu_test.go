package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"io"
	"log/slog"
	"talkbox/engine/backend"
	"talkbox/engine/codec"
	"talkbox/engine/cuda"
	"talkbox/engine/cudacodec"
	"talkbox/engine/golden"
	"talkbox/engine/model"
)

// With Streams > 1 on the GPU, utterances that arrive together run at once
// in the batch, each to its full length and with its first frame alone in
// the first chunk; one that then runs alone takes the single-stream LM.
// Skips without a GPU (CI).
func TestConcurrentUtterancesOnGPU(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("skipping: CUDA engine unavailable: %v", err)
	}
	const n, frames = 4, 12
	e, err := Open(context.Background(), golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), Options{Backend: BackendCUDA, Streams: n})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	stats := make([]*Stats, n)
	samples := make([]int, n)
	errs := make([]error, n)
	sizes := make([][]int, n) // frames of each chunk
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := e.Synthesize(context.Background(), greedyRequest("Hello there, how are you?", "aiden", "english", true, frames))
			if err != nil {
				errs[i] = err
				return
			}
			var pcm []float32
			var final Chunk
			for c := range ch {
				if c.Final {
					final = c
					continue
				}
				sizes[i] = append(sizes[i], c.Frames)
				pcm = append(pcm, c.PCM...)
			}
			samples[i], stats[i], errs[i] = len(pcm), final.Stats, final.Err
		}()
	}
	wg.Wait()
	batched := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("utterance %d: %v", i, errs[i])
		}
		if stats[i] == nil || stats[i].Frames != frames || samples[i] != frames*e.codec.SamplesPerFrame() {
			t.Errorf("utterance %d: %d samples, stats %+v", i, samples[i], stats[i])
		}
		if stats[i] != nil && strings.Contains(stats[i].Device, "batched") {
			batched++
			if len(sizes[i]) == 0 || sizes[i][0] != 1 {
				t.Errorf("utterance %d in the batch: chunks of %v frames, want a first chunk of 1", i, sizes[i])
			}
		}
	}
	// One may have found itself alone for lmRoute's wait (a slow start).
	if batched < n-1 {
		t.Errorf("%d of %d utterances that started together ran in the batch, want %d or more", batched, n, n-1)
	}
	// The utterances' goroutines finish just after their channels close.
	for deadline := time.Now().Add(10 * time.Second); e.route.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	ch, err := e.Synthesize(context.Background(), greedyRequest("Hello there, how are you?", "aiden", "english", true, frames))
	if err != nil {
		t.Fatal(err)
	}
	var final Chunk
	for c := range ch {
		if c.Final {
			final = c
		}
	}
	if final.Err != nil || final.Stats == nil || strings.Contains(final.Stats.Device, "batched") {
		t.Errorf("a lone utterance: %v, stats %+v, want the single-stream LM", final.Err, final.Stats)
	}
}

// TestGPUCodecFallsBackToOneSlot: when the GPU codec's pool for every stream
// cannot be made (here a size past the largest pool stands in for a GPU
// without the memory), the codec stays on the GPU with one slot instead of
// falling back to the CPU. Skips without a GPU (CI).
func TestGPUCodecFallsBackToOneSlot(t *testing.T) {
	if err := cudacodec.Available(); err != nil {
		t.Skipf("skipping: GPU codec unavailable: %v", err)
	}
	m, err := model.Load(golden.Checkpoint(t, "qwen3-tts-tiny-customvoice"), model.Options{RequireCodec: true})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := codec.New(m)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := openGPUCodec(dec, 100000, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("no GPU codec after the fallback: %v", err)
	}
	defer gpu.Close()
	if gpu.Slots() != 1 {
		t.Errorf("pool of %d slots, want the fallback's 1", gpu.Slots())
	}
	s, err := gpu.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pcm, err := s.Push(make([]backend.Codes, 2)); err != nil || len(pcm) != 2*gpu.SamplesPerFrame() {
		t.Errorf("push of 2 frames: %d samples, %v", len(pcm), err)
	}
}
