// k_gemm_rows: the products of a few dense rows in a launch of several
// streams (the transformer's and the other Linears' 9..64 rows: B streams x
// T frames), one launch each.
//
// On the tiled path such a product took up to four launches: an RMSNorm or
// SwiGLU pass over the rows, k_gemm (float32 FMA, <= 32 rows) or k_gemm_tc
// over a few tiles, split over K for the SMs, and k_splitk_epi to add the
// slices. At 16 streams the transformer alone was ~100 of a launch's ~170
// kernels. Here a CTA owns 64 output columns for every row and a K slice of
// at most GR_KC: it stages its slice of A once in shared memory (SwiGLU
// applied, rounded to nearest TF32, as k_gemm_tc's one pass rounds its
// operands), its 8 warps each multiply it by 8 weight rows read straight
// from global memory (every load of a thread issued before the first
// product), and the K slices are the CTAs of a thread-block cluster, which
// add their partial tiles through distributed shared memory in rank order
// and run the epilogue. RMSNorm (MODE 2) is applied as a row scale after the
// sum: each rank stages nw·x and its slice's sums of squares, the rows'
// totals meet at the cluster barrier the partial tiles need anyway. A row's
// sums do not depend on the other rows of the launch.
#pragma once
#include <cooperative_groups.h>

#include "kernels.cuh"

