"""Loops marked unrolled are expanded in the IR only up to MAX_UNROLLED_STATEMENTS statements
(backend/pass_pipeline/pipeline_utils.py, BoundExplicitUnrolling); a larger nest stays a
loop under ``#pragma unroll`` for the device compiler. Upstream's rms_norm of a 32 x 3584
fragment on 128 threads (benchmark/compile_speed's zoo) became 420 KB of CUDA: 2.4 s to
lower and 4.7 s in nvcc, against 0.3 s and 2.5 s as loops, with the same registers and
spills (ptxas -v)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
import tvm_ffi
from tilelang.backend.pass_pipeline.pipeline_utils import (
    MAX_UNROLLED_STATEMENTS,
    BoundExplicitUnrolling,
    unrolled_size,
)
from tilelang.language.frontend import DYNAMIC_UNROLL
from tvm import tirx
from tvm.script import tirx as S

torch = pytest.importorskip("torch")


@S.prim_func
def three_nests(A: S.Buffer((1024,), "float32")):
    for i in S.unroll(300):
        A[i] = S.float32(0)
    for i in S.unroll(100):
        for j in S.unroll(4):
            A[i * 4 + j] = S.float32(1)
            A[i * 4 + j] = A[i * 4 + j] + S.float32(1)
    for i in S.unroll(200):
        A[i] = S.float32(2)


def loops(func) -> list[tuple[int, str, bool]]:
    """(extent, kind, left to the device compiler) of every loop, outermost first."""
    found = []

    def visit(loop):
        found.append((int(loop.extent.value), str(loop.kind), DYNAMIC_UNROLL in loop.annotations))

    tvm_ffi.structural_walk(func.body, (tirx.For, visit), order="pre")
    return found


def test_what_the_nests_expand_to():
    nests = list(three_nests.body.seq)
    assert [unrolled_size(nest) for nest in nests] == [300, 800, 200]
    assert unrolled_size(three_nests.body) == 1300
    assert MAX_UNROLLED_STATEMENTS == 256


def test_nests_past_the_bound_stay_loops_and_their_small_inner_loops_do_not():
    out = BoundExplicitUnrolling()(tvm.IRModule({"main": three_nests}))["main"]
    unrolled, serial = str(tirx.ForKind.UNROLLED), str(tirx.ForKind.SERIAL)
    assert loops(out) == [(300, serial, True),  # 300 statements: left to the device compiler
                          (100, serial, True), (4, unrolled, False),  # the 4 x 2 inner nest fits
                          (200, unrolled, False)]  # fits: expanded here, as before
    assert loops(BoundExplicitUnrolling(limit=1000)(tvm.IRModule({"main": three_nests}))["main"]) == \
        [(300, unrolled, False), (100, unrolled, False), (4, unrolled, False), (200, unrolled, False)]


def long_unrolled_loop(n: int):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.unroll(n):
                B[i] = A[n - 1 - i] * 2.0 + 1.0

    return main


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_a_long_unrolled_loop_computes_what_numpy_does(target):
    kernel = tilelang.compile(long_unrolled_loop(3000), target=target)
    a = torch.arange(3000, dtype=torch.float32)
    b = torch.full((3000,), float("nan"))
    kernel(a, b)
    np.testing.assert_array_equal(b.numpy(), a.numpy()[::-1] * 2 + 1)


def test_a_long_unrolled_loop_stays_one_loop_in_the_source():
    """3000 iterations: one loop statement in C (3000 stores before the bound)."""
    source = tilelang.compile(long_unrolled_loop(3000), target="c").get_kernel_source()
    assert source.count("B[") == 1, source
    short = tilelang.compile(long_unrolled_loop(64), target="c").get_kernel_source()
    assert short.count("B[") == 64  # within the bound: expanded, as before
