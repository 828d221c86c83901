"""Reads that leave a tensor, on the CUDA lowering: upstream's issue 2554 (a ``T.Ramp``
index whose lanes may be of either sign wraps each negative lane from the end of its axis)
and ``T.annotate_safe_value`` under a tile copy (the parts outside read the value). Checked
by the lowered-IR emulator against numpy and by nvcc; tilelang-core's tests run the same
kernels on the CPU."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tilelang
from test_lowered_emulation import SM90, lower, run
from tilelang.cuda import toolchain
from tilelang.testing.upstream_kernels import padded_tile_copy, ramp_of_either_sign


def test_a_ramp_of_either_sign_wraps_lane_by_lane_as_lowered_for_cuda():
    load, store = ramp_of_either_sign()
    b = np.zeros((4, 4), "float32")
    run(lower(load, SM90), np.arange(1024, dtype="float32"), b)
    np.testing.assert_array_equal(b, [[1022, 1023, 0, 1], [1023, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4]])
    rows, a = np.arange(16, dtype="float32").reshape(4, 4), np.zeros(1024, "float32")
    run(lower(store, SM90), rows, a)
    expected = np.full(1024, -1, "float32")
    for t in range(4):
        for lane in range(4):
            expected[(t - 2 + lane) % 1024] = rows[t, lane]
    np.testing.assert_array_equal(a, expected)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_ramp_of_either_sign_assembles():
    for name, kernel in zip(("load", "store"), ramp_of_either_sign()):
        source = tilelang.lower(kernel, target=SM90, out_idx=[1]).device_source
        assert toolchain._compile_nvcc(source, "sm_90", name)[:4] == b"\x7fELF"


@pytest.mark.parametrize("dst_dtype", ["float32", "float16"])
def test_a_tile_copy_under_a_safe_value_as_lowered_for_cuda(dst_dtype):
    # T.annotate_safe_value's tile copy is an element nest (core's safe_values.py): no TMA or
    # cp.async copy, whose outside parts would read zero, takes it over
    a = np.random.default_rng(3).standard_normal((100, 60)).astype("float32")
    b = np.zeros((128, 64), dst_dtype)
    run(lower(padded_tile_copy(-99, dst_dtype), SM90), a, b)
    want = np.full((128, 64), -99, dst_dtype)
    want[:100, :60] = a.astype(dst_dtype)
    np.testing.assert_array_equal(b, want)
