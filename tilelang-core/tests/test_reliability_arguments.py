"""One table of argument cases, run on every CPU execution backend (issue 15, item 5).

Each case calls a kernel the way a careless user would and states the one outcome every
backend must give: the numpy result, or the ArgumentError's message. Before the shared
rules, cython wrote into a read-only output and took masked arrays, tvm_ffi refused a
read-only input (DLPack) and truncated 2**40 into an int32 scalar to 0, and a keyword
argument was a bare TypeError on both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError
from tilelang.testing.kernels import elementwise_add

BACKENDS = [pytest.param(("cpu", "tvm_ffi"), id="tvm_ffi"), pytest.param(("c", "cython"), id="cython")]
ROWS, COLS = 8, 4


def add_scalar(dtype: str = "int32"):
    scalar = getattr(T, dtype)

    @T.prim_func
    def main(A: T.Tensor((8,), "int64"), s: scalar, B: T.Tensor((8,), "int64")):
        with T.Kernel(1) as _:
            for i in T.Parallel(8):
                B[i] = A[i] + T.cast(s, "int64")

    return main


@functools.cache
def compiled(backend: tuple[str, str], which: str) -> tilelang.JITKernel:
    target, execution = backend
    if which == "add_out":  # C allocated and returned
        return tilelang.compile(elementwise_add(ROWS, COLS), out_idx=[-1], target=target, execution_backend=execution)
    if which == "add_inplace":  # C passed by the caller
        return tilelang.compile(elementwise_add(ROWS, COLS), target=target, execution_backend=execution)
    dtype = which.removeprefix("scalar_")
    return tilelang.compile(add_scalar(dtype), out_idx=[-1], target=target, execution_backend=execution)


def a() -> np.ndarray:
    return np.arange(ROWS * COLS, dtype="float32").reshape(ROWS, COLS)


def b() -> np.ndarray:
    return np.full((ROWS, COLS), 0.5, dtype="float32")


def read_only(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.flags.writeable = False
    return x


def from_bytes(x: np.ndarray) -> np.ndarray:
    """A read-only array as numpy makes them (over an immutable bytes object)."""
    return np.frombuffer(x.tobytes(), dtype=x.dtype).reshape(x.shape)


def iota() -> np.ndarray:
    return np.arange(8, dtype="int64")


@dataclass(frozen=True)
class Case:
    kernel: str
    call: Callable[[tilelang.JITKernel], Any]
    expect: Callable[[], Any] | None = None  # the numpy result ...
    error: str | None = None  # ... or the ArgumentError's message (a regex)


def _into_read_only_output(kernel: tilelang.JITKernel) -> None:
    kernel(a(), b(), read_only(np.zeros((ROWS, COLS), "float32")))


def _inplace(kernel: tilelang.JITKernel, *inputs: np.ndarray) -> np.ndarray:
    out = np.zeros((ROWS, COLS), "float32")
    kernel(*inputs, out)
    return out


CASES = {
    "read-only output refused": Case("add_inplace", _into_read_only_output,
                                     error=r"argument 'C' \(#2\): it is a read-only array and the kernel writes it; "
                                           r"pass a writable one \(x\.copy\(\)"),
    "read-only inputs accepted": Case("add_out", lambda k: k(read_only(a()), from_bytes(b())), lambda: a() + b()),
    "read-only inputs, caller's output": Case("add_inplace", lambda k: _inplace(k, read_only(a()), from_bytes(b())),
                                              lambda: a() + b()),
    "masked array refused": Case("add_out", lambda k: k(np.ma.masked_array(a(), mask=a() > 3), b()),
                                 error=r"argument 'A' \(#0\): a numpy masked array is refused: the kernel would "
                                       r"read its masked-out values as data; pass x\.filled"),
    "masked output refused": Case("add_inplace", lambda k: k(a(), b(), np.ma.masked_array(np.zeros((ROWS, COLS), "float32"))),
                                  error=r"argument 'C' \(#2\): a numpy masked array is refused"),
    "int32 scalar 2**40 refused": Case("scalar_int32", lambda k: k(iota(), 2**40),
                                       error=r"argument 's' \(#1\): 1099511627776 does not fit its type int32 "
                                             r"\[-2147483648, 2147483647\]; declare the parameter with a wider type"),
    "int32 scalar -2**31-1 refused": Case("scalar_int32", lambda k: k(iota(), -(2**31) - 1),
                                          error=r"-2147483649 does not fit its type int32"),
    "int32 scalar at its limit": Case("scalar_int32", lambda k: k(iota(), 2**31 - 1), lambda: iota() + 2**31 - 1),
    "numpy integer scalar": Case("scalar_int32", lambda k: k(iota(), np.int64(-5)), lambda: iota() - 5),
    "uint8 scalar 256 refused": Case("scalar_uint8", lambda k: k(iota(), 256), error=r"256 does not fit its type uint8 \[0, 255\]"),
    "uint8 scalar -1 refused": Case("scalar_uint8", lambda k: k(iota(), -1), error=r"-1 does not fit its type uint8"),
    "int64 scalar 2**40": Case("scalar_int64", lambda k: k(iota(), 2**40), lambda: iota() + 2**40),
    "bool for an integer refused": Case("scalar_int32", lambda k: k(iota(), True), error=r"expected an integer \(int32\), got True"),
    "keywords": Case("add_out", lambda k: k(B=b(), A=a()), lambda: a() + b()),
    "position then keyword": Case("add_out", lambda k: k(a(), B=b()), lambda: a() + b()),
    "keyword scalar": Case("scalar_int32", lambda k: k(iota(), s=7), lambda: iota() + 7),
    "keyword also given by position": Case("add_out", lambda k: k(a(), b(), A=a()),
                                           error=r"kernel 'main': argument 'A' given twice \(by position and by keyword\)"),
    "keyword naming no parameter": Case("add_out", lambda k: k(a(), X=b()),
                                        error=r"keyword argument 'X' refused: it has no input parameter 'X'; its "
                                              r"inputs are \(A, B\)"),
    "keyword naming an output": Case("add_out", lambda k: k(a(), b(), C=b()),
                                     error=r"keyword argument 'C' refused: 'C' is an output \(out_idx\), which the "
                                           r"kernel allocates and returns"),
    "keyword call missing an input": Case("add_out", lambda k: k(A=a()), error=r"missing argument\(s\) B; its inputs are \(A, B\)"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_argument_case(name: str, backend: tuple[str, str]) -> None:
    case = CASES[name]
    kernel = compiled(backend, case.kernel)
    if case.error is not None:
        with pytest.raises(ArgumentError, match=case.error):
            case.call(kernel)
    else:
        np.testing.assert_array_equal(case.call(kernel), case.expect())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_only_input_is_not_copied_and_stays_unchanged(backend: tuple[str, str]) -> None:
    """tvm_ffi gets a writable alias (DLPack cannot say read-only), not a copy: the kernel
    reads the caller's memory, which the written-parameter analysis says it never writes."""
    kernel = compiled(backend, "add_inplace")
    x = read_only(a())
    out = _inplace(kernel, x, x)
    np.testing.assert_array_equal(out, 2 * a())
    np.testing.assert_array_equal(x, a())
    assert not x.flags.writeable


