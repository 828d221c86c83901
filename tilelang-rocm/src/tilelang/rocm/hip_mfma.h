// TileLang HIP MFMA GEMM helper, appended to hip_device.h in every kernel's source. Kept
// apart, with no HIP header of its own, so that tests can compile it on the host against
// an emulation of the matrix instructions (tests/test_mfma_emulation.py).
#ifndef TILELANG_HIP_MFMA_H_
#define TILELANG_HIP_MFMA_H_

// GEMM on MFMA (gfx90a, gfx940-942; AMD "CDNA2/CDNA3 Instruction Set Architecture", matrix
// instructions): C[M x N] (+)= op(A)[M x K] op(B)[K x N] with fp32 C in shared memory and
// fp16 / bf16 operands in shared memory (row strides lda, ldb, ldc in elements; TransA: A is
// stored K x M, TransB: B is stored N x K). The block's wavefronts take C's 16x16 tiles
// round robin; for v_mfma_f32_16x16x16{f16,bf16_1k}, lane l holds A[l % 16][4 (l / 16) + j],
// B[4 (l / 16) + j][l % 16] and C[4 (l / 16) + j][l % 16] for j = 0..3. The caller puts a
// __syncthreads() before and after the call.
typedef _Float16 tl_hip_f16x4 __attribute__((ext_vector_type(4)));
typedef short tl_hip_bf16x4 __attribute__((ext_vector_type(4)));
typedef float tl_hip_f32x4 __attribute__((ext_vector_type(4)));

template <bool Bf16> struct tl_hip_mfma;
template <> struct tl_hip_mfma<false> {
  using operand = tl_hip_f16x4;
  using element = _Float16;
  static __device__ __forceinline__ tl_hip_f32x4 run(operand a, operand b, tl_hip_f32x4 c) {
    return __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
  }
};
template <> struct tl_hip_mfma<true> {
  using operand = tl_hip_bf16x4;
  using element = short;
  static __device__ __forceinline__ tl_hip_f32x4 run(operand a, operand b, tl_hip_f32x4 c) {
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
  }
};

template <int M, int N, int K, int Threads, bool TransA, bool TransB, bool Bf16, bool Clear>
__device__ void tl_hip_mfma_gemm(const void* a_ptr, int lda, const void* b_ptr, int ldb, float* c, int ldc) {
  static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0 && Threads % 64 == 0, "MFMA 16x16x16 tiles");
  using Mfma = tl_hip_mfma<Bf16>;
  using Element = typename Mfma::element;
  const Element* a = static_cast<const Element*>(a_ptr);
  const Element* b = static_cast<const Element*>(b_ptr);
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int lane = tid % 64, wave = tid / 64;
  const int row = lane % 16, quad = lane / 16;
  for (int tile = wave; tile < (M / 16) * (N / 16); tile += Threads / 64) {
    const int tm = (tile / (N / 16)) * 16, tn = (tile % (N / 16)) * 16;
    tl_hip_f32x4 acc;
    for (int j = 0; j < 4; ++j) acc[j] = Clear ? 0.0f : c[(tm + 4 * quad + j) * ldc + tn + row];
    for (int k = 0; k < K; k += 16) {
      typename Mfma::operand av, bv;
      for (int j = 0; j < 4; ++j) {
        const int kk = k + 4 * quad + j;
        av[j] = TransA ? a[kk * lda + tm + row] : a[(tm + row) * lda + kk];
        bv[j] = TransB ? b[(tn + row) * ldb + kk] : b[kk * ldb + tn + row];
      }
      acc = Mfma::run(av, bv, acc);
    }
    for (int j = 0; j < 4; ++j) c[(tm + 4 * quad + j) * ldc + tn + row] = acc[j];
  }
}

#endif  // TILELANG_HIP_MFMA_H_
