"""Property test of the CUDA GEMM lowering: upstream-style tile GEMMs (tilelang.testing.kernels
.tile_gemm) with hypothesis-drawn arch (sm_80 / sm_90), operand type, transposes, block
tile, k step, pipeline stages, threads, rasterization, a relu epilogue and sizes with edge
tiles, lowered for CUDA and run by the lowered-IR emulator (test_lowered_emulation.py).
Each must give numpy's product exactly (small-integer operands: every product and sum is
exact in the accumulator, TF32 included) or be refused at compile time with a
LanguageError / CompileError; never a wrong result, never another exception. Whichever
instructions the lowering picks (mma.sync, wgmma, ldmatrix, cp.async, TMA, SIMT loops),
the emulator runs what the IR says; a kernel the emulator cannot run (``EmulationError``)
is counted and skipped.

Profiles as test_fuzz_arguments.py (TILELANG_FUZZ_PROFILE): ``ci`` draws 12 kernels, a
fixed sequence; ``nightly`` 80.
"""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
import tilelang
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from lowered_emulator import EmulationError
from lowered_instructions import lowered_kernel
from test_lowered_emulation import small_ints
from tilelang.errors import CompileError, LanguageError
from tilelang.testing.kernels import tile_gemm

PROFILE = os.environ.get("TILELANG_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "nightly"):
    raise ValueError(f"TILELANG_FUZZ_PROFILE={PROFILE!r}: use 'ci' or 'nightly'")
TALLY: collections.Counter[str] = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if TALLY:
        print("\nlowered GEMM fuzz:", dict(sorted(TALLY.items())))


@st.composite
def gemms(draw):
    arch = draw(st.sampled_from(["sm_80", "sm_90"]))
    dtype = draw(st.sampled_from(["float16", "bfloat16", "float32", "int8"]
                                 + (["float8_e4m3fn"] if arch == "sm_90" else [])))
    # (weighted toward what wgmma and the K-major 8-bit and TF32 paths take: 64-row multiples, A and
    # B K-major, pipelines)
    bm, bn = draw(st.sampled_from([16, 32, 64, 128, 128])), draw(st.sampled_from([16, 32, 64, 128, 256]))
    bk = draw(st.sampled_from([8, 16, 32, 64]))
    edge = draw(st.booleans())
    m = bm * draw(st.integers(1, 2)) + (draw(st.sampled_from([3, 8, 17])) if edge else 0)
    n = bn * draw(st.integers(1, 2)) + (draw(st.sampled_from([5, 16])) if edge else 0)
    k = bk * draw(st.integers(1, 3)) + (draw(st.sampled_from([1, 8])) if edge else 0)
    return {"arch": arch, "dtype": dtype, "m": m, "n": n, "k": k, "bm": bm, "bn": bn, "bk": bk,
            "trans_a": draw(st.sampled_from([False, False, True])), "trans_b": draw(st.sampled_from([True, True, False])),
            "stages": draw(st.sampled_from([0, 1, 2, 3, 3, 4])), "threads": draw(st.sampled_from([64, 128, 128, 256])),
            "panel": draw(st.sampled_from([0, 4])), "relu": draw(st.booleans()) and dtype != "int8"}


def operands(rng, case) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A, B as the kernel takes them, their values in float64)."""
    dtype, m, n, k = case["dtype"], case["m"], case["n"], case["k"]
    shape_a = (k, m) if case["trans_a"] else (m, k)
    shape_b = (n, k) if case["trans_b"] else (k, n)
    if dtype == "int8":
        a_values, b_values = rng.integers(-8, 8, shape_a), rng.integers(-8, 8, shape_b)
        return a_values.astype(np.int8), b_values.astype(np.int8), a_values, b_values
    if dtype.startswith("float8"):
        from test_lowered_gemm_forms import fp8_ints

        (a, a_values), (b, b_values) = fp8_ints(rng, shape_a, dtype), fp8_ints(rng, shape_b, dtype)
        return a, b, a_values, b_values
    (a, a_values), (b, b_values) = small_ints(rng, shape_a, dtype), small_ints(rng, shape_b, dtype)
    return a, b, a_values, b_values


@settings(deadline=None, database=None, derandomize=PROFILE == "ci", print_blob=True,
          max_examples={"ci": 12, "nightly": 80}[PROFILE], phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(case=gemms(), seed=st.integers(0, 2 ** 32 - 1))
@example(case={"arch": "sm_90", "dtype": "float16", "m": 136, "n": 200, "k": 72, "bm": 128, "bn": 128, "bk": 32,
               "trans_a": True, "trans_b": False, "stages": 3, "threads": 256, "panel": 4, "relu": True}, seed=1)
@example(case={"arch": "sm_90", "dtype": "float32", "m": 131, "n": 80, "k": 40, "bm": 64, "bn": 64, "bk": 16,
               "trans_a": False, "trans_b": True, "stages": 2, "threads": 128, "panel": 0, "relu": False}, seed=2)
def test_a_lowered_gemm_equals_numpy_or_is_refused(case, seed) -> None:
    accum = "int32" if case["dtype"] == "int8" else "float32"
    try:
        func = tile_gemm(case["m"], case["n"], case["k"], case["bm"], case["bn"], case["bk"], case["trans_a"],
                         case["trans_b"], dtype=case["dtype"], stages=case["stages"], relu=case["relu"],
                         threads=case["threads"], panel=case["panel"], accum_dtype=accum)
        device_mod = tilelang.lower(func, target={"kind": "cuda", "arch": case["arch"]}, out_idx=[-1]).device_mod
    except (LanguageError, CompileError):
        TALLY["refused"] += 1
        return
    a, b, a_values, b_values = operands(np.random.default_rng(seed), case)
    c = np.full((case["m"], case["n"]), -7 if accum == "int32" else np.nan, accum)
    kernel = lowered_kernel(device_mod)
    try:
        kernel(a, b, c)
    except EmulationError:
        TALLY["not emulated"] += 1
        return
    expected = (a_values.T if case["trans_a"] else a_values) @ (b_values.T if case["trans_b"] else b_values)
    if case["relu"]:
        expected = np.maximum(expected, 0)
    path = "wgmma" if any("wgmma_m64" in name for name in kernel.calls) else \
        "mma.sync" if any(name.startswith("tl_mma_") for name in kernel.calls) else "simt"
    TALLY[f"{case['dtype']} on {path}"] += 1
    np.testing.assert_array_equal(c.astype(np.float64), expected.astype(np.float64), err_msg=str(case))