def test_the_written_parameters_are_recorded() -> None:
    from tilelang.engine.written_params import written_params

    assert written_params(elementwise_add(ROWS, COLS)) == (2,)
    assert written_params(add_scalar()) == (2,)


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_scalar_range_on_the_fast_path(backend: tuple[str, str]) -> None:
    """The generated fast binder (torch tensors) checks the range too, or falls back."""
    kernel = compiled(backend, "scalar_int32")
    x = torch.arange(8, dtype=torch.int64)
    assert torch.equal(kernel(x, 3), x + 3)
    with pytest.raises(ArgumentError, match=r"1099511627776 does not fit its type int32"):
        kernel(x, 2**40)
    assert torch.equal(kernel(A=x, s=-3), x - 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_gemm_over_an_empty_axis(backend: tuple[str, str], library: str) -> None:
    """K = 0 (upstream's issue 1697): A is (64, 0), whose strides torch gives as (1, 1) and
    numpy as zeros, where TVM's compact-layout check wants (0, 1); C is all zeros."""
    from tilelang.testing.kernels import tiled_matmul

    kernel = tilelang.compile(tiled_matmul(64, 96, 0), out_idx=[-1], target=backend[0], execution_backend=backend[1])
    if library == "torch":
        out = kernel(torch.randn(64, 0), torch.randn(0, 96)).numpy()
    else:
        out = kernel(np.zeros((64, 0), np.float32), np.zeros((0, 96), np.float32))
    np.testing.assert_array_equal(out, np.zeros((64, 96), np.float32))
