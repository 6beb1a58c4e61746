// Hopper's warpgroup tensor-core instruction (wgmma, sm_90a only): what the
// engine's prefill products (gemm_wg.cuh) and the codec decoder's
// (codec/wgmma.cuh) share. TB_WGMMA is defined where the code is compiled
// for sm_90a; elsewhere the kernels that need it compile to nothing and
// their launchers are never chosen (each library probes its image at load).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TB_WGMMA 1
#endif

namespace tbwg {

// A K-major shared-memory operand in the 128-byte swizzle: rows of 128
// bytes of K (64 bf16 or 32 TF32 values), groups of 8 rows 1024 bytes apart,
// the tile 1024-byte aligned. A k step further along the row adds its byte
// offset to smem.
__device__ __forceinline__ uint64_t desc_sw128(const void* smem) {
  const uint64_t addr = (uint32_t)__cvta_generic_to_shared(smem);
  return ((addr & 0x3ffff) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

// The first 1024-byte aligned address at or after raw (a kernel's dynamic
// shared memory, which asks for 1024 bytes more than it uses): where a
// swizzled tile may start.
__device__ __forceinline__ unsigned char* align1024(unsigned char* raw) {
  return raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(raw) & 1023)) & 1023);
}

// Byte offset of 16-byte chunk c of row r in that layout.
__host__ __device__ constexpr uint32_t sw128_offset(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// Keeps a register the tensor cores may still read or write where it is
// until this point (the compiler does not know that wgmma is asynchronous).
__device__ __forceinline__ void keep(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void keep(float& r) { asm volatile("" : "+f"(r)::"memory"); }

__device__ __forceinline__ void fence() {
#ifdef TB_WGMMA
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#ifdef TB_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// Waits until at most N of the warpgroup's committed groups are in flight.
template <int N>
__device__ __forceinline__ void wait() {
#ifdef TB_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

// Copies through shared memory by the generic proxy (cp.async, st.shared)
// become visible to the tensor cores' async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// 1 in *out where this image was compiled for sm_90a.
__global__ void probe(int* out) {
#ifdef TB_WGMMA
  *out = 1;
#else
  *out = 0;
#endif
}

// Whether the library's image for device (an sm_90 GPU) carries wgmma: runs
// probe on a stream of its own, which waits for no other work.
inline bool image_has_wgmma(int device) {
  int major = 0, *d = nullptr, v = 0;
  cudaStream_t st = nullptr;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major != 9 ||
      cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  bool ok = cudaMallocAsync(&d, sizeof(int), st) == cudaSuccess;
  if (ok) {
    probe<<<1, 1, 0, st>>>(d);
    ok = cudaMemcpyAsync(&v, d, sizeof(int), cudaMemcpyDeviceToHost, st) == cudaSuccess &&
         cudaFreeAsync(d, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess && v == 1;
  }
  cudaStreamDestroy(st);
  cudaGetLastError();
  return ok;
}

}  // namespace tbwg
