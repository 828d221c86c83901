"""CPU kernels end to end against numpy (and torch CPU tensors), on llvm and c."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
from tilelang import ArgumentError
from tilelang.testing.kernels import (
    elementwise_add,
    row_softmax_sum,
    saxpy,
    tiled_matmul,
)

CPU_TARGETS = ["llvm", "c"]
rng = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("target", CPU_TARGETS)
@pytest.mark.parametrize("shape", [(64, 64), (100, 17), (1, 3)])
def test_elementwise_add(target, shape):
    kernel = tilelang.compile(elementwise_add(*shape), out_idx=[-1], target=target)
    a, b = rand(*shape), rand(*shape)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6, atol=0)  # exact up to rounding
    assert kernel.context.module.name == "cpu"


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float16", 1e-3), ("int32", 0)])
def test_elementwise_dtypes(dtype, tol):
    kernel = tilelang.compile(elementwise_add(40, 24, dtype=dtype), out_idx=[-1], target="cpu")
    a = (rand(40, 24) * 10).astype(dtype)
    b = (rand(40, 24) * 10).astype(dtype)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=tol, atol=0)


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_loop_reduction_with_symbolic_rows(target):
    kernel = tilelang.compile(row_softmax_sum(37), out_idx=[-1], target=target)
    for rows in (1, 16, 45, 200):
        a = rand(rows, 37)
        expected = 0.5 * np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)
        np.testing.assert_allclose(kernel(a, 0.5), expected, rtol=1e-5)


@pytest.mark.parametrize("target", CPU_TARGETS)
@pytest.mark.parametrize("mnk", [(64, 64, 32), (100, 70, 50), (33, 1, 17)])
def test_tiled_matmul(target, mnk):
    M, N, K = mnk
    kernel = tilelang.compile(tiled_matmul(M, N, K), out_idx=[-1], target=target)
    a, b = rand(M, K), rand(K, N)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_inplace_scalar_kernel_without_outputs():
    kernel = tilelang.compile(saxpy(1000), target="cpu")
    x, y = rand(1000), rand(1000)
    expected = 3.0 * x + y
    assert kernel(x, y, 3.0) is None
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)  # LLVM may contract to FMA


def test_views_at_any_address_are_accepted_on_cpu():
    kernel = tilelang.compile(saxpy(1000), target="cpu")
    x = rand(1001)[1:]  # contiguous, 4 bytes past the allocation's alignment
    y = rand(1003)[3:]
    expected = 2.0 * x + y
    kernel(x, y, 2.0)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_torch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(elementwise_add(50, 8), out_idx=[-1], target="cpu")
    a, b = torch.randn(50, 8), torch.randn(50, 8)
    c = kernel(a, b)
    assert isinstance(c, torch.Tensor) and c.device.type == "cpu"
    torch.testing.assert_close(c, a + b, rtol=1e-6, atol=0)


def test_jit_decorator_memoizes_per_parameters():
    @tilelang.jit(out_idx=[-1], target="cpu")
    def add(M, N):
        return elementwise_add(M, N)

    assert add(8, 8) is add(8, 8)
    assert add(8, 8) is not add(16, 8)


def test_auto_target_choice_is_visible(monkeypatch):
    from tilelang.backend.registry import REGISTRY
    from tilelang.backend.resolution import ordered_detectors
    from tilelang.backend.target import TargetDetector, detect_auto_target

    # the detectors' answer, asked here (cpu on a machine without a GPU), not read back from the kernel
    _, detector = detect_auto_target(ordered_detectors())
    kernel = tilelang.compile(elementwise_add(8, 8), out_idx=[-1])
    assert kernel.context.module.name == detector.backend_name
    assert kernel.context.target_source == f"auto ({detector.name})"
    assert f"target backend '{detector.backend_name}'" in kernel.describe()
    # TILELANG_DEFAULT_TARGET is asked before any detector
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "c")
    kernel = tilelang.compile(elementwise_add(8, 8), out_idx=[-1])
    assert (kernel.context.module.name, kernel.context.target.kind.name) == ("cpu", "c")
    assert kernel.context.target_source == "auto (TILELANG_DEFAULT_TARGET)"
    assert "target backend 'cpu' (c, auto (TILELANG_DEFAULT_TARGET))" in kernel.describe()
    # without it, the detector of the highest priority that answers wins (cpu's is 0)
    monkeypatch.delenv("TILELANG_DEFAULT_TARGET")
    monkeypatch.setitem(REGISTRY.detectors, "probe", TargetDetector("probe", priority=1000, detect=lambda: "c",
                                                                    backend="cpu"))
    kernel = tilelang.compile(elementwise_add(8, 8), out_idx=[-1])
    assert (kernel.context.target.kind.name, kernel.context.target_source) == ("c", "auto (probe)")


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(row_softmax_sum(8), out_idx=[-1], target="cpu")


class TestArgumentErrors:
    def test_dtype(self, kernel):
        with pytest.raises(ArgumentError, match=r"argument 'A' \(#0\): expected dtype float32, got float64"):
            kernel(rand(4, 8, dtype="float64"), 1.0)

    def test_constant_dimension(self, kernel):
        with pytest.raises(ArgumentError, match=r"expected shape \(M, 8\), got \(4, 9\): dimension 1 must be 8"):
            kernel(rand(4, 9), 1.0)

    def test_rank(self, kernel):
        with pytest.raises(ArgumentError, match=r"expected 2 dimensions \(M, 8\), got shape \(32,\)"):
            kernel(rand(32), 1.0)

    def test_count(self, kernel):
        with pytest.raises(ArgumentError, match=r"takes 2 argument\(s\) \(A, scale\), got 1"):
            kernel(rand(4, 8))

    def test_not_a_tensor(self, kernel):
        with pytest.raises(ArgumentError, match=r"expected a tensor \(torch.Tensor or numpy.ndarray\), got list"):
            kernel([[1.0] * 8], 1.0)

    def test_non_contiguous(self, kernel):
        with pytest.raises(ArgumentError, match=r"expected a contiguous \(row-major\) tensor"):
            kernel(rand(8, 16)[:, ::2], 1.0)

    def test_scalar_type(self, kernel):
        with pytest.raises(ArgumentError, match=r"argument 'scale' \(#1\): expected a number \(float32\), got 'x'"):
            kernel(rand(4, 8), "x")

    def test_symbolic_dimension_must_agree(self):
        kernel = tilelang.compile(elementwise_add(16, 4), out_idx=[-1], target="cpu")
        with pytest.raises(ArgumentError, match=r"argument 'B' \(#1\): expected shape \(16, 4\), got \(8, 4\)"):
            kernel(rand(16, 4), rand(8, 4))


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_zero_rows_give_empty_outputs(target):
    kernel = tilelang.compile(row_softmax_sum(8), out_idx=[-1], target=target)
    assert kernel(rand(0, 8), 1.0).shape == (0,)


def test_c_kind_handles_float16_and_abs():
    import tilelang.language as T

    @T.prim_func
    def absdiff(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.Parallel(64):
                C[i] = T.abs(T.cast(A[i], "float32") - T.cast(B[i], "float32"))

    kernel = tilelang.compile(absdiff, out_idx=[-1], target="c")
    a, b = rand(64, dtype="float16"), rand(64, dtype="float16")
    np.testing.assert_allclose(kernel(a, b), np.abs(a.astype("float32") - b.astype("float32")), rtol=1e-6)


@pytest.mark.parametrize("target, backend", [("llvm", "tvm_ffi"), ("c", "tvm_ffi"), ("c", "cython")])
def test_a_kernel_without_tensor_parameters_compiles_and_runs(target, backend):
    """Its local buffer is a workspace of the CPU device, which no tensor names (host
    codegen stopped with TVM's "Unknown device id in current IR")."""
    import tilelang.language as T
    from tilelang.backend import registered_execution_backends

    if backend not in registered_execution_backends():
        pytest.skip(f"{backend} is not installed")

    @T.prim_func
    def main(n: T.int32):
        with T.Kernel(1, threads=32):
            local = T.alloc_local((32,), "float32")
            for i in T.serial(32):
                local[i] = T.float32(i) * T.cast(n, "float32")

    kernel = tilelang.compile(main, target=target, execution_backend=backend)
    assert kernel(3) is None
