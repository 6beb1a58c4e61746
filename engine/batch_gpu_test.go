package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"talkbox/engine/cuda"
	"talkbox/engine/golden"
)

// With Streams > 1 on the GPU, utterances that arrive together run at once:
// one on the single-stream LM, the rest in the batch, each to its full length
// and with its first frame alone in the first chunk. Skips without a GPU (CI).
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
	if batched < 1 {
		t.Errorf("%d of %d utterances ran in the batch, want at least 1", batched, n)
	}
}
