// TileLang CUDA conversions of 2 and 4 lanes at once (transform/conversions.py): a vector
// cast becomes one paired conversion per two lanes (cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32,
// cvt.rn.satfinite.e4m3x2.f32, cvt.rn.f16x2.e4m3x2, ...) instead of one per lane. Each helper
// is its own section, headed by a "helper:" comment line; codegen.py puts in those a kernel calls (and
// those they call) after TVM's prelude, whose vector types (half4, nv_bfloat164,
// __nv_fp8x2_e4m3) they take. A helper returns the converted lanes' bits as one unsigned
// integer, which the kernel reinterprets as the vector: TVM's codegen calls a function
// that returns a vector once per lane. Names follow upstream TileLang's where upstream has
// one (__tl_cvt_fp8x2_to_float2, ...), so source checks written for upstream find them.
// Rounding is CUDA's scalar conversions': to nearest even, fp8 saturating to its largest
// finite value (__NV_SATFINITE).

// helper: __tl_cvt_bits
template <typename To, typename From>
__device__ __forceinline__ To __tl_cvt_bits(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "a conversion's bits fill its result");
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const To*>(&v);  // as TVM's codegen reads a vector's bits (no memcpy under NVRTC)
#else
  To r;
  memcpy(&r, &v, sizeof(To));
  return r;
#endif
}

// helper: __tl_cvt_float2_to_half2
__device__ __forceinline__ unsigned __tl_cvt_float2_to_half2(float2 v) {
  return __tl_cvt_bits<unsigned>(__float22half2_rn(v));
}

// helper: __tl_cvt_float4_to_half4
__device__ __forceinline__ unsigned long long __tl_cvt_float4_to_half4(float4 v) {
  const __half2 lo = __float22half2_rn(make_float2(v.x, v.y)), hi = __float22half2_rn(make_float2(v.z, v.w));
  return __tl_cvt_bits<unsigned>(lo) | ((unsigned long long)__tl_cvt_bits<unsigned>(hi) << 32);
}

// helper: __tl_cvt_half2_to_float2
__device__ __forceinline__ unsigned long long __tl_cvt_half2_to_float2(__half2 v) {
  return __tl_cvt_bits<unsigned long long>(__half22float2(v));
}

// helper: __tl_cvt_float2_to_bfloat162
__device__ __forceinline__ unsigned __tl_cvt_float2_to_bfloat162(float2 v) {
  return __tl_cvt_bits<unsigned>(__float22bfloat162_rn(v));
}

// helper: __tl_cvt_float4_to_bfloat164
__device__ __forceinline__ unsigned long long __tl_cvt_float4_to_bfloat164(float4 v) {
  const __nv_bfloat162 lo = __float22bfloat162_rn(make_float2(v.x, v.y));
  const __nv_bfloat162 hi = __float22bfloat162_rn(make_float2(v.z, v.w));
  return __tl_cvt_bits<unsigned>(lo) | ((unsigned long long)__tl_cvt_bits<unsigned>(hi) << 32);
}

// helper: __tl_cvt_bfloat162_to_float2
__device__ __forceinline__ unsigned long long __tl_cvt_bfloat162_to_float2(__nv_bfloat162 v) {
  return __tl_cvt_bits<unsigned long long>(__bfloat1622float2(v));
}

// helper: __tl_cvt_fp8x2_to_half2
__device__ __forceinline__ unsigned __tl_cvt_fp8x2_to_half2(__nv_fp8x2_e4m3 v) {
  return __tl_cvt_bits<unsigned>(__nv_cvt_fp8x2_to_halfraw2(v.__x, __NV_E4M3));
}
__device__ __forceinline__ unsigned __tl_cvt_fp8x2_to_half2(__nv_fp8x2_e5m2 v) {
  return __tl_cvt_bits<unsigned>(__nv_cvt_fp8x2_to_halfraw2(v.__x, __NV_E5M2));
}

// helper: __tl_cvt_fp8x2_to_float2
template <typename Fp8x2>
__device__ __forceinline__ unsigned long long __tl_cvt_fp8x2_to_float2(Fp8x2 v) {
  // every fp8 value is a half: through half2 it is exact
  return __tl_cvt_bits<unsigned long long>(__half22float2(__tl_cvt_bits<__half2>(__tl_cvt_fp8x2_to_half2(v))));
}

// helper: __tl_cvt_fp8x4_to_half4
// (four 8-bit lanes: the low 16 bits hold lanes 0 and 1, as in memory)
template <typename Fp8x2, typename Fp8x4>
__device__ __forceinline__ unsigned long long __tl_cvt_fp8x4_to_half4_of(Fp8x4 v) {
  Fp8x2 lo, hi;
  lo.__x = (__nv_fp8x2_storage_t)(v.__x & 0xFFFFu);
  hi.__x = (__nv_fp8x2_storage_t)(v.__x >> 16);
  return __tl_cvt_fp8x2_to_half2(lo) | ((unsigned long long)__tl_cvt_fp8x2_to_half2(hi) << 32);
}
__device__ __forceinline__ unsigned long long __tl_cvt_fp8x4_to_half4(__nv_fp8x4_e4m3 v) {
  return __tl_cvt_fp8x4_to_half4_of<__nv_fp8x2_e4m3>(v);
}
__device__ __forceinline__ unsigned long long __tl_cvt_fp8x4_to_half4(__nv_fp8x4_e5m2 v) {
  return __tl_cvt_fp8x4_to_half4_of<__nv_fp8x2_e5m2>(v);
}

// helper: __tl_cvt_float2_to_fp8x2
template <__nv_fp8_interpretation_t Kind>
__device__ __forceinline__ unsigned short __tl_cvt_float2_to_fp8x2(float2 v) {
  return __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, Kind);
}

// helper: __tl_cvt_float4_to_fp8x4
template <__nv_fp8_interpretation_t Kind>
__device__ __forceinline__ unsigned __tl_cvt_float4_to_fp8x4(float4 v) {
  return __tl_cvt_float2_to_fp8x2<Kind>(make_float2(v.x, v.y)) |
         ((unsigned)__tl_cvt_float2_to_fp8x2<Kind>(make_float2(v.z, v.w)) << 16);
}

// helper: __tl_cvt_half2_to_fp8x2
template <__nv_fp8_interpretation_t Kind>
__device__ __forceinline__ unsigned short __tl_cvt_half2_to_fp8x2(__half2 v) {
  return __nv_cvt_halfraw2_to_fp8x2(static_cast<__half2_raw>(v), __NV_SATFINITE, Kind);
}

// helper: __tl_cvt_half4_to_fp8x4
template <__nv_fp8_interpretation_t Kind>
__device__ __forceinline__ unsigned __tl_cvt_half4_to_fp8x4(half4 v) {
  return __tl_cvt_half2_to_fp8x2<Kind>(__halves2half2(v.x, v.y)) |
         ((unsigned)__tl_cvt_half2_to_fp8x2<Kind>(__halves2half2(v.z, v.w)) << 16);
}
