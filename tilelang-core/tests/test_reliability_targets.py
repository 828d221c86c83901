"""Kernels that cannot run on their target (issue 15, item 4), on every CPU execution backend.

Before: a CPU kernel calling a CUDA intrinsic (or any name the machine lacks) compiled; under
tvm_ffi the first call killed the process ("symbol lookup error: undefined symbol"), under
cython the extension failed to import. Now it is a LanguageError at compile time naming the
call, the backend and the source line.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

BACKENDS = [pytest.param(("cpu", "tvm_ffi"), id="tvm_ffi"), pytest.param(("c", "cython"), id="cython")]
HERE = re.escape(__file__)


def calls(name: str):
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(32):
                B[i] = T.call_extern("float32", name, A[i])

    return main


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["__shfl_sync", "tl_no_such_function"])
def test_a_function_the_cpu_lacks_is_a_compile_error(backend: tuple[str, str], name: str) -> None:
    target, execution = backend
    with pytest.raises(LanguageError, match=rf"kernel 'main': T.call_extern of '{name}', which target backend "
                                            r"'cpu' cannot call: no such function in the C library, libm or the "
                                            r"TVM runtime .*\n --> " + HERE + r":\d+:\d+\n \d+ \|\s+B\[i\] = "
                                            r"T.call_extern\(\"float32\", name, A\[i\]\)"):
        tilelang.compile(calls(name), out_idx=[-1], target=target, execution_backend=execution)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_libm_function_still_runs(backend: tuple[str, str]) -> None:
    target, execution = backend
    kernel = tilelang.compile(calls("sqrtf"), out_idx=[-1], target=target, execution_backend=execution)
    a = np.arange(32, dtype="float32")
    np.testing.assert_allclose(kernel(a), np.sqrt(a), rtol=1e-6)


def shuffle_on_the_cpu():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(32):
                B[i] = T.shfl_xor(A[i], 1)

    return main


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_warp_intrinsic_on_the_cpu_is_a_compile_error(backend: tuple[str, str]) -> None:
    target, execution = backend
    with pytest.raises(LanguageError, match=r"kernel 'main': T.shfl_xor is a warp intrinsic, which target backend "
                                            r"'cpu' does not lower \(it has no warps to shuffle or vote over\); "
                                            r"compile the kernel for a GPU target.*\n --> " + HERE):
        tilelang.compile(shuffle_on_the_cpu(), out_idx=[-1], target=target, execution_backend=execution)


def extern_on_the_cpu():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(32):
                B[i] = T.call_extern("float32", "__shfl_xor_sync", T.uint32(0xFFFFFFFF), A[i], 1, 32)

    return main


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cuda_function_on_the_cpu_is_a_compile_error(backend: tuple[str, str]) -> None:
    target, execution = backend
    with pytest.raises(LanguageError, match=r"T.call_extern of '__shfl_xor_sync', which target backend 'cpu' "
                                            r"cannot call.*\n --> " + HERE):
        tilelang.compile(extern_on_the_cpu(), out_idx=[-1], target=target, execution_backend=execution)
