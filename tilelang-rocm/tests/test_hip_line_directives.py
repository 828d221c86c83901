"""``tl.emit_line_directives`` on ROCm: the HIP source names the kernel's lines (MFMA GEMMs
and copies included), and hipcc's messages point at them."""

from __future__ import annotations

import re

import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import CompileError
from tilelang.rocm import toolchain

ON = {"tl.emit_line_directives": True}
GFX90A = {"kind": "rocm", "mcpu": "gfx90a"}


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


@T.prim_func
def gemm(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16"), C: T.Tensor((128, 128), "float32")):
    with T.Kernel(2, 2, threads=256) as (bx, by):
        As = T.alloc_shared((64, 32), "float16")
        Bs = T.alloc_shared((32, 64), "float16")
        Cl = T.alloc_fragment((64, 64), "float32")
        T.clear(Cl)  # mark: clear
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[by * 64, k * 32], As)  # mark: copy A
            T.copy(B[k * 32, bx * 64], Bs)  # mark: copy B
            T.gemm(As, Bs, Cl)  # mark: gemm
        T.copy(Cl, C[by * 64, bx * 64])  # mark: store


def test_the_hip_source_names_every_tile_statements_line() -> None:
    source = tilelang.lower(gemm, target=GFX90A, pass_configs=ON).kernel_source
    directives = re.findall(r'^#line (\d+) "(.*)"$', source, re.MULTILINE)
    assert {f for _, f in directives} == {__file__}
    lines = {int(n) for n, _ in directives}
    for mark in ("clear", "copy A", "copy B", "gemm", "store"):
        assert _line_of(f"# mark: {mark}") in lines, (mark, sorted(lines))
    assert "#line" not in tilelang.lower(gemm, target=GFX90A).kernel_source


def test_hipccs_errors_name_the_kernels_line(needs_hipcc: None) -> None:
    @T.prim_func
    def calls_nothing(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                A[i] = T.call_extern("float32", "no_such_device_function", A[i])  # mark: extern

    source = tilelang.lower(calls_nothing, target=GFX90A, pass_configs=ON).kernel_source
    with pytest.raises(CompileError, match=re.escape(f'{__file__}:{_line_of("# mark: extern")}:')) as err:
        toolchain._compile_hipcc(source, "gfx90a", "calls_nothing")
    assert "no_such_device_function" in str(err.value)
