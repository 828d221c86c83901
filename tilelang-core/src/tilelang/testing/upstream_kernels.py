"""Kernels of upstream TileLang's test files that tests of several distributions run: each
is the test's kernel, as upstream writes it, so core runs it on the CPU and a backend's
tests run its lowering (tilelang-cuda's: the lowered-IR emulator and nvcc)."""

from __future__ import annotations

import tilelang.language as T


def ramp_of_either_sign():
    """Upstream's issue 2554 pair (load, store): ``A[T.Ramp(t - 2, 1, 4)]`` of a 1024-element
    tensor, whose lanes are negative for some ``t`` and wrap from the end lane by lane."""

    @T.prim_func
    def load(A: T.Tensor((1024,), "float32"), B: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=1) as _:
            for t in T.serial(4):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]

    @T.prim_func
    def store(B: T.Tensor((4, 4), "float32"), A: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(1024):
                A[i] = T.float32(-1)
            for t in T.serial(4):
                A[T.Ramp(t - 2, 1, 4)] = B[t, T.Ramp(0, 1, 4)]

    return load, store


#: upstream's packed pair ops (T.<name>) and how many pairs each takes
PAIR_OPS = {"add2": 2, "sub2": 2, "mul2": 2, "max2": 2, "min2": 2, "abs2": 1, "fma2": 3}


def pair_kernel(name, dtype, M=16):
    """Upstream's packed pair kernels (testing/python/cuda/test_cuda_f32x2_intrinsics.py):
    out[2i:2i+2] = T.<name>(A[2i:2i+2], ...) over its PAIR_OPS[name] inputs of ``2 * M``
    ``dtype`` elements, one pair per thread; the output is the last parameter."""
    op, arity = getattr(T, name), PAIR_OPS[name]
    if arity == 1:
        @T.prim_func
        def unary(A: T.Tensor((M * 2,), dtype), C: T.Tensor((M * 2,), dtype)):
            with T.Kernel(1, threads=M):
                idx = T.Ramp(T.get_thread_binding() * 2, 1, 2)
                C[idx] = op(A[idx])

        return unary
    if arity == 2:
        @T.prim_func
        def binary(A: T.Tensor((M * 2,), dtype), B: T.Tensor((M * 2,), dtype), C: T.Tensor((M * 2,), dtype)):
            with T.Kernel(1, threads=M):
                idx = T.Ramp(T.get_thread_binding() * 2, 1, 2)
                C[idx] = op(A[idx], B[idx])

        return binary

    @T.prim_func
    def ternary(A: T.Tensor((M * 2,), dtype), B: T.Tensor((M * 2,), dtype), C: T.Tensor((M * 2,), dtype),
                D: T.Tensor((M * 2,), dtype)):
        with T.Kernel(1, threads=M):
            idx = T.Ramp(T.get_thread_binding() * 2, 1, 2)
            D[idx] = op(A[idx], B[idx], C[idx])

    return ternary


def padded_tile_copy(pad, dst_dtype="float32"):
    """Upstream's test_tilelang_copy_oob_safe_value_*: a tile copy out of a 100 x 60 tensor
    into 128 x 64 tiles under ``T.annotate_safe_value({A: pad})``; the parts outside A read
    ``pad``, cast to the tile's type."""

    @T.prim_func
    def main(A: T.Tensor((100, 60), "float32"), B: T.Tensor((128, 64), dst_dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128, 64), dst_dtype)
            T.annotate_safe_value({A: pad})
            T.copy(A[0, 0], S)
            T.copy(S, B)

    return main
