"""Pointer parameters (upstream's ``a_ptr: T.ptr`` with ``T.make_tensor(a_ptr, shape, dtype)``):
a call passes a tensor (its data pointer), an address as an int (``x.data_ptr()``) or None.
CPU runs compare with numpy (exact); the CUDA launch metadata is checked without a GPU, and
the GPU run is in test_gpu_pointer_params below (marked gpu)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError
from tilelang.testing.kernels import pointer_gemm

SM90 = {"kind": "cuda", "arch": "sm_90"}


def scale_ptr(n: int, dtype: str = "float32"):
    """out = 2 * src, with src reached through a pointer parameter."""

    @T.prim_func
    def main(src: T.ptr, out: T.Tensor((n,), dtype)):
        S = T.make_tensor(src, (n,), dtype)
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                out[i] = S[i] * T.cast(2, dtype)

    return main


@pytest.fixture(params=["tvm_ffi", "cython"])
def cpu_backend(request):
    if request.param == "cython":
        pytest.importorskip("tilelang.jit.adapter.cython")
    return request.param


def test_a_pointer_parameter_takes_a_tensor_an_address_or_a_numpy_array(cpu_backend):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(scale_ptr(64), target="c", execution_backend=cpu_backend)
    src = torch.arange(64, dtype=torch.float32)
    for given in (src, src.data_ptr(), np.int64(src.data_ptr())):  # (an address as a numpy int too)
        out = torch.zeros(64)
        kernel(given, out)
        np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32) * 2)
    array = np.arange(64, dtype=np.float32)[::-1].copy()
    out = np.zeros(64, np.float32)
    kernel(array, out)
    np.testing.assert_array_equal(out, array * 2)
    assert kernel.params[0].dtype == "handle" and kernel.params[0].is_scalar()


@pytest.mark.parametrize("value,message", [
    ("0x10", (r"argument 'src' \(#0\): expected an address for this pointer parameter: a tensor, an int "
              r"\(x.data_ptr\(\)\) or None; got str")),
    (True, r"expected an address for this pointer parameter: .* got bool"),
    (-8, r"argument 'src' \(#0\): -8 is not an address \(0 <= address < 2\*\*64\)"),
    (2**64, r"is not an address"),
])
def test_what_is_not_an_address_is_an_argument_error(cpu_backend, value, message):
    kernel = tilelang.compile(scale_ptr(8), target="c", execution_backend=cpu_backend)
    with pytest.raises(ArgumentError, match=message):
        kernel(value, np.zeros(8, np.float32))


def test_a_tensor_on_another_device_is_refused_for_a_pointer():
    """A CUDA kernel given a host tensor for a pointer would read host memory on the GPU."""
    from tilelang.jit.arguments import ArgumentBinder

    artifact = tilelang.lower(scale_ptr(8), target=SM90) if _has_cuda_backend() else None
    if artifact is None:
        pytest.skip("tilelang-cuda is not installed")
    binder = ArgumentBinder(artifact, device_type=2)
    with pytest.raises(ArgumentError, match=r"argument 'src' \(#0\): expected a tensor on cuda, got one on "
                                            r"cpu; move it with .to\('cuda'\)"):
        binder.bind_checked((np.zeros(8, np.float32), np.zeros(8, np.float32)))
    binder = ArgumentBinder(tilelang.lower(pointer_gemm(64, 64, 32), target=SM90), device_type=2)
    call, _, _ = binder.bind_checked((0x7F0000001000, None, 2**64 - 1, 64, 64, 32))
    assert call == [0x7F0000001000, 0, 2**64 - 1, 64, 64, 32]


def _has_cuda_backend() -> bool:
    import importlib.util

    return importlib.util.find_spec("tilelang.cuda") is not None


def test_the_launch_passes_the_pointer_as_its_address():
    """The host hands the kernel the parameter's value: no tensor, no workspace."""
    if not _has_cuda_backend():
        pytest.skip("tilelang-cuda is not installed")
    artifact = tilelang.lower(pointer_gemm(128, 128, 64), target=SM90)
    assert [p.dtype for p in artifact.params] == ["handle"] * 3 + ["int32"] * 3
    (launch,) = artifact.launches
    pointers = [(a, t) for a, t in zip(launch.args, launch.arg_types) if t == "handle"]
    assert pointers == [("a_ptr", "handle"), ("b_ptr", "handle"), ("c_ptr", "handle")]
    from tilelang.cuda import toolchain

    if toolchain.nvcc_path() is not None:  # the kernel assembles (ptxas) for the H200
        source = artifact.device_source
        assert toolchain._compile_nvcc(source, toolchain.arch_for_source(source, "sm_90"), "gemm_ptr")[:4] == b"\x7fELF"


