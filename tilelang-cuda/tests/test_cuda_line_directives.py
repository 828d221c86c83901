"""``tl.emit_line_directives`` on CUDA: each statement of the generated source is preceded by
``#line N "file"`` naming the kernel line it came from, through the tensor-core pipelines
(cp.async on sm_80, TMA boxes and wgmma on sm_90), and nvcc's messages name those lines."""

from __future__ import annotations

import os
import re

import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda import toolchain
from tilelang.errors import CompileError

ON = {"tl.emit_line_directives": True}


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


def gemm(M: int = 256, N: int = 256, K: int = 256, bm: int = 64, bn: int = 64, bk: int = 32) -> T.PrimFunc:
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)  # mark: clear
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):  # mark: pipelined
                T.copy(A[by * bm, k * bk], As)  # mark: copy A
                T.copy(B[k * bk, bx * bn], Bs)  # mark: copy B
                T.gemm(As, Bs, Cl)  # mark: gemm
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = Cl[i, j] * 2.0  # mark: epilogue

    return main


@pytest.mark.parametrize(("arch", "execution_backend"), [("sm_80", None), ("sm_90", None), ("sm_90", "tvm_ffi")],
                         ids=["sm_80-cp.async", "sm_90-cp.async", "sm_90-tma"])
def test_every_tile_statement_names_its_line(arch: str, execution_backend: str | None) -> None:
    artifact = tilelang.lower(gemm(), target={"kind": "cuda", "arch": arch}, pass_configs=ON,
                              execution_backend=execution_backend)
    source = artifact.kernel_source
    directives = re.findall(r'^#line (\d+) "(.*)"$', source, re.MULTILINE)
    assert {f for _, f in directives} == {__file__}
    lines = {int(n) for n, _ in directives}
    for mark in ("clear", "pipelined", "copy A", "copy B", "gemm", "epilogue"):
        assert _line_of(f"# mark: {mark}") in lines, (mark, sorted(lines))
    if execution_backend == "tvm_ffi":  # each TMA box of the ring is one copy's line
        kernel = source[source.index("__global__"):].splitlines()
        boxes = [i for i, line in enumerate(kernel) if "tl_tma_load" in line]
        nearest = {next(kernel[j] for j in range(i, -1, -1) if kernel[j].startswith("#line")) for i in boxes}
        assert boxes and nearest == {f'#line {_line_of(f"# mark: copy {x}")} "{__file__}"' for x in "AB"}
    plain = tilelang.lower(gemm(), target={"kind": "cuda", "arch": arch}, execution_backend=execution_backend)
    assert "#line" not in plain.kernel_source


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_nvccs_errors_name_the_kernels_line() -> None:
    @T.prim_func
    def calls_nothing(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                A[i] = T.call_extern("float32", "no_such_device_function", A[i])  # mark: extern

    source = tilelang.lower(calls_nothing, target={"kind": "cuda", "arch": "sm_80"}, pass_configs=ON).kernel_source
    with pytest.raises(CompileError) as err:
        toolchain._compile_nvcc(source, "sm_80", "calls_nothing")
    assert f'{__file__}({_line_of("# mark: extern")}): error: identifier "no_such_device_function" is undefined' \
        in str(err.value)


def _compilers() -> list[object]:
    found = []
    if toolchain.nvcc_path() is not None:
        found.append(pytest.param(toolchain._compile_nvcc, id="nvcc"))
    if toolchain.nvrtc_unavailable_reason() is None:
        found.append(pytest.param(toolchain._compile_nvrtc, id="nvrtc"))
    return found or [pytest.param(None, marks=pytest.mark.skip(reason="neither nvcc nor NVRTC is installed"))]


@pytest.mark.parametrize("compile_fn", _compilers())
def test_the_cubin_maps_its_code_to_the_kernels_file(compile_fn) -> None:
    """With the directives the cubin has a line table (-lineinfo) over the .py file, which
    compute-sanitizer and Nsight Compute read; without them it names no .py file."""
    target = {"kind": "cuda", "arch": "sm_90"}
    with_lines = tilelang.lower(gemm(), target=target, pass_configs=ON, execution_backend="tvm_ffi").kernel_source
    plain = tilelang.lower(gemm(), target=target, execution_backend="tvm_ffi").kernel_source
    assert toolchain.options_for(with_lines) == (*toolchain.OPTIONS, "-lineinfo")
    assert toolchain.options_for(plain) == toolchain.OPTIONS
    name = os.path.basename(__file__).encode()  # (the line table keeps folder and name apart)
    assert name in compile_fn(with_lines, "sm_90a", "gemm")
    assert b".py" not in compile_fn(plain, "sm_90a", "gemm")
