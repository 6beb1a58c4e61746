// The talker's text projection on the GPU: P = fc2(SiLU(fc1 x + b1)) + b2
// for rows of already looked-up text embeddings (tb_project_text). It is a
// side job beside the decode kernel: its own stream, weights and buffers, so
// it can run while another thread drives frames on the engine's stream.
//
// Each Linear is one launch: on Hopper the engine's gemm_staged (see
// tb_project_text), elsewhere linear_bf16: one warp per output feature j,
// 16-byte weight loads (8 bf16) per lane, rows in register tiles of TP_RT
// (the weight row is re-read per tile; at 2048 x 2048 the 12 MB of both
// weights stay in L2 between tiles). Every sum is fp32 with fp32
// accumulation, and a row's value does not depend on which other rows share
// the launch (each row has its own accumulator and the same summation order).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "kernel.cuh"  // bf16 unpacking and warp_sum, shared with the decode kernel
#include "stream_priority.cuh"

namespace tbtp {

constexpr int TP_THREADS = 256;  // 8 warps (output features) per block
constexpr int TP_RT = 8;         // rows per register tile
constexpr int TP_CHUNK = 256;    // rows per H2D / launch / D2H round (buffer size)

// y[r][j] = b[j] + sum_k W[j][k] x[r][k] (SiLU applied when SILU), for
// r < rows, j < N. W is [N][K] bf16 row-major, b [N] bf16, x [rows][K] and
// y [rows][N] fp32. VEC needs K % 8 == 0 (16-byte aligned weight rows and
// 32-byte aligned x rows).
template <bool VEC, bool SILU>
__global__ void __launch_bounds__(TP_THREADS)
    linear_bf16(const uint16_t* __restrict__ W, const uint16_t* __restrict__ b, const float* __restrict__ x,
                int rows, int K, int N, float* __restrict__ y) {
  const int j = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);
  const int lane = threadIdx.x & 31;
  if (j >= N) return;  // whole warps leave together
  const uint16_t* wr = W + (size_t)j * K;
  const float bias = tb::bf(b[j]);
  for (int r0 = 0; r0 < rows; r0 += TP_RT) {
    const int nr = min(TP_RT, rows - r0);
    const float* xt = x + (size_t)r0 * K;
    float acc[TP_RT];
#pragma unroll
    for (int r = 0; r < TP_RT; r++) acc[r] = 0.f;
    if (VEC) {
      for (int k = lane * 8; k < K; k += 32 * 8) {
        const uint4 wv = __ldg(reinterpret_cast<const uint4*>(wr + k));
        const uint32_t wp[4] = {wv.x, wv.y, wv.z, wv.w};
        float w[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
          w[2 * i] = tb::bflo(wp[i]);
          w[2 * i + 1] = tb::bfhi(wp[i]);
        }
#pragma unroll
        for (int r = 0; r < TP_RT; r++) {
          if (r < nr) {
            const float4* xp = reinterpret_cast<const float4*>(xt + (size_t)r * K + k);
            const float4 lo = __ldg(xp), hi = __ldg(xp + 1);
            float s = acc[r];
            s = fmaf(w[0], lo.x, s);
            s = fmaf(w[1], lo.y, s);
            s = fmaf(w[2], lo.z, s);
            s = fmaf(w[3], lo.w, s);
            s = fmaf(w[4], hi.x, s);
            s = fmaf(w[5], hi.y, s);
            s = fmaf(w[6], hi.z, s);
            s = fmaf(w[7], hi.w, s);
            acc[r] = s;
          }
        }
      }
    } else {
      for (int k = lane; k < K; k += 32) {
        const float w = tb::bf(__ldg(wr + k));
#pragma unroll
        for (int r = 0; r < TP_RT; r++)
          if (r < nr) acc[r] = fmaf(w, __ldg(xt + (size_t)r * K + k), acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < TP_RT; r++) acc[r] = tb::warp_sum(acc[r]);
    // Every lane holds every row's sum; lane r writes row r.
#pragma unroll
    for (int r = 0; r < TP_RT; r++) {
      if (lane == r && r < nr) {
        float v = acc[r] + bias;
        if (SILU) v = v / (1.f + expf(-v));
        y[(size_t)(r0 + r) * N + j] = v;
      }
    }
  }
}

template <bool SILU>
cudaError_t launch_linear(bool vec, const uint16_t* W, const uint16_t* b, const float* x, int rows, int K, int N,
                          float* y, cudaStream_t s) {
  const int blocks = (N + TP_THREADS / 32 - 1) / (TP_THREADS / 32);
  if (vec)
    linear_bf16<true, SILU><<<blocks, TP_THREADS, 0, s>>>(W, b, x, rows, K, N, y);
  else
    linear_bf16<false, SILU><<<blocks, TP_THREADS, 0, s>>>(W, b, x, rows, K, N, y);
  return cudaGetLastError();
}

// TextProj owns everything of the projection: the four weights, a stream and
// the row buffers. It is a member of tb_engine, destroyed with it.
struct TextProj {
  int dev = -1;
  int textH = 0, H = 0;  // 0: not provided
  uint16_t *fc1 = nullptr, *b1 = nullptr, *fc2 = nullptr, *b2 = nullptr;
  float *x = nullptr, *hid = nullptr, *y = nullptr;  // [TP_CHUNK][textH], [TP_CHUNK][textH], [TP_CHUNK][H]
  cudaStream_t stream = nullptr;

  bool ready() const { return textH > 0; }

  ~TextProj() {
    if (dev < 0) return;
    cudaSetDevice(dev);
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    for (void* p : {(void*)fc1, (void*)b1, (void*)fc2, (void*)b2, (void*)x, (void*)hid, (void*)y})
      if (p) cudaFree(p);
  }

  // init uploads the weights (bf16, fc1 [th][th], b1 [th], fc2 [h][th],
  // b2 [h]) and allocates the stream and buffers; *what names the failed step.
  cudaError_t init(int device, int th, int h, const uint16_t* w1, const uint16_t* bias1, const uint16_t* w2,
                   const uint16_t* bias2, const char** what) {
    dev = device;
    const size_t n1 = (size_t)th * th, n2 = (size_t)h * th;
    struct {
      uint16_t** dst;
      const uint16_t* src;
      size_t n;
      const char* name;
    } up[4] = {{&fc1, w1, n1, "upload text_fc1"},
               {&b1, bias1, (size_t)th, "upload text_fc1_bias"},
               {&fc2, w2, n2, "upload text_fc2"},
               {&b2, bias2, (size_t)h, "upload text_fc2_bias"}};
    cudaError_t err;
    for (auto& u : up) {
      *what = u.name;
      if ((err = cudaMalloc(u.dst, u.n * 2)) != cudaSuccess) return err;
      if ((err = cudaMemcpy(*u.dst, u.src, u.n * 2, cudaMemcpyHostToDevice)) != cudaSuccess) return err;
    }
    *what = "text projection buffers";
    if ((err = cudaMalloc(&x, (size_t)TP_CHUNK * th * 4)) != cudaSuccess) return err;
    if ((err = cudaMalloc(&hid, (size_t)TP_CHUNK * th * 4)) != cudaSuccess) return err;
    if ((err = cudaMalloc(&y, (size_t)TP_CHUNK * h * 4)) != cudaSuccess) return err;
    // Its few blocks go ahead of queued work of the LM and the codec.
    *what = "text projection stream";
    if ((err = create_stream(&stream, PRIO_TEXT_PROJECTION)) != cudaSuccess) return err;
    textH = th;
    H = h;
    return cudaSuccess;
  }

  // run computes rows x textH floats of in into rows x H floats of out (host
  // memory), TP_CHUNK rows per round (stream order lets a round reuse the
  // buffers of the one before), and waits for the result. linear(silu, W, b,
  // x, rows, K, N, y, stream) launches one Linear: launch_linear, or the
  // engine's tensor-core product on Hopper (tb_project_text).
  template <class Linear>
  cudaError_t run(const float* in, int rows, float* out, const char** what, Linear linear) {
    cudaError_t err;
    for (int r0 = 0; r0 < rows; r0 += TP_CHUNK) {
      const int n = rows - r0 < TP_CHUNK ? rows - r0 : TP_CHUNK;
      *what = "copy rows to the GPU";
      err = cudaMemcpyAsync(x, in + (size_t)r0 * textH, (size_t)n * textH * 4, cudaMemcpyHostToDevice, stream);
      if (err != cudaSuccess) return err;
      *what = "fc1 launch";
      if ((err = linear(true, fc1, b1, x, n, textH, textH, hid, stream)) != cudaSuccess) return err;
      *what = "fc2 launch";
      if ((err = linear(false, fc2, b2, hid, n, textH, H, y, stream)) != cudaSuccess) return err;
      *what = "copy rows from the GPU";
      err = cudaMemcpyAsync(out + (size_t)r0 * H, y, (size_t)n * H * 4, cudaMemcpyDeviceToHost, stream);
      if (err != cudaSuccess) return err;
    }
    // Pageable copies back return only once written; this catches a kernel fault.
    *what = "text projection";
    return cudaStreamSynchronize(stream);
  }
};

}  // namespace tbtp