def test_a_pointer_table_reaches_each_tensor_on_the_cpu(cpu_backend):
    """``T.Tensor([G], T.ptr)``: addresses as int64 (upstream's grouped GEMM by pointers)."""
    torch = pytest.importorskip("torch")

    @T.prim_func
    def gather(ptrs: T.Tensor([3], T.ptr), out: T.Tensor([3, 16], "float32")):
        with T.Kernel(3, threads=1) as g:
            src = T.make_tensor(ptrs[g], (16,), "float32")
            for i in T.serial(16):
                out[g, i] = src[i] + T.cast(g, "float32")

    kernel = tilelang.compile(gather, target="c", execution_backend=cpu_backend)
    sources = [torch.randn(16) for _ in range(3)]
    table = torch.tensor([s.data_ptr() for s in sources], dtype=torch.int64)
    out = torch.zeros(3, 16)
    kernel(table, out)
    expected = torch.stack(sources) + torch.arange(3.0)[:, None]
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["tvm_ffi", "nvrtc", "cython"])
def test_gpu_pointer_params(backend):
    """Upstream's pointer GEMM on the GPU: tensors for the pointers, then data_ptr() ints."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    kernel = tilelang.compile(pointer_gemm(256, 192, 128), execution_backend=backend)
    a = torch.randn(256, 128, dtype=torch.float16, device="cuda")
    b = torch.randn(192, 128, dtype=torch.float16, device="cuda")
    reference = a.float() @ b.float().T
    for pointers in ((a, b), (a.data_ptr(), b.data_ptr())):
        c = torch.zeros(256, 192, dtype=torch.float32, device="cuda")
        kernel(*pointers, c if isinstance(pointers[0], torch.Tensor) else c.data_ptr(), 256, 192, 128)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, reference, atol=1e-2, rtol=1e-2)


# -- eager kernels ---------------------------------------------------------------------------
@tilelang.jit(target="c")
def scale_eager(A: T.ptr, C: T.ptr, M: int, N: int, dtype: T.dtype, out_dtype: T.dtype, block_M: int = 16):
    A = T.make_tensor(A, (M, N), dtype)
    C = T.make_tensor(C, (M, N), out_dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=1) as bx:
        for i, j in T.grid(block_M, N):
            C[bx * block_M + i, j] = T.cast(A[bx * block_M + i, j], out_dtype) * T.cast(2, out_dtype)


def test_an_eager_pointer_made_a_tensor_takes_the_tensor():
    """Upstream's test_jit2_gemm_ptr form: `A: T.ptr` then `A = T.make_tensor(A, shape, dtype)`,
    compiled ahead with `T.ptr()` placeholders (par_compile), then called with tensors."""
    torch = pytest.importorskip("torch")
    dtypes = [(T.float16, T.float32), (T.float32, T.float32)]
    scale_eager.par_compile([{"A": T.ptr(), "C": T.ptr(), "M": 32, "N": 8, "dtype": i, "out_dtype": o}
                             for i, o in dtypes])
    for i, o in dtypes:
        a = torch.randn(32, 8).to(i.as_torch())
        c = torch.empty(32, 8, dtype=o.as_torch())
        scale_eager(a, c, 32, 8, i.as_torch(), o.as_torch())
        np.testing.assert_array_equal(c.numpy(), a.to(o.as_torch()).numpy() * 2)
    with pytest.raises(ArgumentError, match=r"expected shape \(32, 8\), got \(32, 4\)"):
        scale_eager(torch.zeros(32, 4, dtype=torch.float32), torch.zeros(32, 4), 32, 8, torch.float32, torch.float32)


def test_make_tensor_outside_a_kernel_says_where_it_belongs():
    from tilelang.errors import LanguageError

    with pytest.raises(LanguageError, match=r"T.make_tensor outside a kernel: write it in a T.prim_func's body"):
        T.make_tensor(T.ptr(), (4,), "float32")
