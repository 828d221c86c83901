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

// Four (two) 8x8 b16 matrices; lanes 8q..8q+7 give the row addresses of matrix q. The
// destination is the thread's fragment registers, of any array type.
__device__ __forceinline__ void tl_ldmatrix_x4(void* dst, const void* smem) {
  unsigned* d = static_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(tl_smem_addr(smem)));
}

__device__ __forceinline__ void tl_ldmatrix_x4_trans(void* dst, const void* smem) {
  unsigned* d = static_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(tl_smem_addr(smem)));
}

__device__ __forceinline__ void tl_ldmatrix_x2(void* dst, const void* smem) {
  unsigned* d = static_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(d[0]), "=r"(d[1]) : "r"(tl_smem_addr(smem)));
}

__device__ __forceinline__ void tl_ldmatrix_x2_trans(void* dst, const void* smem) {
  unsigned* d = static_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(d[0]), "=r"(d[1]) : "r"(tl_smem_addr(smem)));
}

// D = A * B + D, m16n8k16, A row-major, B column-major, fp32 accumulators. A and B are the
// thread's fragment registers: 4 and 2 x 32 bits (pairs of 16-bit values), of any array type.
__device__ __forceinline__ void tl_mma_m16n8k16_f16_f32(float* c, const void* a_regs, const void* b_regs) {
  const unsigned* a = static_cast<const unsigned*>(a_regs);
  const unsigned* b = static_cast<const unsigned*>(b_regs);
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void tl_mma_m16n8k16_bf16_f32(float* c, const void* a_regs, const void* b_regs) {
  const unsigned* a = static_cast<const unsigned*>(a_regs);
  const unsigned* b = static_cast<const unsigned*>(b_regs);
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// m16n8k16 with fp16 accumulators: C is two registers of two halves each.
__device__ __forceinline__ void tl_mma_m16n8k16_f16_f16(void* c_regs, const void* a_regs, const void* b_regs) {
  unsigned* c = static_cast<unsigned*>(c_regs);
  const unsigned* a = static_cast<const unsigned*>(a_regs);
  const unsigned* b = static_cast<const unsigned*>(b_regs);
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, "
      "{%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(c[0]), "+r"(c[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// m16n8k32 with 8-bit floats (sm_89 and newer), fp32 accumulators: four bytes per register,
// in the places of the m16n8k16 fragments' pairs of halves (PTX ISA, "Matrix Fragments for
// mma.m16n8k32"), so ldmatrix loads them from K-major tiles as it loads 16-bit ones.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define TL_MMA_F8_ASM(type)                                                                      \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." type "." type ".f32 {%0, %1, %2, %3}, " \
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                                \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                  \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#else
#define TL_MMA_F8_ASM(type) __trap()  // never emitted below sm_89 (the tensor-core pass)
#endif
__device__ __forceinline__ void tl_mma_m16n8k32_e4m3_f32(float* c, const void* a_regs, const void* b_regs) {
  const unsigned* a = static_cast<const unsigned*>(a_regs);
  const unsigned* b = static_cast<const unsigned*>(b_regs);
  TL_MMA_F8_ASM("e4m3");
}

__device__ __forceinline__ void tl_mma_m16n8k32_e5m2_f32(float* c, const void* a_regs, const void* b_regs) {
  const unsigned* a = static_cast<const unsigned*>(a_regs);
  const unsigned* b = static_cast<const unsigned*>(b_regs);
  TL_MMA_F8_ASM("e5m2");
}

// m16n8k8 on TF32 tensor cores, fp32 accumulators: float32 operands (one per register, in
// the places of the m16n8k16 fragments' pairs of halves, so ldmatrix loads them from K-major
// tiles), each rounded to TF32 (to nearest, ties away) first, as cuBLAS's TF32 mode does.
__device__ __forceinline__ unsigned tl_tf32_rna(unsigned bits) {
  unsigned out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(bits)));
  return out;
}

__device__ __forceinline__ void tl_mma_m16n8k8_tf32_f32(float* c, const void* a_regs, const void* b_regs) {
  const unsigned* a = static_cast<const unsigned*>(a_regs);
  const unsigned* b = static_cast<const unsigned*>(b_regs);
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(tl_tf32_rna(a[0])), "r"(tl_tf32_rna(a[1])), "r"(tl_tf32_rna(a[2])), "r"(tl_tf32_rna(a[3])),
        "r"(tl_tf32_rna(b[0])), "r"(tl_tf32_rna(b[1])));
}

