"""The MFMA GEMM helper (hip_mfma.h) run on the host: each lane of a wavefront is a thread,
and v_mfma_f32_16x16x16{f16,bf16_1k} is emulated from AMD's operand layout
(emulation/mfma_host.cpp). No AMD GPU ran this; it checks the helper's indexing (tiles
per wavefront, transposes, strides, clear) against the ISA's layout, with exact results."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tilelang.rocm import codegen

HARNESS = Path(__file__).with_name("emulation") / "mfma_host.cpp"
CASES = ("f16_nn_accumulate", "f16_tn_clear_padded", "bf16_nt_three_waves", "bf16_tt_long_k")


def clang() -> str | None:
    """A clang++ with _Float16 and ext_vector_type on the host (hipcc's packages bring one)."""
    versioned = sorted(Path("/usr/lib").glob("llvm-*/bin/clang++"), reverse=True,
                       key=lambda p: int(p.parts[-3].split("-")[1]) if p.parts[-3].split("-")[1].isdigit() else 0)
    for candidate in ("/opt/rocm/llvm/bin/clang++", *map(str, versioned)):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("clang++")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> str:
    compiler = clang()
    if compiler is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("no clang++ in CI: the nox tests session installs hipcc, which brings LLVM's clang")
        pytest.skip("no clang++ here (apt-get install hipcc brings one); CI runs this test")
    binary = tmp_path_factory.mktemp("mfma") / "mfma_host"
    subprocess.run([compiler, "-std=c++17", "-O1", "-pthread", f"-I{codegen.MFMA_HEADER.parent}", str(HARNESS),
                    "-o", str(binary)], check=True, capture_output=True, text=True)
    return subprocess.run([str(binary)], check=True, capture_output=True, text=True, timeout=120).stdout


@pytest.mark.parametrize("case", CASES)
def test_mfma_gemm_helper_computes_the_product(emulator, case):
    results = dict(line.split() for line in emulator.splitlines())
    assert results[case] == "0", f"{case}: largest difference from the reference product {results[case]}"


def test_the_helper_is_what_kernels_get():
    assert codegen.MFMA_HEADER.read_text() in codegen.hip_source("")
