// cuBLAS against the engine's own products (docs/dev/batch.md): the batched
// step's four products of a layer at 16-64 rows (gemm_staged as the step
// launches it, against cublasGemmEx on bf16 with A's two bf16 terms stacked
// as 2M rows, and with one term), and the codec's vocoder convolutions as
// im2col products in TF32 (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32) at 16
// and 64 streams a frame, with the im2col copy timed apart. Event-timed,
// median of 20 after 3 warm-ups. Not part of the build:
//   nvcc -std=c++17 -O3 -arch=sm_90 -o /tmp/cublas_probe tools/gpu/micro/cublas_probe.cu -lcublas && /tmp/cublas_probe
#include "../../../native/src/engine.cu"
#include "timing.cuh"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

// C[M][N] = A[M][K] W[N][K]^T, row-major, in cuBLAS's column-major terms.
cublasStatus_t gemm_bf16(cublasHandle_t h, const uint16_t* W, const uint16_t* A, float* C, int M, int N, int K) {
  const float one = 1.f, zero = 0.f;
  return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, CUDA_R_16BF, K, A, CUDA_R_16BF, K, &zero, C,
                      CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t gemm_tf32(cublasHandle_t h, const float* W, const float* A, float* C, int M, int N, int K) {
  const float one = 1.f, zero = 0.f;
  return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, CUDA_R_32F, K, A, CUDA_R_32F, K, &zero, C,
                      CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
}

// im2col of a dilated causal conv, channels last: out[s*T + t][j*C + c] =
// x[s][hist + t - (taps-1-j)*d][c], where each stream's input holds hist rows
// of history before its T new ones.
__global__ void im2col(const float* x, float* out, int S, int T, int C, int taps, int d, int hist) {
  const long n = (long)S * T * taps * C;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const int c = (int)(i % C);
    const int j = (int)(i / C % taps);
    const long row = i / ((long)C * taps);
    const int t = (int)(row % T), s = (int)(row / T);
    out[i] = x[((long)s * (hist + T) + hist + t - (taps - 1 - j) * d) * C + c];
  }
}

}  // namespace

int main() {
  cudaDeviceProp p;
  if (!hopper(p)) return 1;
  printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    printf("no cuBLAS\n");
    return 1;
  }
  // The step's products.
  {
    const int MM = 128, KM = 3072, NM = 6144;
    float* A = dev_floats((size_t)MM * KM);
    uint16_t* Ab = dev_bf16((size_t)MM * KM, 0);  // any values: only times are compared
    uint16_t *W = dev_bf16((size_t)NM * KM, 0), *W2 = dev_bf16((size_t)NM * KM, 7), *nw = dev_bf16(KM, 100);
    float* C1 = nullptr;
    cudaMalloc(&C1, (size_t)MM * NM * 4);
    SplitK sk{};
    sk.sms = p.multiProcessorCount;
    sk.clusters = true;
    struct Shape {
      const char* name;
      int N, K, epi;
    };
    const Shape shapes[] = {{"qkv", 4096, 1024, 0}, {"o", 1024, 2048, 1}, {"gateup", 3072, 1024, 2}, {"down", 1024, 3072, 1}};
    for (int M : {1, 16, 32, 64}) {
      float ss = 0, s2 = 0, s1 = 0;
      for (const Shape& s : shapes) {
        const pf::GemmArgs g{W, W2, s.N, s.K, A, s.K, M, C1, s.N, nw, 1e-6f};
        float ts = 0;
        if (s.epi == 0) ts = median_us([&] { staged_run<pf::EPI_STORE, true>(0, g, sk); });
        if (s.epi == 1) ts = median_us([&] { staged_run<pf::EPI_STORE, false>(0, g, sk); });
        if (s.epi == 2) ts = median_us([&] { staged_run<pf::EPI_SILU, true>(0, g, sk); });
        const int N = s.epi == 2 ? 2 * s.N : s.N;
        const float t2 = median_us([&] { gemm_bf16(h, W, Ab, C1, 2 * M, N, s.K); });
        const float t1 = median_us([&] { gemm_bf16(h, W, Ab, C1, M, N, s.K); });
        const cudaError_t err = cudaDeviceSynchronize();
        printf("M %2d %-6s gemm_staged %6.1f us  cublas 2M rows %6.1f us  M rows %6.1f us  (weights %.0f GB/s at 2M)  %s\n", M,
               s.name, ts, t2, t1, 2.0 * N * s.K / t2 / 1e3, cudaGetErrorString(err));
        ss += ts;
        s2 += t2;
        s1 += t1;
      }
      printf("M %2d layer: gemm_staged %.1f us, cublas 2M %.1f, cublas M %.1f\n", M, ss, s2, s1);
    }
    cudaFree(A);
    cudaFree(Ab);
    cudaFree(C1);
    cudaFree(W);
    cudaFree(W2);
  }
  // The vocoder's convolutions, one frame a stream.
  {
    struct Conv {
      const char* name;
      int C, N, T, taps, d;
      int reps;  // how many of the vocoder's convolutions this one stands for
    };
    const Conv convs[] = {{"dec0 k7 1024->1536", 1024, 1536, 4, 7, 1, 1}, {"b1 k7 768 d1", 768, 768, 32, 7, 1, 2},
                          {"b1 k7 768 d9", 768, 768, 32, 7, 9, 1},       {"b1 k1 768", 768, 768, 32, 1, 1, 3},
                          {"b2 k7 384 d3", 384, 384, 160, 7, 3, 3},      {"b2 k1 384", 384, 384, 160, 1, 1, 3},
                          {"b3 k7 192 d3", 192, 192, 640, 7, 3, 3},      {"b3 k1 192", 192, 192, 640, 1, 1, 3},
                          {"b4 k7 96 d3", 96, 96, 1920, 7, 3, 3},        {"b4 k1 96", 96, 96, 1920, 1, 1, 3}};
    const size_t maxx = (size_t)64 * (1920 + 54) * 96 * 4 + (size_t)64 * (640 + 54) * 192 * 4;
    const size_t maxcol = (size_t)64 * 1920 * 7 * 96 * 2;
    float *x, *col, *w, *c;
    cudaMalloc(&x, maxx * 4);
    cudaMalloc(&col, maxcol * 4);
    cudaMalloc(&w, (size_t)1536 * 7168 * 4);
    cudaMalloc(&c, (size_t)64 * 1920 * 1536 * 4);
    cudaMemset(x, 0, maxx * 4);
    cudaMemset(w, 0, (size_t)1536 * 7168 * 4);
    for (int S : {16, 64}) {
      float sg = 0, sc = 0;
      for (const Conv& v : convs) {
        const int hist = (v.taps - 1) * v.d, M = S * v.T, K = v.taps * v.C;
        const float tc = median_us([&] { im2col<<<4 * p.multiProcessorCount, 256>>>(x, col, S, v.T, v.C, v.taps, v.d, hist); });
        const float tg = median_us([&] { gemm_tf32(h, w, col, c, M, v.N, K); });
        const cudaError_t err = cudaDeviceSynchronize();
        printf("streams %2d %-20s M %6d N %5d K %5d: im2col %6.1f us  tf32 gemm %6.1f us (%.0f TFLOPS)  %s\n", S, v.name, M,
               v.N, K, tc, tg, 2.0 * M * v.N * K / tg / 1e6, cudaGetErrorString(err));
        sg += v.reps * tg;
        sc += v.reps * tc;
      }
      printf("streams %2d vocoder convs (no transposed convs): tf32 gemm %.1f us, im2col %.1f us\n", S, sg, sc);
    }
  }
  return 0;
}
