"""Sub-byte tensors on CUDA (tilelang-core's transform/subbyte.py): the lowered kernels
compile with nvcc, the lowered device code agrees with ml_dtypes' e2m1 in the
interpreter, and (marked gpu) upstream's fp4 scatter and a T.Parallel round trip run
through every execution backend."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tilelang
import tilelang.backend
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.cuda import toolchain

SM90 = {"kind": "cuda", "arch": "sm_90"}
FP4 = ml_dtypes.float4_e2m1fn
needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
EXECUTION_BACKENDS = [spec.name for spec in tilelang.backend.registered_backends()["cuda"].execution_backends]


def nibbles(packed: np.ndarray) -> np.ndarray:
    packed = packed.astype(np.uint8)
    return np.stack([packed & 15, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)


def roundtrip(rows=8, cols=128, threads=64):
    """fp16 -> fp4 -> fp16 with T.Parallel stores (each thread gets whole bytes)."""
    @T.prim_func
    def main(A: T.Tensor((rows, cols), T.float16), B: T.Tensor((rows, cols), T.float4_e2m1fn),
             C: T.Tensor((rows, cols), T.float16)):
        with T.Kernel(rows, threads=threads) as bx:
            for j in T.Parallel(cols):
                B[bx, j] = A[bx, j]
            T.sync_threads()  # the second loop reads bytes other threads wrote
            for j in T.Parallel(cols):
                C[bx, j] = B[bx, j]

    return main


def scatter():
    """Upstream's test_subtype_fp4_scalar_store_codegen: a permuted copy, one element at a time."""
    n = T.dynamic("n")

    @T.prim_func
    def main(src: T.Tensor((n, 128), T.float4_e2m1fn), dst: T.Tensor((n, 128), T.float4_e2m1fn),
             perm: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=32) as i:
            for k in T.serial(128):
                dst[perm[i], k] = src[i, k]

    return main


@needs_nvcc
@pytest.mark.parametrize("kernel", [roundtrip, scatter])
def test_nvcc_compiles_the_sub_byte_kernels(kernel):
    source = tilelang.lower(kernel(), target=SM90).device_source
    assert toolchain._compile_nvcc(source, "sm_90", kernel.__name__)[:4] == b"\x7fELF"


def test_the_lowered_round_trip_agrees_with_ml_dtypes():
    artifact = tilelang.lower(roundtrip(), target=SM90)
    a = (np.random.default_rng(3).standard_normal((8, 128)) * 3).astype(np.float16)
    a[0, :8] = [0.25, 0.75, 1.75, 2.5, 3.5, 5.0, 100.0, -0.0]  # ties, saturation, the sign of zero
    b = np.zeros((8, 64), np.uint8)
    c = np.zeros((8, 128), np.float16)
    lowered_kernel(artifact.device_mod)(a, b, c)
    expected = a.astype(np.float32).astype(FP4)
    np.testing.assert_array_equal(nibbles(b), expected.view(np.uint8))
    np.testing.assert_array_equal(c, expected.astype(np.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_fp4_round_trip_and_scatter_on_the_gpu(backend):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(roundtrip(rows=256), target="cuda", execution_backend=backend)
    a = (torch.randn(256, 128, device="cuda") * 3).half()
    b = torch.zeros(256, 64, dtype=torch.uint8, device="cuda").view(torch.float4_e2m1fn_x2)  # torch cannot fill fp4
    c = torch.zeros(256, 128, dtype=torch.float16, device="cuda")
    kernel(a, b, c)
    expected = a.float().cpu().numpy().astype(FP4)
    np.testing.assert_array_equal(nibbles(b.view(torch.uint8).cpu().numpy()), expected.view(np.uint8))
    np.testing.assert_array_equal(c.cpu().numpy(), expected.astype(np.float16))

    copy = tilelang.compile(scatter(), target="cuda", execution_backend=backend)
    src = torch.randint(0, 256, (64, 64), dtype=torch.uint8, device="cuda").view(torch.int8)
    dst = torch.zeros(64, 64, dtype=torch.int8, device="cuda")
    perm = torch.randperm(64, dtype=torch.int32, device="cuda")
    copy(src, dst, perm)
    assert torch.equal(dst[perm.long()], src)


def test_a_reversed_index_survives_flattening_on_cuda():
    """(c - i) // d after TVM's FlattenBuffer (FlipNegatedDivisions): on the GPU path too."""
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            B[tx] = A[(63 - tx) // 2] + A[(63 - tx) % 3]

    artifact = tilelang.lower(main, target=SM90)
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    lowered_kernel(artifact.device_mod)(a, b)
    i = np.arange(64)
    np.testing.assert_array_equal(b, a[(63 - i) // 2] + a[(63 - i) % 3])


def test_a_two_dimensional_parallel_store_in_the_interpreter():
    @T.prim_func
    def store(A: T.Tensor((4, 16), T.float32), B: T.Tensor((4, 16), T.float4_e2m1fn)):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 16):
                B[i, j] = A[i, j]

    artifact = tilelang.lower(store, target=SM90)
    a = (np.random.default_rng(5).standard_normal((4, 16)) * 3).astype(np.float32)
    b = np.zeros((4, 8), np.uint8)
    lowered_kernel(artifact.device_mod)(a, b)
    np.testing.assert_array_equal(nibbles(b), a.astype(FP4).view(np.uint8))
