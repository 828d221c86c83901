"""(c - i) // d and (c - i) % d in indices (backend/pass_pipeline/negated_division.py):
TVM 0.27's FlattenBuffer rewrote them wrongly (``A[(31 - i) // 2]`` read ``A[14]`` at
``i = 1``); FlipNegatedDivisions rewrites them over ``+i`` first. Checked against numpy on
both CPU code generators, and the pass's output against the original expressions."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
import tvm_ffi
from tilelang.backend.pass_pipeline.negated_division import FlipNegatedDivisions
from tilelang.language.ops import substitute
from tvm import tirx
from tvm.sym.analyzer import Analyzer

torch = pytest.importorskip("torch")


def reversed_reads(n=32, c=31, d=2):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[(c - i) // d]
                C[i] = A[(c - i) % d + 4]

    return main


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("c,d", [(31, 2), (31, 3), (36, 4), (5 + 31, 5)])
def test_a_reversed_index_reads_the_element_numpy_reads(target, c, d):
    kernel = tilelang.compile(reversed_reads(c=c, d=d), target=target)
    a = torch.arange(32, dtype=torch.float32)
    b, out = torch.zeros(32), torch.zeros(32)
    kernel(a, b, out)
    i = np.arange(32)
    np.testing.assert_array_equal(b.numpy(), a.numpy()[(c - i) // d])
    np.testing.assert_array_equal(out.numpy(), a.numpy()[(c - i) % d + 4])


def test_the_flipped_divisions_equal_the_originals():
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    cases = [tirx.floordiv(31 - i, 2), tirx.floormod(31 - i, 3), tirx.floordiv(-7 - i * 3 - j, 4),
             tirx.floormod(5 - i - j * 2, 4), tirx.floordiv(i - 3, 2)]  # the last is left as it is
    store = tirx.decl_buffer((len(cases),), "int32", name="out")
    body = tirx.SeqStmt([tirx.BufferStore(store, e, [k]) for k, e in enumerate(cases)])
    func = tirx.PrimFunc([store, i, j], body)
    flipped = FlipNegatedDivisions()(tvm.IRModule({"main": func}))["main"]
    stores = []
    tvm_ffi.structural_walk(flipped.body, (tirx.BufferStore, stores.append))
    assert not isinstance(stores[0].value, tirx.FloorDiv)  # rewritten
    assert stores[-1].value.same_as(cases[-1])  # positive coefficients: untouched
    analyzer = Analyzer()
    for original, store in zip(cases, stores):
        for vi in range(-3, 9):
            for vj in range(4):
                pairs = [(i, tirx.const(vi, "int32")), (j, tirx.const(vj, "int32"))]
                want = analyzer.simplify(substitute(original, pairs))
                got = analyzer.simplify(substitute(store.value, pairs))
                assert got.value == want.value, (original, vi, vj)


def test_a_division_of_loaded_values_is_left_alone():
    """Dividends with loads (x[i] % 16, as in a histogram) are no affine form: kept."""
    @T.prim_func
    def main(X: T.Tensor((64,), T.int32), A: T.Tensor((32,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(64):
                B[i] = A[(31 - X[i] % 16) // 2 + X[i] % 16]

    kernel = tilelang.compile(main, target="llvm")
    x = torch.randint(0, 1000, (64,), dtype=torch.int32)
    a = torch.arange(32, dtype=torch.float32)
    b = torch.zeros(64)
    kernel(x, a, b)
    r = x.numpy() % 16
    np.testing.assert_array_equal(b.numpy(), a.numpy()[(31 - r) // 2 + r])