// m16n8k32, signed 8-bit operands (four per register), int32 accumulators.
__device__ __forceinline__ void tl_mma_m16n8k32_s8_s32(int* c, const void* a_regs, const void* b_regs) {
  const unsigned* a = static_cast<const unsigned*>(a_regs);
  const unsigned* b = static_cast<const unsigned*>(b_regs);
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// 16 bytes global -> shared, bypassing L1 (and prefetching the 128-byte L2 line); src_bytes
// < 16 zero-fills the rest (0: all).
__device__ __forceinline__ void tl_cp_async_16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n"
               :: "r"(tl_smem_addr(smem)), "l"(gmem), "r"(src_bytes) : "memory");
}

// The synchronous twin of tl_cp_async_16 for rows that are not whole 16-byte vectors (a
// run-time row length): src_bytes bytes from a global address aligned only to its element
// (element_bytes), zeros after them, stored as one 16-byte vector.
__device__ __forceinline__ void tl_copy_16_partial(void* smem, const void* gmem, int src_bytes,
                                                   int element_bytes) {
  uint4 vector = make_uint4(0, 0, 0, 0);
  unsigned char* bytes = reinterpret_cast<unsigned char*>(&vector);
  if (element_bytes == 2) {
    const unsigned short* from = static_cast<const unsigned short*>(gmem);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (2 * i < src_bytes) reinterpret_cast<unsigned short*>(bytes)[i] = from[i];
    }
  } else {
    const unsigned char* from = static_cast<const unsigned char*>(gmem);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if (i < src_bytes) bytes[i] = from[i];
    }
  }
  *static_cast<uint4*>(smem) = vector;
}

// The calling thread arrives on an mbarrier once all of its earlier cp.async have landed; the
// arrival counts toward the barrier's expected count (.noinc), as a plain arrive would.
__device__ __forceinline__ void tl_cp_async_mbarrier_arrive(void* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(tl_smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void tl_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most n committed groups are still in flight (n: a compile-time constant).
#define tl_cp_async_wait(n) asm volatile("cp.async.wait_group %0;\n" :: "n"(n) : "memory")

// sm_90 warpgroup MMA (PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate").
// The MMA helpers themselves (wgmma m64nNk16, one per shape, type and operand majorness a
// kernel uses) are generated by the backend's codegen; these are the pieces around them.

// Shared-memory matrix descriptor: start address, leading and stride byte offsets (each
// stored >> 4), swizzle mode in bits 62-63 (0 none, 1 128-byte, 2 64-byte, 3 32-byte),
// base offset 0 (swizzled tiles start on their pattern's boundary).
__device__ __forceinline__ unsigned long long tl_wgmma_desc(const void* smem, unsigned lbo, unsigned sbo,
                                                            unsigned mode) {
  return static_cast<unsigned long long>((tl_smem_addr(smem) & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<unsigned long long>((sbo >> 4) & 0x3FFF) << 32) |
         (static_cast<unsigned long long>(mode & 0x3) << 62);
}

// The descriptor of the operand `bytes` (a multiple of 16) past the one `desc` describes, in
// one 32-bit add: the start-address field holds the shared address >> 4 in bits 0-13, and a
// block's shared memory ends below 256 KiB, so the sum never carries out of the field. The
// wgmma calls of one GEMM then share one full descriptor per operand and stage instead of
// each converting and masking its own address (ncu, attention on the H200: about 80 integer
// instructions per warp and iteration between the two GEMMs).
__device__ __forceinline__ unsigned long long tl_wgmma_desc_add(unsigned long long desc, unsigned bytes) {
  const unsigned low = static_cast<unsigned>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | low;
}

// Orders this thread's register accesses of the accumulators before the next wgmma.
__device__ __forceinline__ void tl_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void tl_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Operand fence (transform/gemm_overlap.py): after a wgmma group's wait, an empty asm
// that reads and writes each of its n fp32 accumulators, so the compiler moves no access
// of them above the wait (CUTLASS's warpgroup_fence_operand).
__device__ __forceinline__ void tl_wgmma_fence_f32(float* r, int n) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}

// Wait until at most n committed wgmma groups are pending (n: a compile-time constant).
#define tl_wgmma_wait(n) asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(n) : "memory")

// Makes this thread's generic-proxy writes to shared memory (stores, cp.async) visible to
// the async proxy that wgmma reads through; a barrier must follow before other threads'
// wgmma use them.
__device__ __forceinline__ void tl_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Where a failed tl.bounds_check happened (core's InstrumentBoundsChecks prints them).
#define tl_block_x() ((int)blockIdx.x)
#define tl_block_y() ((int)blockIdx.y)
#define tl_block_z() ((int)blockIdx.z)
#define tl_thread_x() ((int)threadIdx.x)
#define tl_thread_y() ((int)threadIdx.y)
#define tl_thread_z() ((int)threadIdx.z)

// TMA and wgmma swizzle on absolute shared addresses: a swizzled tile must start on a
// 1 KiB boundary (the backend lays the dynamic buffer out so; this checks it once).
__device__ __forceinline__ void tl_check_swizzle_base(const void* smem) {
  if (tl_smem_addr(smem) & 1023u) {
    printf("tilelang: a swizzled shared tile starts at %u, not on a 1 KiB boundary\n", tl_smem_addr(smem));
    __trap();
  }
}

// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90): T.pdl_trigger lets the
// next kernel of the stream start, T.pdl_sync waits for the kernels this one depends on.
// Older architectures have no overlapping launch, so there is nothing to order.
__device__ __forceinline__ void tl_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void tl_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Thread-block clusters (sm_90, T.ClusterKernel): a block's rank in its cluster, and the
// cluster barrier (PTX ISA "barrier.cluster"; arrive releases this thread's writes to the
// cluster unless relaxed, wait acquires). A kernel launched without clusters is one
// cluster of one block.
__device__ __forceinline__ int tl_cluster_ctarank() {
  unsigned rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  return (int)rank;
}

__device__ __forceinline__ void tl_cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive;" ::: "memory");
#endif
}

__device__ __forceinline__ void tl_cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
}

__device__ __forceinline__ void tl_cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait;" ::: "memory");
#endif
}

