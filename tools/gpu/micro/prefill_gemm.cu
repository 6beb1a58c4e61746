// Prefill product micro-benchmark (docs/dev/batch.md, "gemm_tiles"): a
// layer's four products on the 0.6B's shapes at 320-2560 rows, run by
// gemm_staged (staged_run, as the prefills split it) and by gemm_tiles,
// event-timed (median of 20 after 3 warm-ups), with the largest difference
// between the two over the largest output. It includes the library's source
// so both run through the engine's own launch code. Not part of the build:
//   nvcc -std=c++17 -O3 -arch=sm_90 -o /tmp/prefill_gemm tools/gpu/micro/prefill_gemm.cu && /tmp/prefill_gemm
#include "../../../native/src/engine.cu"
#include "timing.cuh"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

struct Shape {
  const char* name;
  int N, K, epi;  // epi 0: norm + store (QKV), 1: residual add (O, down), 2: norm + SwiGLU (gate/up)
};

template <int EPI, bool NORM>
void both(const pf::GemmArgs& g, const SplitK& sk, float* staged_out, float& t_staged, float& t_tiles) {
  pf::GemmArgs gs = g, gt = g;
  gs.C = staged_out;
  t_staged = median_us([&] { staged_run<EPI, NORM>(0, gs, sk); });
  t_tiles = median_us([&] { pf::tiles_launch<EPI, NORM>(0, gt, false); });
}

}  // namespace

int main() {
  cudaDeviceProp p;
  if (!hopper(p)) return 1;
  const int MM = 2560, KM = 3072, NM = 4096;
  float *A, *C1, *C2;
  uint16_t *W, *W2, *nw;
  cudaMalloc(&A, (size_t)MM * KM * 4);
  cudaMalloc(&C1, (size_t)MM * NM * 4);
  cudaMalloc(&C2, (size_t)MM * NM * 4);
  cudaMalloc(&W, (size_t)NM * KM * 2);
  cudaMalloc(&W2, (size_t)NM * KM * 2);
  cudaMalloc(&nw, KM * 2);
  std::vector<float> ha((size_t)MM * KM);
  for (size_t i = 0; i < ha.size(); i++) ha[i] = sinf(i * 0.37f) * 0.8f;
  cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice);
  std::vector<uint16_t> hw((size_t)NM * KM + 128);
  for (size_t i = 0; i < hw.size(); i++) hw[i] = to_bf16(cosf(i * 0.011f) * 0.05f);
  cudaMemcpy(W, hw.data(), (size_t)NM * KM * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(W2, hw.data() + 7, (size_t)NM * KM * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(nw, hw.data() + 100, KM * 2, cudaMemcpyHostToDevice);
  SplitK sk{};
  sk.sms = p.multiProcessorCount;
  sk.clusters = true;
  sk.all_tiles = true;
  const Shape shapes[] = {{"qkv", 4096, 1024, 0}, {"o", 1024, 2048, 1}, {"gateup", 3072, 1024, 2}, {"down", 1024, 3072, 1}};
  for (int M : {320, 640, 1280, 2560}) {
    float sum_s = 0.f, sum_t = 0.f;
    for (const Shape& s : shapes) {
      // EPI_STORE for the residual products too: both kernels then write the same values.
      const pf::GemmArgs g{W, W2, s.N, s.K, A, s.K, M, C2, s.N, nw, 1e-6f};
      float ts = 0.f, tt = 0.f;
      if (s.epi == 0) both<pf::EPI_STORE, true>(g, sk, C1, ts, tt);
      if (s.epi == 1) both<pf::EPI_STORE, false>(g, sk, C1, ts, tt);
      if (s.epi == 2) both<pf::EPI_SILU, true>(g, sk, C1, ts, tt);
      const cudaError_t err = cudaDeviceSynchronize();
      std::vector<float> r1((size_t)M * s.N), r2((size_t)M * s.N);
      cudaMemcpy(r1.data(), C1, r1.size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(r2.data(), C2, r2.size() * 4, cudaMemcpyDeviceToHost);
      double diff = 0.0, top = 0.0;
      for (size_t i = 0; i < r1.size(); i++) {
        diff = std::max(diff, (double)fabsf(r1[i] - r2[i]));
        top = std::max(top, (double)fabsf(r1[i]));
      }
      // Both bf16 terms of A count: two MMAs a product element.
      const double flops = 2.0 * 2.0 * M * (s.epi == 2 ? 2 * s.N : s.N) * s.K;
      printf("M %4d %-6s gemm_staged %7.1f us  gemm_tiles %7.1f us  (%3.0f / %3.0f TFLOPS of MMAs)  difference %.2e  %s\n",
             M, s.name, ts, tt, flops / ts / 1e6, flops / tt / 1e6, diff / top, cudaGetErrorString(err));
      sum_s += ts;
      sum_t += tt;
    }
    printf("M %4d layer: gemm_staged %.1f us, gemm_tiles %.1f us\n", M, sum_s, sum_t);
  }
  return 0;
}
