"""CPU kernels end to end (target ``c``) on every execution backend the CPU manifest
declares for it (tvm_ffi and cython), against numpy and against each other.

Tolerances: elementwise sums are exact up to one rounding (rtol 1e-6, as the core CPU
tests); the exp-sum reduction within 1e-5 relative; the tiled matmul within 1e-4 (float32
accumulation order). Backends are compared bit for bit: both compile the same TVM C code
with the same IEEE semantics (no fast-math, no FMA contraction on x86-64's baseline).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from _cython_testing import declared_execution_backends
from tilelang.testing import run_conformance
from tilelang.testing.kernels import (
    elementwise_add,
    row_softmax_sum,
    saxpy,
    tiled_matmul,
)

BACKENDS = declared_execution_backends("c")
rng = np.random.default_rng(0)


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def compile_c(func, backend: str, out_idx=(-1,)) -> tilelang.JITKernel:
    return tilelang.compile(func, out_idx=list(out_idx) or None, target="c", execution_backend=backend)


def test_both_backends_are_declared_for_c() -> None:
    assert BACKENDS == ["tvm_ffi", "cython"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(64, 64), (100, 17), (1, 3)])
def test_elementwise_add(backend: str, shape: tuple[int, int]) -> None:
    kernel = compile_c(elementwise_add(*shape), backend)
    assert f"execution backend {backend!r}" in kernel.describe()
    a, b = rand(*shape), rand(*shape)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("int32", 0), ("int64", 0), ("uint8", 0)])
def test_elementwise_dtypes(backend: str, dtype: str, tol: float) -> None:
    kernel = compile_c(elementwise_add(40, 24, dtype=dtype), backend)
    a = (rand(40, 24) * 10).astype(dtype)
    b = (rand(40, 24) * 10).astype(dtype)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=tol, atol=0)


def test_float16_on_cython() -> None:
    # TVM's C codegen spells float16 `half`; tvm_ffi compiles that source as C++, where it is
    # undefined, so only the cython launcher (C, with _Float16) runs float16 kernels on `c`
    kernel = compile_c(elementwise_add(40, 24, dtype="float16"), "cython")
    a, b = rand(40, 24, dtype="float16"), rand(40, 24, dtype="float16")
    np.testing.assert_array_equal(kernel(a, b), a + b)  # one half rounding, like numpy


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_reduction_with_symbolic_rows(backend: str) -> None:
    kernel = compile_c(row_softmax_sum(37), backend)
    for rows in (1, 16, 45, 200):
        a = rand(rows, 37)
        expected = 0.5 * np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)
        np.testing.assert_allclose(kernel(a, 0.5), expected, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mnk", [(64, 64, 32), (100, 70, 50), (33, 1, 17)])
def test_tiled_matmul(backend: str, mnk: tuple[int, int, int]) -> None:
    M, N, K = mnk
    kernel = compile_c(tiled_matmul(M, N, K), backend)
    a, b = rand(M, K), rand(K, N)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_scalar_kernel_without_outputs(backend: str) -> None:
    kernel = compile_c(saxpy(1000), backend, out_idx=())
    x, y = rand(1000), rand(1000)
    expected = 3.0 * x + y
    assert kernel(x, y, 3.0) is None
    assert kernel(x, y.copy(), 3) is None  # an int for a float scalar, as Python allows
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_at_any_address_are_accepted_on_cpu(backend: str) -> None:
    kernel = compile_c(saxpy(1000), backend, out_idx=())
    x = rand(1001)[1:]  # contiguous, 4 bytes past the allocation's alignment
    y = rand(1003)[3:]
    expected = 2.0 * x + y
    kernel(x, y, 2.0)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_cpu_tensors_in_and_out(backend: str) -> None:
    torch = pytest.importorskip("torch")
    kernel = compile_c(elementwise_add(50, 8), backend)
    a, b = torch.randn(50, 8), torch.randn(50, 8)
    c = kernel(a, b)
    assert isinstance(c, torch.Tensor) and c.device.type == "cpu" and c.dtype == torch.float32
    assert c.untyped_storage().resizable()  # an ordinary torch.empty tensor
    torch.testing.assert_close(c, a + b, rtol=1e-6, atol=0)
    # a transposed-then-contiguous tensor and a size-1 axis with any stride are contiguous
    ones = torch.randn(1, 8).expand(50, 8).contiguous()
    torch.testing.assert_close(kernel(ones, b), ones + b, rtol=1e-6, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_outputs_come_back_as_a_tuple(backend: str) -> None:
    kernel = compile_c(elementwise_add(12, 5), backend, out_idx=(1, 2))
    a = rand(12, 5)
    b, c = kernel(a)
    assert b.shape == c.shape == (12, 5) and b.dtype == c.dtype == np.float32


def test_identical_results_to_tvm_ffi() -> None:
    torch = pytest.importorskip("torch")
    cases = [
        (elementwise_add(333, 65), [rand(333, 65), rand(333, 65)], (-1,)),
        (row_softmax_sum(40), [rand(77, 40), 0.25], (-1,)),
        (tiled_matmul(65, 40, 70), [rand(65, 70), rand(70, 40)], (-1,)),
        (saxpy(999), [rand(999), rand(999), 1.5], ()),
    ]
    for func, args, out_idx in cases:
        results = []
        for backend in ("tvm_ffi", "cython"):
            kernel = compile_c(func, backend, out_idx)
            for as_torch in (False, True):
                call = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
                if as_torch:
                    call = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in call]
                out = kernel(*call)
                out = call[1] if out is None else out  # saxpy updates Y in place
                results.append(np.asarray(out))
        for other in results[1:]:
            np.testing.assert_array_equal(results[0], other)


def test_conformance_kit_on_cython() -> None:
    report = run_conformance(target="c", execution_backend="cython")
    assert set(report.values()) == {"ok"}


def test_symbolic_dimension_shared_by_inputs_and_output() -> None:
    kernel = compile_c(elementwise_add(T.symbolic("M"), 16), "cython")
    for rows in (0, 1, 31, 100):
        a, b = rand(rows, 16), rand(rows, 16)
        c = kernel(a, b)
        assert c.shape == (rows, 16)
        np.testing.assert_allclose(c, a + b, rtol=1e-6, atol=0)


def test_concurrent_calls_from_threads() -> None:
    # the compute function runs without the GIL; each call has its own views and outputs
    kernel = compile_c(tiled_matmul(64, 64, 64), "cython")
    inputs = [(rand(64, 64), rand(64, 64)) for _ in range(8)]
    results: list[np.ndarray | None] = [None] * len(inputs)

    def work(i: int) -> None:
        for _ in range(20):
            results[i] = kernel(*inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (a, b), c in zip(inputs, results):
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_none_for_an_unused_tensor_and_sub_byte_tensors(backend) -> None:
    """None where a tensor is never used (a null pointer), and fp4 bytes of any 8-bit dtype
    with an expression dimension (m * 2), through the compiled checks as well."""
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, 8), T.float4_e2m1fn), B: T.Tensor((m * 2, 8), T.float32),
             Unused: T.Tensor((m, 8), T.float32)):
        with T.Kernel(1, threads=1):
            for i, j in T.grid(m * 2, 8):
                B[i, j] = T.cast(A[i % m, j], "float32")

    kernel = compile_c(main, backend, out_idx=())
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    b = np.zeros((6, 8), np.float32)
    kernel(a, b, None)
    values = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    codes = np.stack([a & 15, a >> 4], axis=-1).reshape(3, 8)
    np.testing.assert_array_equal(b, np.concatenate([values[codes]] * 2))
    with pytest.raises(tilelang.errors.ArgumentError, match=r"dimension 0 must be m \* 2 = 6 \(m = 3\)"):
        kernel(a, np.zeros((5, 8), np.float32), None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_outputs_come_back_as_a_list(backend) -> None:
    """Upstream returns a list of the outputs (its func_attrs tests check it)."""
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32), C: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                B[i] = A[i] + 1
                C[i] = A[i] * 2

    outputs = compile_c(main, backend, out_idx=(1, 2))(np.arange(4, dtype=np.float32))
    assert isinstance(outputs, list) and len(outputs) == 2
    np.testing.assert_array_equal(outputs[0], [1, 2, 3, 4])
    np.testing.assert_array_equal(outputs[1], [0, 2, 4, 6])
