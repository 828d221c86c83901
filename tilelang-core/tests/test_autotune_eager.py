"""@tilelang.autotune over an eager @tilelang.jit kernel: upstream's examples call
``kernel.compile(M=..., N=..., block_M=...)`` with every tunable given."""

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


@tilelang.autotune(configs=[{"block_M": 16}, {"block_M": 32}])
@tilelang.jit
def scaled_copy(A, block_M, scale=2.0):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=32) as bx:
        for i, j in T.Parallel(block_M, N):
            if bx * block_M + i < M:
                B[bx * block_M + i, j] = A[bx * block_M + i, j] * scale
    return B


def test_compile_with_every_tunable_gives_that_configuration():
    kernel = scaled_copy.compile(M=40, N=8, block_M=16)
    a = np.random.default_rng(0).standard_normal((40, 8)).astype("float32")
    np.testing.assert_allclose(kernel(a), a * 2.0, rtol=0, atol=0)


def test_tuning_an_eager_kernel_by_its_sizes_is_refused_with_the_fix():
    with pytest.raises(TileLangError, match=r"scaled_copy: autotuning an eager kernel .* not supported yet; "
                                            r"pass every tunable argument \(block_M\)"):
        scaled_copy.compile(M=40, N=8)
