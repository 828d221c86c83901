"""A symbol that only a tensor dimension's expression gives (upstream's
``T.Tensor((n * 4,), ...)``): solved from the call's tensor (transform/solved_dims.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import ArgumentError
from tilelang.cache.validate import load_artifact

BACKENDS = ["tvm_ffi", pytest.param("cython", marks=pytest.mark.skipif(
    __import__("importlib").util.find_spec("tilelang.jit.adapter.cython") is None, reason="no cython backend"))]


def solved_kernel():
    n = T.symbolic("n")

    @T.prim_func
    def kernel(A: T.Tensor((n * 3 + 1,), T.int32), B: T.Tensor((n * 2,), T.int32)):
        with T.Kernel(1) as _:
            for i in range(n * 3 + 1):
                A[i] = i * 2
            for i in range(n * 2):
                B[i] = n

    return kernel


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_symbol_only_a_dimension_expression_gives_is_solved_from_the_tensor(backend):
    kernel = tilelang.compile(solved_kernel(), target="c", execution_backend=backend)
    a, b = np.full(16, -1, "int32"), np.full(10, -1, "int32")
    kernel(a, b)  # 16 = 3n + 1: n = 5
    np.testing.assert_array_equal(a, np.arange(0, 32, 2))
    np.testing.assert_array_equal(b, np.full(10, 5))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dimension_no_whole_symbol_gives_is_refused(backend):
    kernel = tilelang.compile(solved_kernel(), target="c", execution_backend=backend)
    with pytest.raises(ArgumentError, match=r"kernel 'kernel', argument 'A' \(#0\): dimension 0 is 17, but the "
                                            r"kernel declares it n \* 3 \+ 1, which is 17 for no whole n >= 0; "
                                            r"pass a tensor whose dimension 0 is 3 \* n \+ 1 for some n"):
        kernel(np.zeros(17, "int32"), np.zeros(10, "int32"))
    with pytest.raises(ArgumentError, match=r"argument 'B' \(#1\): expected shape .* got \(9,\)"):
        kernel(np.zeros(16, "int32"), np.zeros(9, "int32"))


def test_the_checks_survive_the_kernel_cache():
    artifact = tilelang.lower(solved_kernel(), target="c")
    assert artifact.shape_checks == ((0, 0, "A_shape0", 3, 1, "n", "n * 3 + 1"),)
    assert load_artifact(artifact.to_json()).shape_checks == artifact.shape_checks


def test_an_expression_of_two_unknown_symbols_is_still_refused():
    n, m = T.symbolic("n"), T.symbolic("m")

    @T.prim_func
    def kernel(A: T.Tensor((n * m,), T.int32)):
        with T.Kernel(1) as _:
            A[0] = 0

    with pytest.raises(tilelang.LanguageError, match=r"dimension n \* m is an expression of m, n"):
        tilelang.lower(kernel, target="c")


def test_cuda_launchers_get_the_solved_symbol_as_an_expression_of_the_dimension():
    pytest.importorskip("tilelang.cuda")
    n = T.symbolic("n")

    @T.prim_func
    def kernel(A: T.Tensor((n * 4,), T.int32)):
        with T.Kernel(1) as _:
            for i in range(n * 4):
                A[i] = 0

    artifact = tilelang.lower(kernel, target={"kind": "cuda", "arch": "sm_90"}, execution_backend="nvrtc")
    # the host's bindings are inlined into the launch operands, which launchers evaluate
    assert artifact.launches[0].args == ("param:0", "((A_shape0 // 4) * 4)")
