// The CUDA stream priorities of both GPU libraries (engine.cu and
// codec/codec.cu), in one place. When SMs free up, queued blocks of a
// higher-priority stream are placed first; running blocks are not preempted.
//
// The LM runs a frame as a chain of short dependent launches (the batched
// step) or as one kernel on most SMs (the decode kernel), and the codec's
// pushes, which have a frame to catch up with, used to take SMs as the
// LM's next launch waited for them: with the LM above the codec, 64 streams
// at once on an H100 went from RTF 0.173 to 0.163 and 16 from 0.077 to 0.074
// (docs/dev/batch.md). A stream's first push, which its listener waits for,
// keeps the LM's level: below it, TTFC p95 at 64 at once rose 48 -> 52 ms.
#pragma once
#include <cuda_runtime.h>

enum StreamPriority {
  PRIO_TEXT_PROJECTION,  // the next utterance's prompt: on its time to first audio
  PRIO_LM,               // decode kernel, batched step, prefills; a codec stream's first push
  PRIO_CODEC,            // the codec's later pushes: what the LM leaves
};

// create_stream makes a non-blocking stream at priority p (lower numbers
// are higher priorities in CUDA; a device without levels gives all the same).
inline cudaError_t create_stream(cudaStream_t* st, StreamPriority p) {
  int least = 0, greatest = 0;
  const cudaError_t err = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (err != cudaSuccess) return err;
  const int lm = greatest < least ? greatest + 1 : greatest;
  const int v = p == PRIO_TEXT_PROJECTION ? greatest : p == PRIO_LM ? lm : least;
  return cudaStreamCreateWithPriority(st, cudaStreamNonBlocking, v);
}
