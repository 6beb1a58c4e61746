// The codec's products on Hopper's warpgroup tensor-core instruction (wgmma,
// sm_90a), for launches that decode several streams (one TF32 pass, as
// k_gemm_tc<.., true>): the same implicit im2col operand, epilogue and
// split K, 128 x BN tiles (BN 96 or 128), 32 deep, three stages of
// cp.async. Each of the two warpgroups owns 64 rows; its A
// fragments come from shared memory through registers, rounded to TF32 on
// the way (round_tf32, as k_gemm_tc), and the tile of W is read by the tensor
// cores from shared memory in the 128-byte swizzled K-major layout. The
// tensor cores would truncate W to TF32, so W comes rounded to nearest
// already (DevConv::wt, rounded once at load): k_gemm_tc's numerics. A
// stage's products run while the next stage's copies land. k_gemm_tc's warps issue mma.sync with both operands
// through registers, bound by shared-memory traffic: on the vocoder's shapes
// at 64 streams cuBLAS's TF32 product ran 1.5-3 times faster than it
// (tools/gpu/micro/cublas_probe.cu), this kernel 1.2-1.9 times
// (tools/gpu/micro/codec_wg.cu; codec.cu's wg_choice says which products).
#pragma once
#include "../src/wgmma_sm90.cuh"
#include "kernels.cuh"

