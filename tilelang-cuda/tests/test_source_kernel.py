"""T.CUDASourceCodeKernel (language/source_kernel.py): a kernel written in CUDA C++ takes the
place of the code TileLang would generate for its launch frame, is launched by its entry
name with the function's tensors and shape symbols, and mistakes in it are errors that
say what to write. Checked here by the device source, nvcc and the launch metadata every
launcher reads; marked gpu, run through each execution backend."""

from __future__ import annotations

import re

import pytest
import tilelang
import tilelang.backend
import tilelang.language as T
from tilelang.cuda import toolchain
from tilelang.errors import LanguageError

SM90 = {"kind": "cuda", "arch": "sm_90"}
needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
EXECUTION_BACKENDS = [spec.name for spec in tilelang.backend.registered_backends()["cuda"].execution_backends]

COPY = """
extern "C" __global__ void external_copy(float* A, float* B, int n) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        B[i] = A[i];
    }
}
"""

SCALE = """
// a helper of the source's own, and a second kernel that is not the entry
__device__ float twice(float x) { return 2.0f * x; }
__global__ void unused(float* x) { x[0] = 0.0f; }
extern "C" {
__global__ void __launch_bounds__(64) scale_rows(float* Out, float* X, int cols, int rows) {
    int r = blockIdx.x, c = threadIdx.x;
    if (r < rows && c < cols) Out[r * cols + c] = twice(X[r * cols + c]);
}
}
"""


def source_kernel(source=COPY, entry="external_copy", **kwargs):
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        T.CUDASourceCodeKernel(T.ceildiv(N, 128), threads=128, source_code_or_path=source, entry_name=entry,
                               **kwargs)

    return main


def scale_rows():
    """Parameters not in name order (X before Out) and two shape symbols: the entry gets
    the tensors by name, then the symbols by name."""
    rows, cols = T.dynamic("rows"), T.dynamic("cols")

    @T.prim_func
    def main(X: T.Tensor((rows, cols), T.float32), Out: T.Tensor((rows, cols), T.float32)):
        T.CUDASourceCodeKernel(rows, threads=64, source_code_or_path=SCALE, entry_name="scale_rows")

    return main


def test_the_source_is_the_kernel_and_is_launched_by_its_entry_name():
    artifact = tilelang.lower(source_kernel(), target=SM90)
    assert [gvar.name_hint for gvar in artifact.device_mod.functions] == ["external_copy"]
    source = artifact.device_source
    assert "B[i] = A[i];" in source and "main_kernel" not in source and "tl_source_kernel" not in source
    assert len(re.findall(r"__global__\s+void\s+external_copy\(", source)) == 1  # TVM's own declaration is gone
    (launch,) = artifact.launches
    assert launch.symbol == "external_copy" and launch.args == ("param:0", "param:1", "N")
    assert launch.arg_types == ("handle", "handle", "int32")
    assert launch.grid == ("((N + 127) // 128)", "1", "1") and launch.block == ("128", "1", "1")


def test_tensors_then_symbols_each_by_name():
    (launch,) = tilelang.lower(scale_rows(), target=SM90).launches
    assert launch.symbol == "scale_rows" and launch.args == ("param:1", "param:0", "cols", "rows")
    assert launch.block == ("64", "1", "1")


def test_the_source_may_be_a_file(tmp_path):
    path = tmp_path / "copy.cu"
    path.write_text(COPY)
    for given in (path, str(path)):
        assert "B[i] = A[i];" in tilelang.lower(source_kernel(given), target=SM90).device_source
    with pytest.raises(LanguageError, match=r"no CUDA source file '.*missing\.cu'"):
        source_kernel(str(tmp_path / "missing.cu"))


def test_a_source_kernel_beside_a_generated_one():
    @T.prim_func
    def main(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = T.float32(1)
        T.CUDASourceCodeKernel(2, threads=128, source_code_or_path=COPY.replace(", int n", ""),
                               entry_name="external_copy", prelude="#define n 256")

    artifact = tilelang.lower(main, target=SM90)
    assert [launch.symbol for launch in artifact.launches] == ["main_kernel", "external_copy"]
    assert artifact.launches[1].args == ("param:0", "param:1")
    assert "#define n 256" in artifact.device_source


@pytest.mark.parametrize("mistake, message", [
    ({"entry": "main_kernel"}, r"no __global__ function 'main_kernel'\. Available entries: external_copy"),
    ({"source": COPY.replace('extern "C" ', "")}, (r"'external_copy' is not declared extern \"C\".*write "
                                                    r"`extern \"C\" __global__ void external_copy\(\.\.\.\)`")),
    ({"source": "__device__ int f() { return 1; }\n"}, r"declares no __global__ function"),
    ({"source": ""}, r"source_code_or_path must be CUDA source text or the path of a file"),
])
def test_mistakes_in_the_source_are_named(mistake, message):
    with pytest.raises(LanguageError, match=message):
        source_kernel(**mistake)


def test_an_entry_with_other_parameters_lists_what_the_kernel_passes():
    two = COPY.replace(", int n", "").replace("i < n", "i < 1024")
    with pytest.raises(LanguageError, match=re.escape(
            "external_copy() declares 2 parameter(s) (float* A, float* B), but the kernel passes 3: "
            "A (float32*), B (float32*), N (int32)") + r"(.|\n)*test_source_kernel.py:\d+"):
        tilelang.lower(source_kernel(two), target=SM90)


def test_inside_a_kernel_frame_is_refused():
    with pytest.raises(LanguageError, match="is a kernel of its own"):
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                T.CUDASourceCodeKernel(1, source_code_or_path=COPY, entry_name="external_copy")


def test_cluster_dims_reach_the_source():
    artifact = tilelang.lower(source_kernel(cluster_dims=2), target=SM90)
    assert 'extern "C" __global__ __cluster_dims__(2, 1, 1) void external_copy(' in artifact.device_source


@needs_nvcc
@pytest.mark.parametrize("kernel", [source_kernel, scale_rows])
def test_nvcc_compiles_source_kernels(kernel):
    source = tilelang.lower(kernel(), target=SM90).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", kernel.__name__)[:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_source_kernels_run(backend):
    import torch

    copy = tilelang.compile(source_kernel(), target="cuda", execution_backend=backend)
    a = torch.randn(1000, device="cuda")
    b = torch.zeros_like(a)
    copy(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)
    scale = tilelang.compile(scale_rows(), target="cuda", execution_backend=backend)
    x = torch.randn(7, 50, device="cuda")
    out = torch.zeros_like(x)
    scale(x, out)
    torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