namespace tbc {

constexpr int GR_MAXM = 64;    // rows a launch (four m16 tiles)
constexpr int GR_BN = 64;      // output columns a CTA (8 warps of 8)
constexpr int GR_KC = 128;     // K a CTA at most (its staged slice of A)
constexpr int GR_MAXKS = 8;    // the portable cluster size
constexpr int GR_LD = GR_KC + 4;  // a staged row: 16-byte fragment reads of 8 rows x 4 k groups hit 32 banks
constexpr int GR_PLD = GR_BN + 4;

// MODE as k_skinny2's: 1 plain rows of width K, 2 the same through RMSNorm
// (weight nw, eps; the scale from the row's sum of squares in double, as on
// the CPU), 3 SwiGLU of [gate | up] rows of width 2K. gridDim.x = N / 64,
// gridDim.z = the cluster = the K slices (K / gridDim.z a multiple of 32, at
// most GR_KC); N a multiple of 64, M <= GR_MAXM.
template <int MODE>
__global__ void __launch_bounds__(256) k_gemm_rows(const float *__restrict__ x, const float *__restrict__ nw, double eps,
                                                   const float *__restrict__ W, int M, int N, int K, Epi e) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	namespace cg = cooperative_groups;
	__shared__ __align__(16) float As[GR_MAXM][GR_LD];
	__shared__ double rss[GR_MAXM];  // MODE 2: this rank's sums of squares of its slice of each row
	__shared__ float rscale[GR_MAXM];
	const cg::cluster_group cl = cg::this_cluster();
	const int ks = (int)cl.num_blocks(), rank = (int)cl.block_rank();
	const int kc = K / ks, k0 = rank * kc, chunks = kc / 32;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
	const int n0 = blockIdx.x * GR_BN;
	// Thread (g, q) of a warp holds weight row n0 + 8·warp + g at k = 8q..8q+7
	// of every 32 of its slice: two 16-byte loads, a warp 8 rows of 128
	// contiguous bytes. The m16n8k8 products take k slot q as k = 8q + 2s
	// and slot q + 4 as 8q + 2s + 1 at step s, A's fragments likewise, so
	// each thread's loads are its fragments.
	float4 wv[GR_KC / 32][2];
	const float *wr = W + (size_t)(n0 + 8 * warp + g) * K + k0 + 8 * q;
#pragma unroll
	for (int c = 0; c < GR_KC / 32; c++)
		if (c < chunks) {
			wv[c][0] = __ldg(reinterpret_cast<const float4 *>(wr + 32 * c));
			wv[c][1] = __ldg(reinterpret_cast<const float4 *>(wr + 32 * c + 4));
		}
	dep_start();
	const int mt = (M + 15) >> 4, rows = 16 * mt, k4 = kc / 4;
	const size_t wA = MODE == 3 ? 2 * (size_t)K : (size_t)K;
	for (int i = tid; i < rows * k4; i += 256) {
		const int m = i / k4, k = (i - m * k4) * 4;
		float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
		if (m < M) {
			const float *xr = x + m * wA + k0 + k;
			v = *reinterpret_cast<const float4 *>(xr);
			if (MODE == 3) {
				const float4 u = *reinterpret_cast<const float4 *>(xr + K);
				v = make_float4(v.x / (1.f + expf(-v.x)) * u.x, v.y / (1.f + expf(-v.y)) * u.y,
				                v.z / (1.f + expf(-v.z)) * u.z, v.w / (1.f + expf(-v.w)) * u.w);
			}
		}
		*reinterpret_cast<float4 *>(&As[m][k]) = v;
	}
	__syncthreads();
	if (MODE == 2) {
		for (int m = warp; m < rows; m += 8) {
			double ss = 0;
			for (int k = lane; k < kc; k += 32) {
				const double v = As[m][k];
				ss += v * v;
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
			if (lane == 0) rss[m] = ss;
		}
		__syncthreads(); // the sums read As before the pass below rewrites it
	}
	// Rounded once here, not at each of the 8 warps' fragment reads.
	for (int i = tid; i < rows * kc; i += 256) {
		const int m = i / kc, k = i - m * kc;
		float v = As[m][k];
		if (MODE == 2) v *= nw[k0 + k];
		As[m][k] = __uint_as_float(round_tf32(v));
	}
	__syncthreads();
	float acc[GR_MAXM / 16][4] = {};
#pragma unroll
	for (int c = 0; c < GR_KC / 32; c++) {
		if (c >= chunks) continue;
		uint32_t b[4][2];
		const float wf[8] = {wv[c][0].x, wv[c][0].y, wv[c][0].z, wv[c][0].w,
		                     wv[c][1].x, wv[c][1].y, wv[c][1].z, wv[c][1].w};
#pragma unroll
		for (int s = 0; s < 4; s++) {
			b[s][0] = round_tf32(wf[2 * s]);
			b[s][1] = round_tf32(wf[2 * s + 1]);
		}
#pragma unroll
		for (int mi = 0; mi < GR_MAXM / 16; mi++) {
			if (mi >= mt) continue;
			const float *r0 = &As[16 * mi + g][32 * c + 8 * q], *r1 = r0 + 8 * GR_LD;
			const float4 a0 = *reinterpret_cast<const float4 *>(r0), a1 = *reinterpret_cast<const float4 *>(r0 + 4);
			const float4 c0 = *reinterpret_cast<const float4 *>(r1), c1 = *reinterpret_cast<const float4 *>(r1 + 4);
			const float ra[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
			const float rc[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
			for (int s = 0; s < 4; s++) {
				const uint32_t a[4] = {__float_as_uint(ra[2 * s]), __float_as_uint(rc[2 * s]),
				                       __float_as_uint(ra[2 * s + 1]), __float_as_uint(rc[2 * s + 1])};
				mma_tf32(acc[mi], a, b[s]);
			}
		}
	}
	__syncthreads(); // the partial tile goes where A was
	float(*part)[GR_PLD] = reinterpret_cast<float(*)[GR_PLD]>(&As[0][0]);
#pragma unroll
	for (int mi = 0; mi < GR_MAXM / 16; mi++) {
		if (mi >= mt) continue;
#pragma unroll
		for (int h = 0; h < 2; h++)
			*reinterpret_cast<float2 *>(&part[16 * mi + 8 * h + g][8 * warp + 2 * q]) =
			    make_float2(acc[mi][2 * h], acc[mi][2 * h + 1]);
	}
	cl.sync(); // every rank's partial tile (and row sums) is in its shared memory
	if (MODE == 2) {
		if (tid < M) {
			double t[GR_MAXKS];
#pragma unroll
			for (int z = 0; z < GR_MAXKS; z++)
				if (z < ks) t[z] = cl.map_shared_rank(rss, z)[tid];
			double sum = 0.0;
#pragma unroll
			for (int z = 0; z < GR_MAXKS; z++)
				if (z < ks) sum += t[z];
			rscale[tid] = (float)(1.0 / sqrt(sum / K + eps));
		}
		__syncthreads();
	}
	// This rank's share of the M x 64 outputs; every rank's value is loaded
	// before any is added (one remote round trip), then added in rank order.
	const int total = M * GR_BN, per = (total + ks - 1) / ks;
	for (int i = rank * per + tid; i < min(total, (rank + 1) * per); i += 256) {
		const int m = i / GR_BN, cn = i - m * GR_BN;
		float v[GR_MAXKS];
#pragma unroll
		for (int z = 0; z < GR_MAXKS; z++)
			if (z < ks) v[z] = cl.map_shared_rank(&part[0][0], z)[m * GR_PLD + cn];
		float sum = 0.f;
#pragma unroll
		for (int z = 0; z < GR_MAXKS; z++)
			if (z < ks) sum += v[z];
		if (MODE == 2) sum *= rscale[m];
		epi_store(e, N, m, n0 + cn, sum);
	}
	cl.sync(); // no rank leaves while another reads its shared memory
#endif
}

} // namespace tbc
