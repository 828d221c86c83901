"""Generated CuTe DSL source: it parses, it computes the right values when run on the CPU
(cute_emulator: the source as generated, against stand-ins for cute), and, where NVIDIA CuTe
DSL is installed, ``cute.compile`` accepts it (no GPU needed for that)."""

from __future__ import annotations

import ast
import importlib.util
import re

import cute_emulator
import numpy as np
import pytest
import tilelang
import tilelang.language as T
from cute_kernels import row_max_exp, row_sum, swizzled_transpose, tile_copy_scale
from tilelang.errors import LanguageError
from tilelang.testing.kernels import elementwise_add, flash_attention, tile_gemm

RNG = np.random.default_rng(12)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


# (kernel, inputs, outputs, reference, tolerance)
CASES = {
    "elementwise": (lambda: elementwise_add(64, 32), lambda: (rand(64, 32), rand(64, 32)),
                    lambda: (np.zeros((64, 32), "float32"),), lambda a, b: a + b, 1e-6),
    "copy_fill": (tile_copy_scale, lambda: (rand(64, 64, dtype="float16"),),
                  lambda: (np.zeros((64, 64), "float16"),), lambda a: a.astype("float32") + 1, 2e-3),
    "row_sum": (row_sum, lambda: (rand(64, 128),), lambda: (np.zeros(64, "float32"),),
                lambda a: a.sum(1), 1e-4),
    "row_max_exp": (row_max_exp, lambda: (rand(64, 64),), lambda: (np.zeros((64, 64), "float32"),),
                    lambda a: np.exp(a - a.max(1, keepdims=True)), 1e-5),
    "swizzled": (swizzled_transpose, lambda: (rand(64, 64, dtype="float16"),),
                 lambda: (np.zeros((64, 64), "float16"),), lambda a: a.T, 0),
    # T.gemm of float32 tiles: no MMA atom takes them, so the shared SIMT lowering (fp16
    # GEMMs go to CuTe MMA atoms, which the emulator does not model: test_cutedsl_gemm.py)
    "gemm_simt": (lambda: tile_gemm(64, 64, 32, dtype="float32"), lambda: (rand(64, 32), rand(32, 64)),
                  lambda: (np.zeros((64, 64), "float32"),), lambda a, b: a @ b, 1e-4),
    "flash_attention": (lambda: flash_attention(1, 1, 64, 32, block_M=32, block_N=32),
                        lambda: tuple(rand(1, 64, 1, 32, dtype="float16") for _ in range(3)),
                        lambda: (np.zeros((1, 64, 1, 32), "float16"),), lambda q, k, v: attention(q, k, v), 2e-3),
}


def attention(q, k, v):
    qf, kf, vf = (x[0, :, 0].astype("float32") for x in (q, k, v))
    s = qf @ kf.T / np.sqrt(qf.shape[1])
    p = np.exp(s - s.max(1, keepdims=True))
    return ((p / p.sum(1, keepdims=True)) @ vf)[None, :, None, :]


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return {name: tilelang.lower(case[0](), target="cutedsl").device_source for name, case in CASES.items()}


@pytest.mark.parametrize("name", CASES)
def test_source_parses_and_uses_cute(sources: dict[str, str], name: str) -> None:
    source = sources[name]
    ast.parse(source)
    assert "@cute.kernel" in source and "@cute.jit" in source and ".launch(grid=" in source


def test_copies_use_shared_and_register_tensors(sources: dict[str, str]) -> None:
    source = sources["copy_fill"]
    assert "smem.allocate_tensor(cutlass.Float16, cute.make_layout(1024), byte_alignment=128)" in source
    assert "cute.make_rmem_tensor(cute.make_layout(8), cutlass.Float32)" in source
    assert "cute.arch.sync_threads()" in source


def test_the_extension_gives_a_swizzled_composed_layout(sources: dict[str, str]) -> None:
    assert ("smem.allocate_tensor(cutlass.Float16, cute.make_composed_layout(cute.make_swizzle(3, 3, 3), 0, "
            "cute.make_layout(1024)), byte_alignment=1024)") in sources["swizzled"]
    assert "make_swizzle" not in sources["copy_fill"]


@pytest.mark.parametrize("name", CASES)
def test_emulated_results_match_numpy(sources: dict[str, str], name: str) -> None:
    _, inputs, outputs, reference, tol = CASES[name]
    ins, outs = inputs(), outputs()
    cute_emulator.run(sources[name], *ins, *outs)
    np.testing.assert_allclose(outs[0].astype("float32"), reference(*ins).astype("float32"), rtol=tol, atol=tol)


def test_the_emulator_swizzles_storage() -> None:
    """The swizzle must move elements (else the test above could not tell it applied)."""
    swz = cute_emulator._swizzle(3, 3, 3)
    offsets = [swz(i) for i in range(1024)]
    assert sorted(offsets) == list(range(1024)) and offsets != list(range(1024))
    assert swz(64) == 64 + 8  # row 1 of 64: its first 8-element unit moves one unit over


CUTE = importlib.util.find_spec("cutlass") is not None


