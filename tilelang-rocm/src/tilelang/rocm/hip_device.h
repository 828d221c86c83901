// TileLang HIP prelude: what TVM's CUDA-C printer writes, in HIP's spelling, and the
// helpers the ROCm backend's passes call. Prepended to every kernel's source.
#ifndef TILELANG_HIP_DEVICE_H_
#define TILELANG_HIP_DEVICE_H_
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>

// bfloat16 as the printer names it: HIP's hip_bfloat16 (fp32 arithmetic, round to nearest
// even) and a pair of them for the printer's 2-lane accesses.
typedef hip_bfloat16 nv_bfloat16;
struct nv_bfloat162 {
  nv_bfloat16 x, y;
  __host__ __device__ nv_bfloat162() = default;
  __host__ __device__ nv_bfloat162(nv_bfloat16 x, nv_bfloat16 y) : x(x), y(y) {}
};
__host__ __device__ inline nv_bfloat16 __float2bfloat16(float value) { return nv_bfloat16(value); }
__host__ __device__ inline float __bfloat162float(nv_bfloat16 value) { return float(value); }
__device__ inline bool __hgt(nv_bfloat16 a, nv_bfloat16 b) { return float(a) > float(b); }
__device__ inline bool __hlt(nv_bfloat16 a, nv_bfloat16 b) { return float(a) < float(b); }

// CUDA's math_constants.h, as far as the printer uses it
#define CUDART_INF_F __builtin_huge_valf()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_INF __builtin_huge_val()
#define CUDART_NAN __builtin_nan("")

// Warp intrinsics. The printer writes CUDA's *_sync forms with a 32-bit member mask; on AMD
// GPUs a wavefront has 64 lanes that execute in lockstep, so HIP's shuffles take no mask
// (HIP Programming Guide, "Warp Cross-Lane Functions"); the width argument is kept.
#define __shfl_sync(mask, var, lane, width) __shfl((var), (lane), (width))
#define __shfl_up_sync(mask, var, delta, width) __shfl_up((var), (delta), (width))
#define __shfl_down_sync(mask, var, delta, width) __shfl_down((var), (delta), (width))
#define __shfl_xor_sync(mask, var, lane_mask, width) __shfl_xor((var), (lane_mask), (width))
#define __activemask() __ballot(1)
#define __syncwarp(...) ((void)0)

// Atomics (HIP Programming Guide, "Atomic Functions"): atomicAdd/Max/Min/Or/And/Xor are
// called directly where HIP has them for the element type. These fill the gaps: floating
// max / min as a compare-and-swap loop on the element's bits (HIP's atomicCAS takes 32- and
// 64-bit words), loads and stores as one volatile access, and memory orders beyond relaxed
// as __threadfence() around the atomic. Orders are numbered as std::memory_order.
template <int Bytes> struct tl_hip_word;
template <> struct tl_hip_word<2> { using type = unsigned short int; };
template <> struct tl_hip_word<4> { using type = unsigned int; };
template <> struct tl_hip_word<8> { using type = unsigned long long int; };

template <typename T> __device__ __forceinline__ typename tl_hip_word<sizeof(T)>::type tl_hip_bits(T value) {
  return *reinterpret_cast<typename tl_hip_word<sizeof(T)>::type*>(&value);
}

template <typename T> __device__ __forceinline__ T tl_hip_from_bits(typename tl_hip_word<sizeof(T)>::type bits) {
  return *reinterpret_cast<T*>(&bits);
}

__device__ __forceinline__ int tl_hip_fence_before(int order) {
  if (order >= 3) __threadfence();
  return 0;
}

template <typename T> __device__ __forceinline__ T tl_hip_fence_after(int order, T old) {
  if (order != 0 && order != 3) __threadfence();
  return old;
}

#define tl_hip_atomic_ordered(order, op) (tl_hip_fence_before(order), tl_hip_fence_after((order), (op)))

template <bool Greater, typename T> __device__ __forceinline__ T tl_hip_cas_extreme(T* addr, T value) {
  using Word = typename tl_hip_word<sizeof(T)>::type;
  Word* word = reinterpret_cast<Word*>(addr);
  Word old = *word, assumed;
  do {
    assumed = old;
    T current = tl_hip_from_bits<T>(assumed);
    if (!(Greater ? current < value : value < current)) break;
    old = atomicCAS(word, assumed, tl_hip_bits(value));
  } while (old != assumed);
  return tl_hip_from_bits<T>(old);
}

template <typename T> __device__ __forceinline__ T tl_hip_atomic_max(T* addr, T value) {
  return tl_hip_cas_extreme<true>(addr, value);
}

template <typename T> __device__ __forceinline__ T tl_hip_atomic_min(T* addr, T value) {
  return tl_hip_cas_extreme<false>(addr, value);
}

template <typename T> __device__ __forceinline__ T tl_hip_atomic_load(const T* addr, int order) {
  using Word = typename tl_hip_word<sizeof(T)>::type;
  Word bits = *reinterpret_cast<const volatile Word*>(addr);
  return tl_hip_fence_after(order, tl_hip_from_bits<T>(bits));
}

template <typename T> __device__ __forceinline__ void tl_hip_atomic_store(T* addr, T value, int order) {
  using Word = typename tl_hip_word<sizeof(T)>::type;
  tl_hip_fence_before(order);
  *reinterpret_cast<volatile Word*>(addr) = tl_hip_bits(value);
  if (order == 5) __threadfence();
}

#endif  // TILELANG_HIP_DEVICE_H_