namespace tbc {

constexpr int WG_BM = 128, WG_STAGES = 3;

// Dynamic shared memory of k_gemm_wg<BN>: W's stages (swizzled, 1024-byte
// aligned), then A's, plus room to align the start.
constexpr size_t wg_smem(int BN) {
	return 1024 + WG_STAGES * ((size_t)BN * 128 + (size_t)WG_BM * TC_LD * 4);
}

// d += A·B for one m64 x BN x k8 step of a warpgroup: A from the thread's
// four registers (the m16n8k8 layout, warp w of the group owning rows
// 16w..16w+15), B through a shared-memory descriptor.
template <int BN> __device__ __forceinline__ void wgmma_tf32(float (&d)[BN / 2], const uint32_t (&a)[4], uint64_t desc);

#ifdef TB_WGMMA
template <> __device__ __forceinline__ void wgmma_tf32<96>(float (&d)[48], const uint32_t (&a)[4], uint64_t desc) {
	asm volatile("{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n96k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}, "
	             "{%48,%49,%50,%51}, %52, p, 1, 1; }"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

template <> __device__ __forceinline__ void wgmma_tf32<128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
	asm volatile("{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
	             "{%64,%65,%66,%67}, %68, p, 1, 1; }"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
#endif

// wg_wait waits for the warpgroup's products in flight, which read the A
// fragments fa and write the accumulators acc.
template <int NA, int KS> __device__ __forceinline__ void wg_wait(float (&acc)[NA], uint32_t (&fa)[KS][4]) {
	tbwg::wait<0>();
#pragma unroll
	for (int i = 0; i < NA; i++) tbwg::keep(acc[i]);
#pragma unroll
	for (int kk = 0; kk < KS; kk++)
#pragma unroll
		for (int i = 0; i < 4; i++) tbwg::keep(fa[kk][i]);
}

// W rounded to nearest TF32 (above).
template <int BN>
__global__ void __launch_bounds__(256) k_gemm_wg(AOp a, const float *__restrict__ W, int M, int N, int K,
                                                 int kChunk, Epi e, float *__restrict__ ws) {
#ifdef TB_WGMMA
	constexpr int LA = WG_BM / 32, LB = BN / 32, NA = BN / 2, KS = TC_BK / 8;
	constexpr int BST = BN * 128; // bytes of a W stage: one swizzle atom of BN rows
	static_assert(BN % 32 == 0 && BN <= 256, "tile width");
	extern __shared__ unsigned char wg_raw[];
	unsigned char *base = tbwg::align1024(wg_raw);
	unsigned char *Bs = base; // [stage][BN rows][128 bytes], swizzled
	float(*As)[WG_BM][TC_LD] = reinterpret_cast<float(*)[WG_BM][TC_LD]>(base + WG_STAGES * BST);
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
	const int wr = (warp >> 2) * 64 + (warp & 3) * 16; // the warp's first row of the tile
	const int m0 = blockIdx.y * WG_BM, n0 = blockIdx.x * BN;
	const int kb = blockIdx.z * kChunk, ke = min(K, kb + kChunk);
	const int nt = (ke - kb + TC_BK - 1) / TC_BK;
	// Copy l of a thread covers row (tid + l·256) / 8 at k offset kq of the
	// tile, as in k_gemm_tc; W's copy lands in its row's swizzled chunk.
	const int kq = (tid & 7) * 4;
	const float *arow[LA], *brow[LB];
	tile_rows(a, W, M, N, K, m0, n0, arow, brow);
	uint32_t boff[LB];
#pragma unroll
	for (int l = 0; l < LB; l++) {
		const int r = (tid + l * 256) >> 3;
		boff[l] = tbwg::sw128_offset(r, tid & 7);
	}
	const int tapStride = a.dil * a.cin;
	int tap = (kb + kq) / a.cin, ch = kb + kq - tap * a.cin;
	// Stage t's copies into buffer t % WG_STAGES and one commit group (empty
	// past the last stage, so that the group count stays one a stage).
	int next = 0;
	auto load = [&]() {
		if (next < nt) {
			const int st = next % WG_STAGES, k = kb + next * TC_BK + kq, off = tap * tapStride + ch;
#pragma unroll
			for (int l = 0; l < LB; l++) {
				const bool in = brow[l] && k < ke;
				cp_async16(Bs + st * BST + boff[l], in ? brow[l] + k : W, in);
			}
#pragma unroll
			for (int l = 0; l < LA; l++) {
				const bool in = arow[l] && k < ke;
				cp_async16(&As[st][(tid + l * 256) >> 3][kq], in ? arow[l] + off : a.x, in);
			}
			for (ch += TC_BK; ch >= a.cin; ch -= a.cin) tap++;
		}
		asm volatile("cp.async.commit_group;");
		next++;
	};
	float acc[NA];
#pragma unroll
	for (int i = 0; i < NA; i++) acc[i] = 0.f;
	uint32_t fa[KS][4] = {};
	dep_start();
#pragma unroll
	for (int s = 0; s < WG_STAGES - 1; s++) load();
	for (int t = 0; t < nt; t++) {
		const int st = t % WG_STAGES;
		asm volatile("cp.async.wait_group %0;" ::"n"(WG_STAGES - 2));
		// The copies were the generic proxy's writes; the tensor cores read
		// through the async proxy.
		tbwg::fence_proxy_async();
		// The previous stage's products end before its fragments' registers
		// and its buffer are reused.
		wg_wait(acc, fa);
		__syncthreads(); // stage t is in; every warp is done with stage t - 1's buffer
		load();          // stage t + WG_STAGES - 1, into that buffer
#pragma unroll
		for (int kk = 0; kk < KS; kk++) {
			fa[kk][0] = round_tf32(As[st][wr + g][kk * 8 + q]);
			fa[kk][1] = round_tf32(As[st][wr + g + 8][kk * 8 + q]);
			fa[kk][2] = round_tf32(As[st][wr + g][kk * 8 + q + 4]);
			fa[kk][3] = round_tf32(As[st][wr + g + 8][kk * 8 + q + 4]);
		}
		tbwg::fence();
#pragma unroll
		for (int kk = 0; kk < KS; kk++)
			wgmma_tf32<BN>(acc, fa[kk], tbwg::desc_sw128(Bs + st * BST + kk * 32));
		tbwg::commit();
	}
	wg_wait(acc, fa);
	asm volatile("cp.async.wait_group 0;");
	// acc[4j + 2h + c] is row wr + g + 8h, column 8j + 2q + c.
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int m = m0 + wr + g + 8 * h;
		if (m >= M) continue;
		if (gridDim.z > 1) {
#pragma unroll
			for (int j = 0; j < BN / 8; j++)
#pragma unroll
				for (int c = 0; c < 2; c++) gemm_out(e, ws, M, N, m, n0 + 8 * j + 2 * q + c, acc[4 * j + 2 * h + c]);
			continue;
		}
		const EpiRow row = epi_row(e, N, m);
#pragma unroll
		for (int j = 0; j < BN / 8; j++)
#pragma unroll
			for (int c = 0; c < 2; c++) {
				const int n = n0 + 8 * j + 2 * q + c;
				if (n < N) epi_put(e, row, epi_col(e, n), n, acc[4 * j + 2 * h + c]);
			}
	}
#endif
}

} // namespace tbc
