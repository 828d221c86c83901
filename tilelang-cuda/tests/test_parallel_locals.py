"""A T.alloc_local tile indexed by T.Parallel loop variables is a fragment
(language/local_indices.py): before, each thread kept its own full copy, and a loop that
read an element another thread's iteration wrote read a register nothing had written
(NaN in the emulator, garbage on the GPU), while the CPU gave the intended result."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm_ffi
from test_lowered_emulation import run
from tvm import tirx


def reversed_through_local():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tile = T.alloc_local((64,), "float32")
            for i in T.Parallel(64):
                tile[i] = A[i] * 2
            for i in T.Parallel(64):
                B[i] = tile[63 - i]

    return main


def scratch_per_thread():
    """Local buffers indexed by no T.Parallel variable stay one copy per thread."""
    @T.prim_func
    def main(out: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            scale = T.alloc_local((1,), "float32")
            scratch = T.alloc_local((4,), "float32")
            scale[0] = T.float32(2)
            for i in T.Parallel(32):
                for lane in T.vectorized(4):
                    scratch[lane] = T.float32(lane)
                out[i] = scratch[3] * scale[0]

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_local_tile_read_across_iterations_gives_the_loops_result(arch):
    a = np.arange(64, dtype=np.float32)
    b = np.full(64, np.nan, np.float32)
    run(tilelang.lower(reversed_through_local(), target={"kind": "cuda", "arch": arch}).device_mod, a, b)
    np.testing.assert_array_equal(b, (2 * a)[::-1])


def test_the_cpu_gives_the_same():
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    tilelang.compile(reversed_through_local(), target="cpu")(a, b)
    np.testing.assert_array_equal(b, (2 * a)[::-1])


def scopes(func) -> dict[str, str]:
    stores = []
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, stores.append))
    return {s.buffer.name: s.buffer.scope() for s in stores if s.buffer.scope() != "global"}


def test_only_locals_indexed_by_parallel_variables_become_fragments():
    assert scopes(reversed_through_local()) == {"tile": "local.fragment"}
    assert scopes(scratch_per_thread()) == {"scale": "local", "scratch": "local"}
    out = np.zeros(32, np.float32)
    run(tilelang.lower(scratch_per_thread(), target={"kind": "cuda", "arch": "sm_90"}).device_mod, out)
    np.testing.assert_array_equal(out, np.full(32, 6.0, np.float32))
