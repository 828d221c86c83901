"""bfloat16 on GPUs before sm_80 (Turing, sm_75: a T4). TVM declares CUDA's bfloat16 type
from sm_80 only and, below, legalizes bfloat16 to uint16 bits with float math, vectorized
into types its own codegen cannot print (`make_ulonglong4` of eight values): every
bfloat16 kernel failed to compile for sm_75. Here bfloat16 stays bfloat16 (cuda_bf16.h
computes it in float below sm_80), and atomic adds, which CUDA has for bfloat16 from sm_80,
go through a compare-and-swap helper there.

Checked without a GPU: the device source, ptxas (nvcc) for sm_75, and the lowered-IR
emulator against numpy (bfloat16 as its bits; inputs exact in bfloat16, so the results are).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from test_lowered_emulation import run
from tilelang.cuda import toolchain
from tilelang.testing.kernels import elementwise_add, tiled_matmul

SM75 = {"kind": "cuda", "arch": "sm_75"}
nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def bf16_bits(values: np.ndarray) -> np.ndarray:
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def row_max():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((128,), "bfloat16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_fragment((128, 64), "bfloat16")
            best = T.alloc_fragment((128,), "bfloat16")
            T.copy(A, tile)
            T.reduce_max(tile, best, dim=1)
            T.copy(best, B)

    return main


def atomic_sum():
    @T.prim_func
    def main(A: T.Tensor((256,), "bfloat16"), B: T.Tensor((2,), "bfloat16")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                T.atomic_add(B[bx], A[bx * 128 + i])

    return main


KERNELS = {
    "add": lambda: elementwise_add(1024, 256, dtype="bfloat16"),
    "matmul": lambda: tiled_matmul(128, 128, 64, dtype="bfloat16"),
    "row_max": row_max,
    "atomic_sum": atomic_sum,
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_bfloat16_kernels_stay_bfloat16_before_sm80(name):
    source = tilelang.lower(KERNELS[name](), target=SM75).device_source
    assert "#if 1  // bfloat16 on every arch" in source  # TVM's prelude, no longer sm_80-only
    kernel = source[source.find('extern "C" __global__'):]
    assert "nv_bfloat16* __restrict__" in kernel and "ushort" not in kernel
    if name == "atomic_sum":
        assert "tl_atomic_add_bf16(" in kernel and "atomicAdd(" not in kernel


@nvcc
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_bfloat16_kernels_assemble_for_sm75(name):
    source = tilelang.lower(KERNELS[name](), target=SM75).device_source
    assert toolchain._compile_nvcc(source, "sm_75", f"bf16_{name}")[:4] == b"\x7fELF"


def test_bfloat16_add_and_row_max_as_lowered_for_sm75_equal_numpy():
    rng = np.random.default_rng(75)
    a = rng.integers(-64, 64, (1024, 256)).astype(np.float32)
    b = rng.integers(-64, 64, (1024, 256)).astype(np.float32)
    c = np.zeros((1024, 256), np.uint16)
    run(tilelang.lower(elementwise_add(1024, 256, dtype="bfloat16"), target=SM75, out_idx=[-1]).device_mod,
        bf16_bits(a), bf16_bits(b), c)
    np.testing.assert_array_equal(bf16_values(c), a + b)
    x = rng.integers(-100, 100, (128, 64)).astype(np.float32)
    best = np.zeros(128, np.uint16)
    run(tilelang.lower(row_max(), target=SM75, out_idx=[-1]).device_mod, bf16_bits(x), best)
    np.testing.assert_array_equal(bf16_values(best), x.max(axis=1))


def test_bfloat16_atomic_adds_as_lowered_for_sm75_equal_numpy():
    a = np.random.default_rng(7).integers(-4, 5, 256).astype(np.float32)
    b = np.zeros(2, np.uint16)
    calls = run(tilelang.lower(atomic_sum(), target=SM75, out_idx=[-1]).device_mod, bf16_bits(a), b)
    assert calls["tl_atomic_add_bf16"] > 0
    np.testing.assert_array_equal(bf16_values(b), a.reshape(2, 128).sum(axis=1))


HOST_BUILD = """
import sys
import tilelang, tvm
sys.path.insert(0, {tests!r})
from test_bfloat16_before_sm80 import KERNELS
artifact = tilelang.lower(KERNELS[{name!r}](), target={target!r})
tvm.get_global_func("target.build.llvm")(artifact.host_mod, tvm.target.Target({{"kind": "llvm"}}))
print("built")
"""


@pytest.mark.parametrize("name", ["add", "atomic_sum"])
def test_bfloat16_host_code_for_sm75_builds_with_llvm(name):
    # the host code's bfloat16 tensors are 16-bit words, as from sm_80: LLVM's host codegen
    # died on bfloat16 pointers (a segfault in every tvm_ffi compile of such a kernel, on any
    # GPU), so it builds in a child process here
    import os
    import subprocess
    import sys

    artifact = tilelang.lower(KERNELS[name](), target=SM75)
    assert 'handle("bfloat16"' not in artifact.host_mod.script()
    code = HOST_BUILD.format(tests=os.path.dirname(__file__), name=name, target=SM75)
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "built" in proc.stdout, (proc.returncode, proc.stderr[-2000:])
