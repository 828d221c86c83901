"""A PrimFunc read back from its TVMScript text (tilelang.jit.func_text), as par_compile's
workers get the PrimFuncs built in the calling process: the same function or none."""

from __future__ import annotations

import pytest
import tvm_ffi
from tilelang.jit.func_text import decode, encode
from tilelang.testing import cluster_kernels, kernels, warp_specialized

CORPUS = {
    "elementwise_add": lambda: kernels.elementwise_add(64, 64),
    "row_softmax_sum (scalar parameter)": lambda: kernels.row_softmax_sum(64),
    "tile_gemm": lambda: kernels.tile_gemm(128, 128, 128, bM=64, bN=64, bK=32, stages=3),
    "pointer_gemm": lambda: kernels.pointer_gemm(128, 128, 128),
    "split_k_gemm (atomics)": lambda: kernels.split_k_gemm(128, 128, 128, 2),
    "persistent_gemm": lambda: kernels.persistent_gemm(256, 256, 256, 64, 64, 32, 128, 2, 4),
    "flash_attention": lambda: kernels.flash_attention(1, 2, 128, 64, causal=True),
    "mla_decode": lambda: kernels.mla_decode(1, 64, 128, 64, 32),
    # a one-element fragment given to T.reduce: it prints as a scalar (`total: T.float32`)
    "split_row_sum (one-element tile)": lambda: kernels.split_row_sum(),
    "barrier_pipe (warp roles, T.attr(0, ...))": lambda: warp_specialized.barrier_pipe(256, 256, 256),
    "copy_gemm_roles (one-element barrier)": lambda: warp_specialized.copy_gemm_roles(256, 256, 256),
    # T.func_attr({"tl.cluster_dims": [2, 1, 1]}) and T.tvm_storage_sync("shared")
    "cluster_ring": lambda: cluster_kernels.cluster_ring(),
    "cluster_tma_multicast": lambda: cluster_kernels.cluster_tma_multicast(),
}


@pytest.mark.parametrize("build", CORPUS.values(), ids=CORPUS.keys())
def test_a_kernel_reads_back_as_itself(build):
    func = build()
    encoded = encode(func)
    assert encoded is not None
    again = decode(*encoded)
    assert tvm_ffi.structural_equal(func, again) and again.script() == func.script()


def test_a_kernel_whose_text_loses_an_index_is_not_encoded():
    """upstream's rms_norm (one row a block) reads its one-element fragment at the loop
    variable of a T.Parallel(1); TVMScript prints that load as the scalar `A_powsum`, which
    reads back as A_powsum[0]: another function, so the kernel is not sent."""
    assert encode(kernels.rms_norm_rows(64, 256, blk_m=1)) is None
    assert encode(kernels.rms_norm_rows(64, 256, blk_m=2)) is not None


def test_only_prim_funcs_are_encoded():
    assert encode("not a kernel") is None
