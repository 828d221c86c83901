// TileLang CUDA device helpers: tensor-core and asynchronous-copy instructions as inline
// PTX (PTX ISA: "Warp-level matrix instructions" ldmatrix / mma, "Data movement"
// cp.async). The CUDA backend's codegen prepends this file to a kernel's source when the
// kernel calls one of them; every helper is force-inlined, so register operands passed by
// address stay in registers once the caller's loops are unrolled.
#ifndef TILELANG_CUDA_DEVICE_H_
#define TILELANG_CUDA_DEVICE_H_

__device__ __forceinline__ unsigned tl_smem_addr(const void* ptr) {
  return static_cast<unsigned>(__cvta_generic_to_shared(ptr));
}

// Four 8x8 b16 matrices; lanes 8q..8q+7 give the row addresses of matrix q.
__device__ __forceinline__ void tl_ldmatrix_x4(unsigned* d, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(tl_smem_addr(smem)));
}

__device__ __forceinline__ void tl_ldmatrix_x4_trans(unsigned* d, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(tl_smem_addr(smem)));
}

// D = A * B + D, m16n8k16, A row-major, B column-major, fp32 accumulators.
__device__ __forceinline__ void tl_mma_m16n8k16_f16_f32(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void tl_mma_m16n8k16_bf16_f32(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// 16 bytes global -> shared, bypassing L1 (and prefetching the 128-byte L2 line); src_bytes
// < 16 zero-fills the rest (0: all).
__device__ __forceinline__ void tl_cp_async_16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n"
               :: "r"(tl_smem_addr(smem)), "l"(gmem), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void tl_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most n committed groups are still in flight (n: a compile-time constant).
#define tl_cp_async_wait(n) asm volatile("cp.async.wait_group %0;\n" :: "n"(n) : "memory")

#endif  // TILELANG_CUDA_DEVICE_H_
