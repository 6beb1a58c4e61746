// The codec's products of several streams at 16 and 64 streams a frame on
// k_gemm_wg (wgmma, native/codec/wgmma.cuh) where the codec takes it,
// against k_gemm_tc, as the codec plans them (plan_tiled: tiles, K
// split and its sum; shared memory as a launch of 64 streams, and as one
// of 16 with one CTA an SM): event-timed medians of 20 after 3 warm-ups, and
// the largest difference to k_gemm_tc's output over its largest value. Not
// part of the build:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/codec_wg tools/gpu/micro/codec_wg.cu && /tmp/codec_wg
#include "../../../native/codec/codec.cu"
#include "timing.cuh"

#include <cmath>

using namespace tbc;

int main() {
  tbc_model m;
  cudaDeviceGetAttribute(&m.sms, cudaDevAttrMultiProcessorCount, 0);
  m.tc_pad[0] = one_cta_pad(0, k_gemm_tc<64, 64, true>);
  m.tc_pad[1] = one_cta_pad(0, k_gemm_tc<128, 32, true>);
  if (!tbwg::image_has_wgmma(0)) {
    printf("no wgmma in this build or device\n");
    return 1;
  }
  wgmma_smem(&m, 0, 96, k_gemm_wg<96>);
  wgmma_smem(&m, 1, 128, k_gemm_wg<128>);
  struct Conv {
    const char* name;
    int C, N, T, taps, d;
  };
  const Conv convs[] = {{"dec0 k7 1024->1536", 1024, 1536, 4, 7, 1}, {"b1 k7 768 d9", 768, 768, 32, 7, 9},
                        {"b1 k1 768", 768, 768, 32, 1, 1},          {"b2 k7 384 d3", 384, 384, 160, 7, 3},
                        {"b2 k1 384", 384, 384, 160, 1, 1},          {"b3 k7 192 d3", 192, 192, 640, 7, 3},
                        {"b3 k1 192", 192, 192, 640, 1, 1},          {"b4 k7 96 d3", 96, 96, 1920, 7, 3},
                        {"b4 k1 96", 96, 96, 1920, 1, 1},            {"up pw1 1024->4096", 1024, 4096, 2, 1, 1}};
  const size_t xmax = (size_t)64 * 1920 * 96 + 64 * 1024, wmax = (size_t)4096 * 7168, cmax = (size_t)64 * 1920 * 96 * 8;
  const size_t wsmax = (size_t)64 << 20;
  float *x, *w, *c1, *c2, *ws;
  cudaMalloc(&x, xmax * 4);
  cudaMalloc(&w, wmax * 4);
  cudaMalloc(&c1, cmax * 4);
  cudaMalloc(&c2, cmax * 4);
  cudaMalloc(&ws, wsmax * 4);
  std::vector<float> h(std::max(xmax, wmax));
  for (size_t i = 0; i < xmax; i++) h[i] = sinf(i * 0.37f) * 0.8f;
  cudaMemcpy(x, h.data(), xmax * 4, cudaMemcpyHostToDevice);
  for (size_t i = 0; i < wmax; i++) h[i] = cosf(i * 0.011f) * 0.05f;
  cudaMemcpy(w, h.data(), wmax * 4, cudaMemcpyHostToDevice);
  // Rounded to TF32 as the codec's copy for k_gemm_wg (DevConv::wt) is;
  // k_gemm_tc rounds them again, to the same values.
  k_round_tf32<<<4096, 256>>>(w, w, wmax);
  for (int S : {16, 64}) {
    float sum[2] = {0, 0};
    for (const Conv& v : convs) {
      const int hist = (v.taps - 1) * v.d, M = S * v.T, K = v.taps * v.C;
      if ((size_t)M * v.N > cmax) continue;
      // One long sequence of M rows after hist rows of history.
      const AOp a{x + (size_t)hist * v.C, v.C, v.d, Rows{nullptr, 1, 0, 0}};
      const int wg = wg_choice(&m, a, M, v.N, K);
      printf("streams %2d %-20s M %6d N %5d K %5d:", S, v.name, M, v.N, K);
      std::vector<float> ref;
      float row[2] = {0, 0};
      for (int variant = 0; variant < (wg < 0 ? 1 : 2); variant++) {
        const TilePlan p = plan_tiled(&m, true, S <= kOneCtaMaxStreams, a, M, v.N, K, variant ? wg : -1);
        if ((size_t)p.S * M * v.N > wsmax) {
          printf("  (workspace)");
          continue;
        }
        Epi e{};
        e.out1 = variant ? c2 : c1;
        e.rout1 = Rows{nullptr, 1, 0, 0};
        const float t = median_us([&] {
          p.kernel<<<p.grid, 256, p.smem>>>(a, w, M, v.N, K, p.kChunk, e, ws);
          if (p.S > 1) k_splitk_epi<<<(int)std::min<size_t>(((size_t)M * v.N + 255) / 256, 4096), 256>>>(ws, p.S, M, v.N, e);
        });
        const cudaError_t err = cudaDeviceSynchronize();
        std::vector<float> r((size_t)M * v.N);
        cudaMemcpy(r.data(), e.out1, r.size() * 4, cudaMemcpyDeviceToHost);
        double diff = 0, top = 0;
        if (variant == 0) ref = r;
        for (size_t i = 0; i < r.size(); i++) {
          diff = std::max(diff, (double)fabsf(r[i] - ref[i]));
          top = std::max(top, (double)fabsf(ref[i]));
        }
        printf("  %s %6.1f us (%3.0f TFLOPS, %4u CTAs x %d) %.1e %s", variant ? "wg" : "tc", t,
               2.0 * M * v.N * K / t / 1e6, p.grid.x * p.grid.y, p.S, diff / top, err == cudaSuccess ? "" : cudaGetErrorString(err));
        row[variant] = t;
      }
      printf("\n");
      if (row[1] > 0)
        for (int i = 0; i < 2; i++) sum[i] += row[i];
    }
    printf("streams %2d sums over the shapes k_gemm_wg takes: tc %.1f us, wg %.1f\n", S, sum[0], sum[1]);
  }
  return 0;
}