// Distributed shared memory (sm_90, T.copy_cluster): the generic address of the element at
// `local`'s place in the shared memory of the cluster's block `rank` (PTX ISA "mapa"; CUDA's
// cluster_group::map_shared_rank), and a store of `value` there.
template <typename T>
__device__ __forceinline__ T* tl_map_shared_rank(T* local, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned long long remote;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(local), "r"(rank));
  return reinterpret_cast<T*>(remote);
#else
  return local;
#endif
}

template <typename T>
__device__ __forceinline__ int tl_cluster_store(T* local, int rank, T value) {
  *tl_map_shared_rank(local, rank) = value;
  return 0;
}

// Named barrier 1 over the first n threads (a warp-specialized block's consumers; the
// producer warp never reaches it). n: a multiple of 32.
__device__ __forceinline__ void tl_named_barrier_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(n) : "memory");
}

// Arrives at named barrier id without waiting (PTX ISA "bar.arrive"): hands a turn to the
// threads that bar.sync on it (transform/pingpong.py); n counts both sides.
__device__ __forceinline__ void tl_named_barrier_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ void tl_mbarrier_init(void* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(tl_smem_addr(bar)), "r"(count) : "memory");
}

// Makes the initialized barriers visible to the async proxy (the TMA unit's complete_tx);
// a block barrier must follow before any thread uses them.
__device__ __forceinline__ void tl_mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void tl_mbarrier_expect_tx(void* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(tl_smem_addr(bar)), "r"(bytes) : "memory");
}

// mbarrier.expect_tx without an arrival (upstream's T.mbarrier_expect_tx and T.tma_copy:
// the role's threads arrive themselves, so the phase still counts exactly their arrivals).
__device__ __forceinline__ void tl_mbarrier_expect_tx_no_arrive(void* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n"
               :: "r"(tl_smem_addr(bar)), "r"(bytes) : "memory");
}

// A warpgroup's register budget (PTX ISA "setmaxnreg", sm_90a only; n: a constant multiple of
// 8 in [24, 256]). A hint: compiled for plain sm_90 it does nothing.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define tl_setmaxnreg_inc(n) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(n))
#define tl_setmaxnreg_dec(n) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(n))
#else
#define tl_setmaxnreg_inc(n) ((void)0)
#define tl_setmaxnreg_dec(n) ((void)0)
#endif

__device__ __forceinline__ void tl_mbarrier_arrive(void* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(tl_smem_addr(bar)) : "memory");
}

