// cuRAND's XORWOW and MRG32k3a generators for T.rng_init(..., generator=...): the codegen puts
// this file before a kernel that draws from them (transform/random.py), and the toolchain
// adds cuRAND's header folder (the nvidia-curand wheel, found by cuda.pathfinder, or the CUDA
// toolkit's). A kernel's state is a thread-local array of TL_CURAND_STATE_WORDS 64-bit words,
// which each helper reads as the generator's cuRAND state; the draws are cuRAND's own.
// (Philox4x32-10, the default generator, is tl_device.h's, with no header needed.)
#ifndef TL_CURAND_H
#define TL_CURAND_H
#include <curand_kernel.h>

#define TL_CURAND_STATE_WORDS 8
#ifndef TL_CURAND_QUALIFIERS  // a host build of cuRAND's device API (QUALIFIERS with __host__) sets both
#define TL_CURAND_QUALIFIERS __device__ __forceinline__
#endif

#define TL_CURAND_GENERATOR(NAME, STATE)                                                                            \
  static_assert(sizeof(STATE) <= TL_CURAND_STATE_WORDS * sizeof(unsigned long long) &&                              \
                    alignof(STATE) <= alignof(unsigned long long),                                                  \
                "tl_curand.h: " #STATE " does not fit the state a kernel allocates for it");                        \
  TL_CURAND_QUALIFIERS void tl_curand_init_##NAME(void* s, unsigned long long seed,                                 \
                                                  unsigned long long subsequence, unsigned long long offset) {      \
    curand_init(seed, subsequence, offset, static_cast<STATE*>(s));                                                 \
  }                                                                                                                 \
  TL_CURAND_QUALIFIERS unsigned tl_curand_next_##NAME(void* s) { return curand(static_cast<STATE*>(s)); }           \
  TL_CURAND_QUALIFIERS float tl_curand_uniform32_##NAME(void* s) { return curand_uniform(static_cast<STATE*>(s)); } \
  TL_CURAND_QUALIFIERS double tl_curand_uniform64_##NAME(void* s) {                                                 \
    return curand_uniform_double(static_cast<STATE*>(s));                                                           \
  }                                                                                                                 \
  TL_CURAND_QUALIFIERS float tl_curand_normal32_##NAME(void* s) { return curand_normal(static_cast<STATE*>(s)); }   \
  TL_CURAND_QUALIFIERS double tl_curand_normal64_##NAME(void* s) {                                                  \
    return curand_normal_double(static_cast<STATE*>(s));                                                            \
  }

TL_CURAND_GENERATOR(xorwow, curandStateXORWOW_t)
TL_CURAND_GENERATOR(mrg32k3a, curandStateMRG32k3a_t)
#endif  // TL_CURAND_H
