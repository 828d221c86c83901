"""Upstream's packed pair ops (``T.add2`` ... ``T.abs2``) lowered for CUDA: the lowered-IR
emulator runs them against numpy (float32 pairs; float16 pairs as float16), and nvcc
assembles every op and pair type for sm_80 and sm_90. tilelang-core's test_packed_pairs
runs them on the CPU against torch."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tilelang
from test_lowered_emulation import SM80, run
from tilelang.cuda import toolchain
from tilelang.testing.upstream_kernels import PAIR_OPS, pair_kernel

M = 16
REFERENCE = {"add2": np.add, "sub2": np.subtract, "mul2": np.multiply, "max2": np.fmax, "min2": np.fmin,
             "abs2": np.abs, "fma2": lambda a, b, c: a * b + c}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(PAIR_OPS))
def test_packed_pair_ops_as_lowered_for_cuda_equal_numpy(name, dtype):
    arity, reference = PAIR_OPS[name], REFERENCE[name]
    rng = np.random.default_rng(2)
    inputs = [rng.integers(-8, 9, M * 2).astype(dtype) for _ in range(arity)]  # exact in either type
    out = np.zeros(M * 2, dtype)
    run(tilelang.lower(pair_kernel(name, dtype, M), target=SM80, out_idx=[arity]).device_mod, *inputs, out)
    np.testing.assert_array_equal(out, reference(*inputs))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_packed_pair_ops_assemble(dtype, arch):
    for name, arity in sorted(PAIR_OPS.items()):
        source = tilelang.lower(pair_kernel(name, dtype, M), target={"kind": "cuda", "arch": arch},
                                out_idx=[arity]).device_source
        assert toolchain._compile_nvcc(source, arch, f"{name}_{dtype}")[:4] == b"\x7fELF", name
