// Grid-barrier micro-benchmark (docs/dev/LATENCY.md, "Barriers and hand-offs"): the decode
// kernel's counter barrier against other global-memory forms and against
// thread block cluster barriers, under a cooperative launch of one CTA an SM
// with the decode kernel's shared-memory footprint. Not part of the build:
//   nvcc -std=c++17 -arch=sm_90 -o /tmp/barriers tools/gpu/micro/barriers.cu && /tmp/barriers
#include <cstdio>
#include <cuda_runtime.h>

namespace {

enum Form { COUNTER, COUNTER_NOSLEEP, COUNTER_RELAXED, FLAG, CLUSTER, CLUSTER_DSMEM, HIERARCHICAL, NFORMS };
const char* const kNames[NFORMS] = {"counter (the kernel's)", "counter, no back-off", "counter, relaxed polls + fence",
                                    "counter + flag word", "cluster barrier", "cluster barrier + DSMEM load",
                                    "cluster, counter, cluster"};

__device__ __forceinline__ void poll_acquire(const unsigned* word, unsigned target, bool backoff) {
  unsigned v;
  for (int n = 0;; n++) {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(word) : "memory");
    if (v >= target) return;
    if (backoff && n > 64) __nanosleep(32);
  }
}

__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}

// One barrier of the given form. target and epoch count this CTA's barriers.
__device__ __forceinline__ void barrier(Form f, unsigned* bar, unsigned& target, unsigned& epoch, unsigned ncl,
                                        unsigned rank) {
  const bool t0 = threadIdx.x == 0;
  switch (f) {
    case COUNTER:
    case COUNTER_NOSLEEP:
    case COUNTER_RELAXED:
      target += gridDim.x;
      __syncthreads();
      if (t0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
        if (f == COUNTER_RELAXED) {
          unsigned v;
          do asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
          while (v < target);
          asm volatile("fence.acq_rel.gpu;" ::: "memory");
        } else {
          poll_acquire(bar, target, f == COUNTER);
        }
      }
      __syncthreads();
      return;
    case FLAG:  // the last arriver releases a separate word the others poll
      target += gridDim.x;
      epoch += 1;
      __syncthreads();
      if (t0) {
        unsigned old;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(bar) : "memory");
        if (old == target - 1)
          asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(bar + 32), "r"(epoch) : "memory");
        else
          poll_acquire(bar + 32, epoch, false);
      }
      __syncthreads();
      return;
    case CLUSTER:
    case CLUSTER_DSMEM:
      cluster_barrier();
      return;
    case HIERARCHICAL:  // one counter arrival a cluster
      target += ncl;
      cluster_barrier();
      if (rank == 0 && t0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
        poll_acquire(bar, target, true);
      }
      cluster_barrier();
      return;
    default:
      return;
  }
}

__global__ void run(Form f, int iters, unsigned* bar, unsigned long long* ns, float* sink) {
  extern __shared__ float sm[];
  unsigned rank = 0, cs = 1;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(cs));
  if (threadIdx.x < 256) sm[threadIdx.x] = (float)(blockIdx.x + threadIdx.x);
  __syncthreads();
  if (cs > 1) cluster_barrier();
  unsigned long long t0 = 0, t1 = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  unsigned target = 0, epoch = 0;
  float acc = 0.f;
  for (int i = 0; i < iters; i++) {
    barrier(f, bar, target, epoch, gridDim.x / cs, rank);
    if (f == CLUSTER_DSMEM) {  // one float from the next CTA's shared memory
      const unsigned local = (unsigned)__cvta_generic_to_shared(sm + (threadIdx.x & 255));
      unsigned remote;
      float v;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"((rank + 1) % cs));
      asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
      acc += v;
    }
  }
  if (cs > 1) cluster_barrier();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  if (blockIdx.x == 0 && threadIdx.x == 0) *ns = t1 - t0;
  if (acc == -1.f) *sink = acc;  // keeps the DSMEM loads
}

}  // namespace

int main() {
  constexpr int kThreads = 512, kSmem = 200 * 1024, kIters = 2000;
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return 1;
  printf("%s: %d SMs, %d threads and %d KB shared a CTA, %d barriers a launch, best of 3\n", p.name,
         p.multiProcessorCount, kThreads, kSmem / 1024, kIters);
  unsigned* bar;
  unsigned long long* ns;
  float* sink;
  cudaMalloc(&bar, 256);
  cudaMalloc(&ns, 8);
  cudaMalloc(&sink, 4);
  cudaFuncSetAttribute(run, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  cudaFuncSetAttribute(run, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int cs : {1, 2, 4, 8, 16}) {
    cudaLaunchAttribute at[2] = {};
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cs;
    at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeCooperative;
    at[1].val.cooperative = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmem;
    cfg.attrs = at;
    cfg.numAttrs = 2;
    cfg.gridDim = dim3(cs);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, run, &cfg) != cudaSuccess) {
      printf("clusters of %d: %s\n", cs, cudaGetErrorString(cudaGetLastError()));
      continue;
    }
    cfg.gridDim = dim3(clusters * cs);
    printf("clusters of %d: %d co-resident, grid %d\n", cs, clusters, clusters * cs);
    for (int f = 0; f < NFORMS; f++) {
      const bool cluster_form = f >= CLUSTER;
      if (cluster_form != (cs > 1)) continue;
      double best = 1e30;
      for (int rep = 0; rep < 3; rep++) {
        cudaMemset(bar, 0, 256);
        cudaError_t e = cudaLaunchKernelEx(&cfg, run, (Form)f, kIters, bar, ns, sink);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
          printf("  %-32s %s\n", kNames[f], cudaGetErrorString(e));
          cudaGetLastError();
          break;
        }
        unsigned long long t = 0;
        cudaMemcpy(&t, ns, 8, cudaMemcpyDeviceToHost);
        if (t / (double)kIters < best) best = t / (double)kIters;
      }
      if (best < 1e30) printf("  %-32s %7.1f ns a barrier\n", kNames[f], best);
    }
  }
  return 0;
}
