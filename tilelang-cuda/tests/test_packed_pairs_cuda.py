"""Upstream's packed pair ops (``T.add2`` ... ``T.abs2``) lowered for CUDA: the lowered-IR
emulator runs them against numpy (float32 pairs; float16 pairs as float16), and nvcc
assembles every op and pair type for sm_80 and sm_90. tilelang-core's test_packed_pairs
runs them on the CPU against torch."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from test_lowered_emulation import SM80, run
from tilelang.cuda import toolchain
from tilelang.testing.upstream_kernels import pair_kernel

M = 16
OPS = {
    "add2": (T.add2, 2, np.add),
    "sub2": (T.sub2, 2, np.subtract),
    "mul2": (T.mul2, 2, np.multiply),
    "max2": (T.max2, 2, np.fmax),
    "min2": (T.min2, 2, np.fmin),
    "abs2": (T.abs2, 1, np.abs),
    "fma2": (T.fma2, 3, lambda a, b, c: a * b + c),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_packed_pair_ops_as_lowered_for_cuda_equal_numpy(name, dtype):
    op, arity, reference = OPS[name]
    rng = np.random.default_rng(2)
    inputs = [rng.integers(-8, 9, M * 2).astype(dtype) for _ in range(arity)]  # exact in either type
    out = np.zeros(M * 2, dtype)
    run(tilelang.lower(pair_kernel(op, dtype, arity, M), target=SM80, out_idx=[arity]).device_mod, *inputs, out)
    np.testing.assert_array_equal(out, reference(*inputs))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_packed_pair_ops_assemble(dtype, arch):
    for name, (op, arity, _) in sorted(OPS.items()):
        source = tilelang.lower(pair_kernel(op, dtype, arity, M), target={"kind": "cuda", "arch": arch},
                                out_idx=[arity]).device_source
        assert toolchain._compile_nvcc(source, arch, f"{name}_{dtype}")[:4] == b"\x7fELF", name
