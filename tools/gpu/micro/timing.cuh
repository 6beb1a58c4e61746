// Shared by the micro-benchmarks in this folder: the median time of a
// launch sequence (CUDA events, 20 timed runs after 3 warm-ups), a float
// rounded down to bf16's bits, and device buffers of test values.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

template <class F>
float median_us(F f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; i++) f();
  std::vector<float> t;
  for (int i = 0; i < 20; i++) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.f);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

inline uint16_t to_bf16(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  return (uint16_t)(u >> 16);
}

// n floats sin(0.37 i)·0.8 on the device.
inline float* dev_floats(size_t n) {
  std::vector<float> h(n);
  for (size_t i = 0; i < n; i++) h[i] = sinf(i * 0.37f) * 0.8f;
  float* d = nullptr;
  cudaMalloc(&d, n * 4);
  cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice);
  return d;
}

// n bf16 values cos(0.011 (i + from))·0.05 on the device.
inline uint16_t* dev_bf16(size_t n, size_t from) {
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; i++) h[i] = to_bf16(cosf((i + from) * 0.011f) * 0.05f);
  uint16_t* d = nullptr;
  cudaMalloc(&d, n * 2);
  cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice);
  return d;
}

// Reads device 0's properties into p; false, with a message, unless it is a
// Hopper GPU or later.
inline bool hopper(cudaDeviceProp& p) {
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.major >= 9) return true;
  printf("needs a Hopper GPU\n");
  return false;
}
