"""T.assume in CUDA kernels: CUDA's code generator does not know TVM's assume call (it
failed with "Unresolved call tirx.assume"); the promise over parameters is a host check."""

from __future__ import annotations

import tilelang
import tilelang.language as T
from tilelang.cuda import toolchain

N = T.dynamic("N")


@T.prim_func
def clear_range(A: T.Tensor((N,), T.float32), lo: T.int32, hi: T.int32):
    with T.Kernel(1, threads=32):
        T.assume(N % 4 == 0)
        for i in T.serial(hi - lo + 1):
            T.assume(lo + i >= 0 and lo + i < N)
            A[lo + i] = 0


def test_assumptions_compile_and_the_parameter_one_is_a_host_check():
    artifact = tilelang.lower(clear_range, target={"kind": "cuda", "arch": "sm_90"})
    source = artifact.device_source
    assert "assume" not in source
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "assume")[:4] == b"\x7fELF"
    host = str(artifact.host_mod)
    assert host.count('"Assume: N % 4 == 0"') == 1
    assert "Assume: lo" not in host  # over a loop index: not checked


def test_an_assumed_index_needs_no_guard_and_the_source_has_no_if():
    """Upstream's test_tilelang_language_assume.py looks for no ``if (`` in the whole source:
    the guard of ``A[lo + i]`` goes (the assume says it is inside), and TVM's unused L2
    prefetch ``#if`` for its own cp.async is dropped from the prelude."""
    source = tilelang.lower(clear_range, target={"kind": "cuda", "arch": "sm_90"}).device_source
    assert "if (" not in source and "TVM_ENABLE_L2_PREFETCH" not in source
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "assumed")[:4] == b"\x7fELF"
