// TileLang CUDA device helpers: the Tensor Memory Accelerator (sm_90; PTX ISA
// "cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor", "mbarrier"). The CUDA backend's
// codegen appends this file to tl_device.h (whose tl_smem_addr it uses).
//
// Tensor Memory Accelerator loads into mbarrier stage rings (sm_90; PTX ISA
// "cp.async.bulk.tensor" and "mbarrier"). One thread of the block arms a stage's barrier
// with the bytes its boxes will deliver and issues the boxes; every thread waits on the
// barrier's phase parity. The tensor map is a __grid_constant__ kernel parameter encoded
// by the host (cuTensorMapEncodeTiled); coordinates are elements, innermost first, and
// boxes reaching outside the tensor are zero-filled by the hardware.
//
// Stores and reductions go the other way, shared tile -> global box, and complete through
// bulk groups: every thread that wrote the tile makes its writes visible to the async proxy
// (tl_fence_proxy_async) before a block barrier, one thread issues the boxes, commits them
// and waits until they have read the tile, and a barrier follows before the tile is written
// again. Parts of a box outside the tensor are not written.
#ifndef TILELANG_CUDA_TMA_H_
#define TILELANG_CUDA_TMA_H_

// A TMA box's shared destination must be 128-byte aligned (CUDA C++ Programming Guide,
// "Tensor Memory Access"); T.tma_copy's tiles sit where shared-memory planning put them, so
// the issuing thread checks: a trap, never a misplaced box.
__device__ __forceinline__ void tl_check_tma_destination(const void* smem) {
  if (tl_smem_addr(smem) & 127u) {
    printf("tilelang: a T.tma_copy destination starts at shared address %u, not on a 128-byte boundary\n",
           tl_smem_addr(smem));
    __trap();
  }
}

__device__ __forceinline__ void tl_tma_prefetch(unsigned long long tmap) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(tmap) : "memory");
}

__device__ __forceinline__ void tl_tma_load_2d(void* smem, unsigned long long tmap, void* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];\n"
               :: "r"(tl_smem_addr(smem)), "l"(tmap), "r"(tl_smem_addr(bar)), "r"(c0), "r"(c1) : "memory");
}

__device__ __forceinline__ void tl_tma_load_3d(void* smem, unsigned long long tmap, void* bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5}], [%2];\n"
               :: "r"(tl_smem_addr(smem)), "l"(tmap), "r"(tl_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

__device__ __forceinline__ void tl_tma_load_4d(void* smem, unsigned long long tmap, void* bar, int c0, int c1, int c2,
                                               int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
               :: "r"(tl_smem_addr(smem)), "l"(tmap), "r"(tl_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
                  "r"(c3) : "memory");
}

__device__ __forceinline__ void tl_tma_load_5d(void* smem, unsigned long long tmap, void* bar, int c0, int c1, int c2,
                                               int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
               :: "r"(tl_smem_addr(smem)), "l"(tmap), "r"(tl_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
                  "r"(c3), "r"(c4) : "memory");
}

// dst box += the shared tile, element by element (an atomic add in the L2); the element type
// is the tensor map's (f16, bf16, f32, s32, u32, u64).
__device__ __forceinline__ void tl_tma_store_add_2d(const void* smem, unsigned long long tmap, int c0, int c1) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];\n"
               :: "l"(tmap), "r"(tl_smem_addr(smem)), "r"(c0), "r"(c1) : "memory");
}

__device__ __forceinline__ void tl_tma_store_add_3d(const void* smem, unsigned long long tmap, int c0, int c1, int c2) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               :: "l"(tmap), "r"(tl_smem_addr(smem)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}

__device__ __forceinline__ void tl_tma_store_add_4d(const void* smem, unsigned long long tmap, int c0, int c1, int c2,
                                                    int c3) {
  asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
               :: "l"(tmap), "r"(tl_smem_addr(smem)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}

__device__ __forceinline__ void tl_tma_store_add_5d(const void* smem, unsigned long long tmap, int c0, int c1, int c2,
                                                    int c3, int c4) {
  asm volatile("cp.reduce.async.bulk.tensor.5d.global.shared::cta.add.tile.bulk_group"
               " [%0, {%2, %3, %4, %5, %6}], [%1];\n"
               :: "l"(tmap), "r"(tl_smem_addr(smem)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}

// Whether a box may read its shared source at smem: 128-byte aligned (CUDA C++ Programming
// Guide, "Tensor Memory Access"). Shared-memory planning does not promise it for every tile:
// where it is not, the kernel takes its other path.
__device__ __forceinline__ int tl_tma_smem_aligned(const void* smem) {
  return (tl_smem_addr(smem) & 127u) == 0u;
}

// Commits this thread's bulk stores and reductions as a group, and waits until they have
// all read their shared tiles (their global writes may still be in flight: a later kernel,
// or a reader behind a grid-wide barrier, sees them).
__device__ __forceinline__ void tl_tma_store_commit_and_wait_read() {
  asm volatile("cp.async.bulk.commit_group;\n"
               "cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

#endif  // TILELANG_CUDA_TMA_H_