// An arrival on the mbarrier at `bar`'s place in the cluster's block `rank`, releasing the
// calling thread's earlier writes (and those a block barrier ordered before them) to the
// cluster (T.mbarrier_arrive(bar, cta_id), T.copy_cluster(..., remote_barrier=bar)).
__device__ __forceinline__ void tl_mbarrier_arrive_cluster(void* bar, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n"
               :: "r"(tl_smem_addr(bar)), "r"(rank) : "memory");
#endif
}

__device__ __forceinline__ void tl_mbarrier_wait(void* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred ready;\n"
      "TL_MBARRIER_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
      "@!ready bra TL_MBARRIER_WAIT;\n}\n"
      :: "r"(tl_smem_addr(bar)), "r"(parity) : "memory");
}

// Atomics (CUDA C++ Programming Guide, "Atomic Functions"). atomicAdd/Max/Min/Or/And/Xor
// are called directly where CUDA has them for the element type; these helpers fill the
// gaps: max / min of floating types as a compare-and-swap loop on the element's bits
// (atomicCAS on 16-bit words needs sm_70), atomic loads and stores (one volatile access
// of the element's bits: aligned accesses of up to 8 bytes are single transactions), and
// memory orders beyond relaxed as __threadfence() around the atomic.
// Orders are numbered as std::memory_order: 0 relaxed, 1 consume, 2 acquire, 3 release,
// 4 acq_rel, 5 seq_cst.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

template <int Bytes> struct tl_atomic_word;
template <> struct tl_atomic_word<2> { using type = unsigned short int; };
template <> struct tl_atomic_word<4> { using type = unsigned int; };
template <> struct tl_atomic_word<8> { using type = unsigned long long int; };

template <typename T> __device__ __forceinline__ typename tl_atomic_word<sizeof(T)>::type tl_atomic_bits(T value) {
  return *reinterpret_cast<typename tl_atomic_word<sizeof(T)>::type*>(&value);
}

template <typename T> __device__ __forceinline__ T tl_atomic_from_bits(typename tl_atomic_word<sizeof(T)>::type bits) {
  return *reinterpret_cast<T*>(&bits);
}

// A release (or stronger) order: earlier accesses complete before the atomic.
__device__ __forceinline__ int tl_atomic_fence_before(int order) {
  if (order >= 3) __threadfence();
  return 0;
}

// An acquire (or stronger) order: later accesses happen after the atomic; returns `old`.
template <typename T> __device__ __forceinline__ T tl_atomic_fence_after(int order, T old) {
  if (order != 0 && order != 3) __threadfence();
  return old;
}

// `op` (an atomic call) between the fences its order asks for; the comma operator
// sequences the first fence before it.
#define tl_atomic_ordered(order, op) (tl_atomic_fence_before(order), tl_atomic_fence_after((order), (op)))

// *addr = value where `value` wins (Greater: larger wins, else smaller), by compare-and-swap
// on the element's bits; a value that does not win (or is NaN) stores nothing.
template <bool Greater, typename T> __device__ __forceinline__ T tl_atomic_cas_extreme(T* addr, T value) {
  using Word = typename tl_atomic_word<sizeof(T)>::type;
  Word* word = reinterpret_cast<Word*>(addr);
  Word old = *word, assumed;
  do {
    assumed = old;
    T current = tl_atomic_from_bits<T>(assumed);
    if (!(Greater ? current < value : value < current)) break;
    old = atomicCAS(word, assumed, tl_atomic_bits(value));
  } while (old != assumed);
  return tl_atomic_from_bits<T>(old);
}

// A 64-bit integer add: atomicAdd takes unsigned long long only (int64_t / uint64_t are long
// / unsigned long here); two's-complement sums are the same bits for signed and unsigned.
template <typename T> __device__ __forceinline__ T tl_atomic_add_64(T* addr, T value) {
  static_assert(sizeof(T) == 8, "tl_atomic_add_64 adds 8-byte integers");
  return (T)atomicAdd(reinterpret_cast<unsigned long long int*>(addr), (unsigned long long int)value);
}

