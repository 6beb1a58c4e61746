// Prefill product micro-benchmark (docs/dev/batch.md, "gemm_tiles", "gemm_wg"):
// a layer's four products on the 0.6B's shapes at 320-2560 rows, run by
// gemm_staged (staged_run, as the prefills split it), gemm_tiles and gemm_wg
// (128 and 256 weight rows a CTA),
// event-timed (median of 20 after 3 warm-ups), each with its largest error
// over the largest output against a double-precision reference of 256
// sampled outputs (the same bf16 weights and fp32 activations). It includes
// the library's source so all run through the engine's own launch code. Not
// part of the build:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/prefill_gemm tools/gpu/micro/prefill_gemm.cu && /tmp/prefill_gemm
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

float bf16_value(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float v;
  memcpy(&v, &u, 4);
  return v;
}

// The reference of output (m, n): epi 0 RMSNorm(A) W^T, 1 A W^T, 2 SiLU(gate) * up of RMSNorm(A),
// from the host copies of what was uploaded (A's rows K apart, as the kernels read them).
double reference(const float* a, const uint16_t* w, const uint16_t* w2, const uint16_t* nw, int K, int epi, int m, int n) {
  const float* x = a + (size_t)m * K;
  double ss = 0.0, d1 = 0.0, d2 = 0.0;
  for (int k = 0; k < K; k++) {
    const double v = x[k] * (epi == 1 ? 1.0 : bf16_value(nw[k]));
    ss += (double)x[k] * x[k];
    d1 += v * bf16_value(w[(size_t)n * K + k]);
    if (epi == 2) d2 += v * bf16_value(w2[(size_t)n * K + k]);
  }
  const double sc = epi == 1 ? 1.0 : 1.0 / sqrt(ss / K + 1e-6);
  if (epi != 2) return d1 * sc;
  const double gt = d1 * sc;
  return gt / (1.0 + exp(-gt)) * d2 * sc;
}

}  // namespace

int main() {
  cudaDeviceProp p;
  if (!hopper(p)) return 1;
  const int MM = 2560, KM = 3072, NM = 4096;
  float *A, *C1;
  uint16_t *W, *W2, *nw;
  cudaMalloc(&A, (size_t)MM * KM * 4);
  cudaMalloc(&C1, (size_t)MM * NM * 4);
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
  const char* names[4] = {"gemm_staged", "gemm_tiles", "wg128", "wg256"};
  for (int M : {320, 640, 1280, 2560}) {
    float sum[4] = {};
    for (const Shape& s : shapes) {
      // EPI_STORE for the residual products too: every kernel then writes the same values.
      const pf::GemmArgs g{W, W2, s.N, s.K, A, s.K, M, C1, s.N, nw, 1e-6f};
      float t[4] = {};
      double err[4] = {};
      for (int kind = 0; kind < 4; kind++) {
        const auto run = [&] {
          const auto go = [&](auto epi, auto norm) {
            constexpr int E = decltype(epi)::value;
            constexpr bool N = decltype(norm)::value;
            if (kind == 0) staged_run<E, N>(0, g, sk);
            if (kind == 1) pf::tiles_launch<E, N>(0, g, false);
            if (kind == 2) pf::wg_launch_bn<E, N, 128>(0, g, false);
            if (kind == 3) pf::wg_launch_bn<E, N, 256>(0, g, false);
          };
          if (s.epi == 0) go(std::integral_constant<int, pf::EPI_STORE>{}, std::true_type{});
          if (s.epi == 1) go(std::integral_constant<int, pf::EPI_STORE>{}, std::false_type{});
          if (s.epi == 2) go(std::integral_constant<int, pf::EPI_SILU>{}, std::true_type{});
        };
        cudaMemset(C1, 0xff, (size_t)M * s.N * 4);  // NaN: an output never written shows
        t[kind] = median_us(run);
        const cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
          printf("%s: %s\n", names[kind], cudaGetErrorString(e));
          return 1;
        }
        std::vector<float> r((size_t)M * s.N);
        cudaMemcpy(r.data(), C1, r.size() * 4, cudaMemcpyDeviceToHost);
        double top = 0.0, worst = 0.0;
        bool finite = true;
        for (float v : r) {
          finite = finite && std::isfinite(v);
          top = std::max(top, (double)fabsf(v));
        }
        for (int i = 0; i < 256; i++) {
          const int m = (int)((i * 2654435761u) % (unsigned)M), n = (int)((i * 40503u + 17) % (unsigned)s.N);
          worst = std::max(worst, fabs(r[(size_t)m * s.N + n] - reference(ha.data(), hw.data(), hw.data() + 7, hw.data() + 100, s.K, s.epi, m, n)));
        }
        err[kind] = finite ? worst / top : INFINITY;
      }
      // Both bf16 terms of A count: two MMAs a product element.
      const double flops = 2.0 * 2.0 * M * (s.epi == 2 ? 2 * s.N : s.N) * s.K;
      printf("M %4d %-6s", M, s.name);
      for (int k = 0; k < 4; k++) {
        printf("  %s %6.1f us %3.0f TF err %.1e", names[k], t[k], flops / t[k] / 1e6, err[k]);
        sum[k] += t[k];
      }
      printf("\n");
    }
    printf("M %4d layer:", M);
    for (int k = 0; k < 4; k++) printf(" %s %.1f us", names[k], sum[k]);
    printf("\n");
  }
  return 0;
}
