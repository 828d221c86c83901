"""Upstream's ``compile_flags=`` (and ``T.annotate_compile_flags``, the pass config
``tl.device_compile_flags``): the kernel's extra device-compiler flags reach nvcc and NVRTC,
whichever execution backend compiles it. They travel on the source's first line."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda import toolchain
from tilelang.errors import CompileError

SM90 = {"kind": "cuda", "arch": "sm_90"}
#: what upstream's FlashMLA example (deepseek_mla/example_mla_decode_ws.py) passes
UPSTREAM_FLAGS = ["-O3", "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__",
                  "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
                  "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr", "--expt-extended-lambda",
                  "--ptxas-options=-v,--register-usage-level=10", "-DNDEBUG"]


@T.prim_func
def scale(A: T.Tensor((256,), "float16"), B: T.Tensor((256,), "float16")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * T.float16(2)


def _source(flags: object) -> str:
    return tilelang.lower(scale, target=SM90, pass_configs={"tl.device_compile_flags": flags}).kernel_source


def test_the_flags_travel_on_the_sources_first_line() -> None:
    source = _source(["-DNDEBUG", "--ptxas-options=-v"])
    assert source.splitlines()[0] == '// tl.device_compile_flags: ["-DNDEBUG", "--ptxas-options=-v"]'
    assert toolchain.compile_flags(source) == ["-DNDEBUG", "--ptxas-options=-v"]
    assert toolchain.options_for(source) == (*toolchain.OPTIONS, "-DNDEBUG", "--ptxas-options=-v")
    assert toolchain.compile_flags(_source("-DA=1 --use_fast_math")) == ["-DA=1", "--use_fast_math"]  # a shell's split
    plain = tilelang.lower(scale, target=SM90).kernel_source
    assert toolchain.compile_flags(plain) == [] and toolchain.options_for(plain) == toolchain.OPTIONS


def test_annotate_compile_flags_is_the_same_config() -> None:
    @T.prim_func
    def annotated(A):
        A: T.Tensor((128,), T.float32)
        T.annotate_compile_flags(["-DTL_FROM_ANNOTATION=1"])
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                A[i] = A[i] + 1.0

    source = tilelang.lower(annotated, target=SM90).kernel_source
    assert toolchain.compile_flags(source) == ["-DTL_FROM_ANNOTATION=1"]


def test_nvrtc_takes_nvccs_flags_as_it_understands_them() -> None:
    assert toolchain.nvrtc_options(tuple(UPSTREAM_FLAGS)) == [
        "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--ptxas-options=-v", "--ptxas-options=--register-usage-level=10",
        "-DNDEBUG"]
    assert toolchain.nvrtc_options(("-Xptxas", "-O3,-v", "--use_fast_math")) == [
        "--ptxas-options=-O3", "--ptxas-options=-v", "--use_fast_math"]


def _compilers() -> list[object]:
    found = []
    if toolchain.nvcc_path() is not None:
        found.append(pytest.param(toolchain._compile_nvcc, "nvcc", id="nvcc"))
    if toolchain.nvrtc_unavailable_reason() is None:
        found.append(pytest.param(toolchain._compile_nvrtc, "NVRTC", id="nvrtc"))
    return found or [pytest.param(None, None, marks=pytest.mark.skip(reason="neither nvcc nor NVRTC is installed"))]


@pytest.mark.parametrize(("compile_fn", "compiler"), _compilers())
def test_upstreams_flags_compile(compile_fn, compiler: str) -> None:
    assert compile_fn(_source(UPSTREAM_FLAGS), "sm_90", "scale")[:4] == b"\x7fELF"


@pytest.mark.parametrize(("compile_fn", "compiler"), _compilers())
def test_a_flag_the_compiler_does_not_know_is_its_error(compile_fn, compiler: str) -> None:
    """The flags reach the compiler: one it does not know fails the compile, naming it."""
    with pytest.raises(CompileError, match=r"--no-such-flag") as err:
        compile_fn(_source(["--no-such-flag"]), "sm_90", "scale")
    assert compiler in str(err.value)
    if compiler == "NVRTC":
        assert "TILELANG_CUDA_TOOLCHAIN=nvcc" in str(err.value)
