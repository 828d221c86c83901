"""Vectorized loops as CuTe vector copies (tilelang.cutedsl.vector_access): T.Parallel nests
that the CUDA passes partition into per-thread 16-byte vectors load and store through
``cute.autovec_copy`` of register tensors; loops whose offsets are not known to be aligned
stay scalar. The emulator runs the source as printed and checks every ``.align(n)`` claim
against the real addresses of the arrays."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import cute_emulator
import numpy as np
import pytest
import tilelang
import tilelang.language as T
from cute_kernels import tile_copy_scale
from tilelang.testing.kernels import elementwise_add

RNG = np.random.default_rng(3)


def body(kernel) -> str:
    return tilelang.lower(kernel, target="cutedsl").device_source.split("@cute.kernel", 1)[1]


@pytest.mark.parametrize(("dtype", "lanes"), [("float16", 8), ("float32", 4)])
def test_elementwise_loads_and_stores_16_bytes(dtype: str, lanes: int) -> None:
    src = body(elementwise_add(100, 256, dtype=dtype))  # 100 rows: the last block has edge rows
    assert src.count(".align(16), cute.make_layout(" + str(lanes) + ")") == 3  # A, B loaded; C stored
    assert "cute.autovec_copy(C_ptr_v" in src
    # the edge-row test (rows of 4 vectors per thread group, simplified) is made once per
    # vector, outside it
    assert src.index("k) < ") < src.index("cute.autovec_copy(")
    a, b = (RNG.standard_normal((100, 256)).astype(dtype) for _ in range(2))
    c = np.zeros((100, 256), dtype)
    cute_emulator.run(tilelang.lower(elementwise_add(100, 256, dtype=dtype), target="cutedsl").device_source, a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_tile_copies_vectorize_their_global_side() -> None:
    src = body(tile_copy_scale(256, 256))
    assert "cute.autovec_copy(cute.make_tensor((A_ptr.iterator + (" in src and ".align(16)" in src


def test_in_place_vectors_read_before_they_write() -> None:
    """y = a x + y on vectors: y's register is loaded, updated and stored back."""

    @T.prim_func
    def axpy(X: T.Tensor((1024,), "float32"), Y: T.Tensor((1024,), "float32"), a: T.float32):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(512):
                Y[bx * 512 + i] = a * X[bx * 512 + i] + Y[bx * 512 + i]

    source = tilelang.lower(axpy, target="cutedsl").device_source
    assert source.count("cute.autovec_copy(") == 3  # X in, Y in, Y out
    assert len(set(re.findall(r"Y_ptr_v\d+", source))) == 1  # one register for Y
    x, y = RNG.standard_normal(1024).astype("float32"), RNG.standard_normal(1024).astype("float32")
    want = np.float32(1.5) * x + y
    cute_emulator.run(source, x, y, 1.5)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_unaligned_vectors_stay_scalar() -> None:
    @T.prim_func
    def shifted(A: T.Tensor((132,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            for i in T.vectorized(4):
                B[tx * 4 + i] = A[tx * 4 + i + 1] * 2.0

    source = tilelang.lower(shifted, target="cutedsl").device_source
    assert "autovec_copy" not in source
    a, b = RNG.standard_normal(132).astype("float32"), np.zeros(128, "float32")
    cute_emulator.run(source, a, b)
    np.testing.assert_array_equal(b, a[1:129] * 2)


def test_the_emulator_checks_alignment_claims() -> None:
    """A claim the addresses do not hold must fail the run (or the tests above prove nothing)."""
    source = tilelang.lower(elementwise_add(32, 64), target="cutedsl").device_source
    a = np.zeros(32 * 64 + 1, "float32")[1:].reshape(32, 64)  # 4 bytes past an aligned start
    with pytest.raises(AssertionError, match="is not 16-byte aligned"):
        cute_emulator.run(source, a, a.copy(), a.copy())


@pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="NVIDIA CuTe DSL is not installed")
def test_ptx_has_128_bit_global_accesses(tmp_path) -> None:
    (tmp_path / "kernel_cute.py").write_text(
        tilelang.lower(elementwise_add(100, 256, dtype="float16"), target="cutedsl").device_source)
    script = textwrap.dedent(f"""
        import cuda.bindings.driver as cuda, cutlass
        from cutlass import cute
        from cutlass.cute.runtime import make_ptr
        from tilelang.cutedsl.execution_backend import import_source
        module = import_source(__import__("pathlib").Path({str(tmp_path / "kernel_cute.py")!r}), "ew")
        ptrs = [make_ptr(cutlass.Float16, 1 << 20, cute.AddressSpace.gmem, assumed_align=16) for _ in range(3)]
        print(cute.compile(module.launch, *ptrs, cuda.CUstream(0)).artifacts.PTX)
    """)
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(tmp_path),
               CUTE_DSL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    loads, stores = done.stdout.count("ld.global.v4.b32"), done.stdout.count("st.global.v4.b32")
    assert stores > 0 and loads == 2 * stores  # two operands in, one result out, per vector
    assert "ld.global.b16" not in done.stdout and "ld.global.u16" not in done.stdout
