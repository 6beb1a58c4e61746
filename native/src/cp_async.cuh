// cp.async (Ampere and later): 16 bytes from global to shared memory without
// passing through registers, shared by the engine's gemm_tiles and the codec
// decoder's k_gemm_tc. A copy lands only after cp.async.wait_group for its
// commit group and a barrier.
#pragma once
#include <cuda_runtime.h>

// Copies 16 bytes from src to smem, or zero-fills them where !valid (src is
// then not read but must still be an address).
__device__ __forceinline__ void cp_async16(void* smem, const void* src, bool valid) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
