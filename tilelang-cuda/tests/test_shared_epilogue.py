"""A wgmma GEMM's C through a shared tile (transform/shared_epilogue.py), without a GPU:
which kernels take it, the 16-byte stores that result, and the kernel as lowered run by the
numpy interpreter against numpy. The GPU runs are test_gpu_tile.py's GEMMs (sm_90 takes
this path) and benchmarks/matmul.py."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
from lowered_instructions import lowered_kernel
from test_lowered_emulation import small_ints
from test_tma import kernel_body
from test_tma import lower as lower_sm90
from tilelang.testing.kernels import tile_gemm

ON = {"tl.disable_shared_epilogue": False}


def lower(func, **configs):
    return lower_sm90(func, **{**ON, **configs})


def c_stores(body: str) -> set[str]:
    """The vector types C is stored with."""
    return set(re.findall(r"\*\((\w+)\*\)\(C_ptr \+", body))


def test_the_canonical_tile_stores_c_in_16_byte_vectors_from_a_shared_tile():
    source = lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3)).device_source
    body = kernel_body(source)
    assert c_stores(body) == {"float4"}  # fp32 C: 4 consecutive columns per store
    direct = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3),
                               **{"tl.disable_shared_epilogue": True}).device_source)
    assert c_stores(direct) == {"float2"}  # the accumulator's column pairs


@pytest.mark.parametrize("case", ["no room beside the stages", "sm_80", "mma.sync"])
def test_kernels_that_keep_the_direct_copy(case):
    if case == "no room beside the stages":  # 3 x 48 KiB of stages + a 128 KiB fp32 C tile
        body = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 256, 64, stages=3, threads=256)).device_source)
    elif case == "sm_80":
        body = kernel_body(tilelang.lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3), out_idx=[-1],
                                          target={"kind": "cuda", "arch": "sm_80"}, pass_configs=ON).device_source)
    else:
        body = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3),
                                 **{"tl.disable_wgmma": True}).device_source)
    assert c_stores(body) == {"float2"}


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_shared_epilogue_gemm_as_lowered_equals_numpy(trans_a, trans_b):
    m, n, k = 128, 256, 128
    rng = np.random.default_rng(11 + trans_a)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k))
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n))
    c = np.full((m, n), np.nan, np.float32)
    artifact = lower(tile_gemm(m, n, k, 128, 128, 32, trans_a, trans_b, stages=2), host_code=False)  # cp.async ring
    assert c_stores(kernel_body(artifact.device_source)) == {"float4"}
    lowered_kernel(artifact.device_mod)(a, b, c)
    np.testing.assert_array_equal(c, (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values))