// Vector adds of consecutive elements (PackAtomicAdds, where the arch has them); an address not aligned to the vector adds element by element.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ void tl_atomic_add_f32x2(float* p, float a, float b) { if (((unsigned long long)p & 7) == 0) atomicAdd((float2*)p, make_float2(a, b)); else { atomicAdd(p, a); atomicAdd(p + 1, b); } }
__device__ __forceinline__ void tl_atomic_add_f32x4(float* p, float a, float b, float c, float d) { if (((unsigned long long)p & 15) == 0) atomicAdd((float4*)p, make_float4(a, b, c, d)); else { tl_atomic_add_f32x2(p, a, b); tl_atomic_add_f32x2(p + 2, c, d); } }
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
__device__ __forceinline__ void tl_atomic_add_f16x2(half* p, half a, half b) { if (((unsigned long long)p & 3) == 0) atomicAdd((__half2*)p, __halves2half2(a, b)); else { atomicAdd(p, a); atomicAdd(p + 1, b); } }
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ void tl_atomic_add_bf16x2(__nv_bfloat16* p, __nv_bfloat16 a, __nv_bfloat16 b) { if (((unsigned long long)p & 3) == 0) atomicAdd((__nv_bfloat162*)p, __halves2bfloat162(a, b)); else { atomicAdd(p, a); atomicAdd(p + 1, b); } }
#endif

// A bfloat16 add before sm_80, where CUDA declares no atomicAdd of __nv_bfloat16 (the CUDA
// backend uses it only there): a compare-and-swap on the element's 16 bits, the sum rounded
// as sm_80's instruction rounds it.
__device__ __forceinline__ __nv_bfloat16 tl_atomic_add_bf16(__nv_bfloat16* addr, __nv_bfloat16 value) {
  unsigned short int* word = reinterpret_cast<unsigned short int*>(addr);
  unsigned short int old = *word, assumed;
  do {
    assumed = old;
    float sum = __bfloat162float(__ushort_as_bfloat16(assumed)) + __bfloat162float(value);
    old = atomicCAS(word, assumed, __bfloat16_as_ushort(__float2bfloat16(sum)));
  } while (old != assumed);
  return __ushort_as_bfloat16(old);
}

template <typename T> __device__ __forceinline__ T tl_atomic_max(T* addr, T value) {
  return tl_atomic_cas_extreme<true>(addr, value);
}

template <typename T> __device__ __forceinline__ T tl_atomic_min(T* addr, T value) {
  return tl_atomic_cas_extreme<false>(addr, value);
}

template <typename T> __device__ __forceinline__ T tl_atomic_load(const T* addr, int order) {
  using Word = typename tl_atomic_word<sizeof(T)>::type;
  Word bits = *reinterpret_cast<const volatile Word*>(addr);
  return tl_atomic_fence_after(order, tl_atomic_from_bits<T>(bits));
}

template <typename T> __device__ __forceinline__ void tl_atomic_store(T* addr, T value, int order) {
  using Word = typename tl_atomic_word<sizeof(T)>::type;
  tl_atomic_fence_before(order);
  *reinterpret_cast<volatile Word*>(addr) = tl_atomic_bits(value);
  if (order == 5) __threadfence();  // seq_cst: later loads do not pass the store
}

// T.match_all_sync: __match_all_sync's value, without its predicate output (upstream's
// result: the mask where every lane of it has the same value, else 0)
template <typename T> __device__ __forceinline__ unsigned tl_match_all_sync(unsigned mask, T value) {
  int same;
  return __match_all_sync(mask, value, &same);
}

#endif  // TILELANG_CUDA_DEVICE_H_

// Random numbers (T.rng_init / T.rng_rand / T.rng_rand_float): the Philox4x32-10 counter-based
// generator (Salmon, Moraes, Dror, Shaw: "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11),
// with its counter and key set as cuRAND's Philox generator sets them, so that the 32-bit
// draws of T.rng_init(seed, subsequence, offset) are the ones cuRAND gives for
// curand_init(seed, subsequence, offset). A thread's state is 11 words: the 128-bit counter
// (s[0..3]), the 64-bit key (s[4..5], the seed), the four outputs of the current counter
// (s[6..9]) and the next one to hand out (s[10]).
__host__ __device__ __forceinline__ void tl_rng_block(unsigned* s) {
  unsigned c0 = s[0], c1 = s[1], c2 = s[2], c3 = s[3], k0 = s[4], k1 = s[5];
  for (int round = 0; round < 10; ++round) {
    if (round) {  // the key is bumped by the Weyl constants between rounds
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned)p1;
    c3 = (unsigned)p0;
    c0 = n0;
    c2 = n2;
  }
  s[6] = c0; s[7] = c1; s[8] = c2; s[9] = c3;
}