@pytest.mark.skipif(not CUTE, reason="NVIDIA CuTe DSL (nvidia-cutlass-dsl) is not installed")
@pytest.mark.parametrize("name", CASES)
def test_cute_compile_accepts_the_source(sources: dict[str, str], name: str, tmp_path) -> None:
    import cuda.bindings.driver as cuda
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_ptr
    from tilelang.cutedsl.execution_backend import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(sources[name])
    module = import_source(path, name)
    dtypes = [a.dtype for a in (*CASES[name][1](), *CASES[name][2]())]
    ptrs = [make_ptr(getattr(cutlass, {"float16": "Float16", "float32": "Float32"}[str(d)]), 1 << 20,
                     cute.AddressSpace.gmem, assumed_align=16) for d in dtypes]
    assert cute.compile(module.launch, *ptrs, cuda.CUstream(0)) is not None


# -- T.ext.swizzled_shared ------------------------------------------------------------------


def test_extension_arguments_are_checked() -> None:
    import tilelang.language as T

    with pytest.raises(LanguageError, match=re.escape(
            "T.ext.swizzled_shared: shift (2) must be at least bits (3), or the XOR would read the bits it writes")):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((64,), "float16")
                T.ext.swizzled_shared(S, 3, 3, 2)
                T.copy(A, S)
    with pytest.raises(LanguageError, match=re.escape("T.ext.swizzled_shared: expected a shared tile")):
        @T.prim_func
        def bad2(A: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=32):
                T.ext.swizzled_shared(A)



def test_a_cuda_source_kernel_is_refused_by_name() -> None:
    source = 'extern "C" __global__ void copy(float* A, float* B) { B[threadIdx.x] = A[threadIdx.x]; }\n'

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        T.CUDASourceCodeKernel(1, threads=64, source_code_or_path=source, entry_name="copy")

    with pytest.raises(LanguageError, match=re.escape(
            "T.CUDASourceCodeKernel is a kernel written in CUDA C++, which target backend 'cutedsl' does not compile")):
        tilelang.lower(main, target="cutedsl")

def test_ordinary_imports_do_not_import_the_extension() -> None:
    import subprocess
    import sys

    code = ("import tilelang, tilelang.language as T, sys\n"
            "from tilelang.testing.kernels import elementwise_add, flash_attention, tile_gemm\n"
            "elementwise_add(64, 32)\n"
            "print('tilelang.cutedsl.extensions' in sys.modules, 'cutlass' in sys.modules)\n"
            "T.ext.swizzled_shared\n"
            "print('tilelang.cutedsl.extensions' in sys.modules, 'cutlass' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True", "False"]


# -- the execution backend, up to the launch --------------------------------------------------


def test_build_keeps_the_source_and_refuses_none() -> None:
    from types import SimpleNamespace

    from tilelang.cutedsl.execution_backend import SOURCE, CuTeDSLExecutionBackend
    from tilelang.errors import CompileError

    artifact = tilelang.lower(tile_copy_scale(), target="cutedsl")
    files = CuTeDSLExecutionBackend().build(artifact, SimpleNamespace())
    assert files == {SOURCE: artifact.device_source.encode()}
    empty = SimpleNamespace(device_source="", launches=(), kernel_name="k", target_backend="cuda")
    with pytest.raises(CompileError, match=re.escape(
            "kernel 'k': the cutedsl execution backend runs CuTe DSL source; target backend 'cuda' produced none")):
        CuTeDSLExecutionBackend().build(empty, SimpleNamespace())


@pytest.mark.skipif(not CUTE, reason="NVIDIA CuTe DSL (nvidia-cutlass-dsl) is not installed")
def test_the_launcher_checks_arguments_before_any_launch(tmp_path) -> None:
    from tilelang.cutedsl.execution_backend import SOURCE, CuTeDSLLauncher
    from tilelang.errors import ArgumentError

    artifact = tilelang.lower(tile_copy_scale(), target="cutedsl", out_idx=-1)
    (tmp_path / SOURCE).write_text(artifact.device_source)
    launcher = CuTeDSLLauncher(artifact, tmp_path / SOURCE)
    with pytest.raises(ArgumentError, match="kernel 'main', argument 'A'"):
        launcher(np.zeros((64, 64), "float16"))


def dynamic_rows(N=128):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 8), threads=128) as bx:
            for i in T.Parallel(8):
                if bx * 8 + i < M:
                    for j in T.serial(N):
                        Y[bx * 8 + i, j] = X[bx * 8 + i, j] * 2.0

    return main


def test_a_dynamic_size_reaches_the_launch_as_an_expression_of_its_symbols():
    """A kernel over (M, 128) tensors: the launch builds their views from M alone (TVM's CSE
    used to bind M * 128 in host code, which the launch never runs: a KeyError per call of
    examples/softmax.py on the H200)."""
    source = tilelang.lower(dynamic_rows(), target="cutedsl").device_source
    assert "LAUNCH_SCALARS = (('M', 'Int32'),)" in source
    assert "cute.make_layout((M * 128))" in source and "cse_v" not in source.split("def launch")[1]