// counter += n (128 bits, n added to the low 64)
__host__ __device__ __forceinline__ void tl_rng_skip(unsigned* s, unsigned long long n) {
  const unsigned long long low = (((unsigned long long)s[1] << 32) | s[0]) + n;
  if (low < n) {  // carry into the high 64 bits
    const unsigned long long high = (((unsigned long long)s[3] << 32) | s[2]) + 1;
    s[2] = (unsigned)high;
    s[3] = (unsigned)(high >> 32);
  }
  s[0] = (unsigned)low;
  s[1] = (unsigned)(low >> 32);
}

__host__ __device__ __forceinline__ void tl_rng_init(unsigned* s, unsigned long long seed,
                                                     unsigned long long subsequence, unsigned long long offset) {
  s[0] = 0u; s[1] = 0u;
  s[2] = (unsigned)subsequence; s[3] = (unsigned)(subsequence >> 32);  // a subsequence: 2^66 draws apart
  s[4] = (unsigned)seed; s[5] = (unsigned)(seed >> 32);
  tl_rng_skip(s, offset >> 2);  // four draws per counter value
  s[10] = (unsigned)(offset & 3u);
  tl_rng_block(s);
}

__host__ __device__ __forceinline__ unsigned tl_rng_next(unsigned* s) {
  const unsigned value = s[6 + s[10]];
  if (++s[10] == 4u) {
    tl_rng_skip(s, 1);
    tl_rng_block(s);
    s[10] = 0u;
  }
  return value;
}

// uniform in (0, 1]: (x + 1/2) / 2^32, in float (the largest draws round to 1)
__host__ __device__ __forceinline__ float tl_rng_uniform32(unsigned* s) {
  return (float)tl_rng_next(s) * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
}

// uniform in (0, 1] with 53 random bits: two draws
__host__ __device__ __forceinline__ double tl_rng_uniform64(unsigned* s) {
  const unsigned long long high = tl_rng_next(s), low = tl_rng_next(s);
  const unsigned long long bits = (high << 21) ^ low;  // 53 bits
  return (double)bits * 1.1102230246251565e-16 + 5.5511151231257827e-17;
}

// standard normal by the Box-Muller transform of two uniform draws (its second value unused)
__host__ __device__ __forceinline__ float tl_rng_normal32(unsigned* s) {
  const float u = tl_rng_uniform32(s), v = tl_rng_uniform32(s);
  return sqrtf(-2.0f * logf(u)) * cosf(6.2831853071795865f * v);
}

__host__ __device__ __forceinline__ double tl_rng_normal64(unsigned* s) {
  const double u = tl_rng_uniform64(s), v = tl_rng_uniform64(s);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

// float8_e8m0fnu (MX block scales: a power of two per byte) as CUDA converts it (cuda_fp8.h's
// __nv_cvt_float_to_e8m0 with cudaRoundPosInf and __NV_SATFINITE, which upstream's
// __tl_cvt_*_to_e8m0 call): the power of two at or above |x|, from 2^-127 (byte 0) to 2^127
// (254; infinities too); NaN is 255. The same on every arch (ConvertE8M0 in fp8_arith.py)
__host__ __device__ __forceinline__ unsigned char tl_cvt_float_to_e8m0(float x) {
  union { float f; unsigned u; } v = {x};
  const unsigned u = v.u & 0x7FFFFFFFu;
  if (u > 0x7F800000u) return 0xFF;  // NaN
  if (u > 0x7F000000u) return 0xFE;  // above 2^127: the largest scale
  const unsigned e = u >> 23;
  if (e == 0u) return u > 0x00400000u ? 1 : 0;  // subnormal: 2^-127 or 2^-126
  return (unsigned char)(e + ((u & 0x7FFFFFu) != 0u));
}

__host__ __device__ __forceinline__ unsigned char tl_cvt_double_to_e8m0(double x) {
  union { double d; unsigned long long u; } v = {x};
  const unsigned long long u = v.u & 0x7FFFFFFFFFFFFFFFull;
  if (u > 0x7FF0000000000000ull) return 0xFF;  // NaN
  const int e = (int)(u >> 52);
  if (e == 0) return 0;  // below 2^-1022
  int k = e - 1023 + ((u & 0xFFFFFFFFFFFFFull) != 0ull ? 1 : 0);  // ceil(log2 |x|)
  k = k < -127 ? -127 : (k > 127 ? 127 : k);
  return (unsigned char)(k + 127);
}

__host__ __device__ __forceinline__ float tl_cvt_e8m0_to_float(unsigned char x) {
  union { unsigned u; float f; } v = {x == 0xFFu ? 0x7FFFFFFFu : (x == 0u ? 0x00400000u : (unsigned)x << 23)};
  return v.f;
}
