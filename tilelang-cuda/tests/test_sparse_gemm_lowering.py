"""T.gemm_sp on CUDA: the dense tile it expands to, lowered for sm_80 and sm_90 and run by
the lowered-IR emulator (mma.sync / wgmma, ldmatrix and all) against numpy, in the four
operand forms of upstream's test_tilelang_tilelibrary_gemm_sp.py; nvcc compiles the source;
upstream's ``tilelang.cuda.intrinsics.sparse_layout`` names the format.

Tolerances as tilelang-core/tests/test_gemm_sp.py: exact inputs, float32 sums (int32 for
int8, exact), rtol = atol = 1e-4 against the float64 product.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
from lowered_emulator import bf16_bits
from lowered_instructions import lowered_kernel, tf32_values
from tilelang.cuda import toolchain
from tilelang.testing.sparse import compress, semi_sparse, sparse_gemm


def bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` (float32 values exact in ``dtype``) as the emulator holds ``dtype``: bfloat16 and
    fp8 as their bits."""
    if dtype == "bfloat16":
        return bf16_bits(x.astype(np.float32))
    if dtype.startswith("float8"):
        torch = pytest.importorskip("torch")
        return torch.from_numpy(x.astype(np.float32)).to(getattr(torch, dtype)).view(torch.uint8).numpy()
    return x.astype(dtype)


def exact(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype``'s values, as float32 (float32 to TF32's, which its K-major
    GEMMs take on tensor cores)."""
    if dtype == "float32":
        return tf32_values(x.astype(np.float32).view(np.uint32)).astype(np.float32)
    if dtype == "bfloat16" or dtype.startswith("float8"):
        torch = pytest.importorskip("torch")
        return torch.from_numpy(x.astype(np.float32)).to(getattr(torch, dtype)).float().numpy()
    return x.astype(dtype).astype(np.float32)


def emulate(arch: str, M: int, N: int, K: int, dtype: str = "float16", meta: str = "int16", accum: str = "float32",
            trans_a: bool = False, trans_b: bool = False, **kw) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    dense = exact(semi_sparse(rng, M, K, dtype), dtype)
    b = rng.integers(-3, 4, (N, K) if trans_b else (K, N)) if "int" in dtype else rng.standard_normal(
        (N, K) if trans_b else (K, N))
    b = exact(b, dtype)
    a_sparse, e = compress(dense, dtype, meta)
    if trans_a:
        a_sparse, e = np.ascontiguousarray(a_sparse.T), np.ascontiguousarray(e.T)
    func = sparse_gemm(M, N, K, trans_a=trans_a, trans_b=trans_b, dtype=dtype, meta=meta, accum=accum, **kw)
    c = np.zeros((M, N), accum)
    lowered_kernel(tilelang.lower(func, target={"kind": "cuda", "arch": arch}).device_mod)(
        bits(a_sparse, dtype), e, bits(b, dtype), c)
    return c, dense.astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)


FORMS = [  # upstream's ss / rs / sr / rr forms, with both transposes
    {"trans_b": True}, {}, {"trans_a": True}, {"trans_a": True, "trans_b": True, "a_frag": True},
    {"trans_b": True, "b_frag": True}, {"a_frag": True, "b_frag": True},
]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("form", FORMS, ids=["ss-nt", "ss-nn", "ss-tn", "rs-tt", "sr-nt", "rr-nn"])
def test_gemm_sp_as_lowered_equals_the_dense_product(arch, form):
    got, want = emulate(arch, 128, 128, 64, bM=64, bN=64, bK=32, **form)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("dtype", "meta", "accum", "bK", "arch"), [
    ("int8", "int32", "int32", 64, "sm_80"), ("int8", "int16", "int32", 64, "sm_90"),
    ("bfloat16", "int8", "float32", 32, "sm_90"), ("float32", "int16", "float32", 32, "sm_80"),
    ("float8_e5m2", "int32", "float32", 64, "sm_90"), ("float8_e4m3fn", "int16", "float32", 64, "sm_90"),
])
def test_gemm_sp_types(dtype, meta, accum, bK, arch):
    got, want = emulate(arch, 64, 64, 128, dtype=dtype, meta=meta, accum=accum, trans_b=True, bM=64, bN=64, bK=bK)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("dtype", "meta", "arch"), [("float16", "int16", "sm_90"), ("float8_e4m3fn", "int32", "sm_90"),
                                                    ("bfloat16", "int16", "sm_80")])
def test_nvcc_compiles_gemm_sp(dtype, meta, arch):
    """The dense tile is written by the block's threads, not staged by the pipeline, so
    the GEMM is mma.sync on sm_90 too (wgmma reads only tiles its pipeline or copies fill)."""
    if toolchain.nvcc_path() is None:
        pytest.skip("nvcc is not installed")
    source = tilelang.lower(sparse_gemm(256, 256, 128, 128, 128, 64, trans_b=True, dtype=dtype, meta=meta),
                            target={"kind": "cuda", "arch": arch}).device_source
    assert "tl_mma_" in source[source.index('extern "C" __global__'):]
    assert toolchain._compile_nvcc(source, arch + "a" if arch == "sm_90" else arch, "gemm_sp")[:4] == b"\x7fELF"


def test_upstreams_sparse_layout_module():
    import tilelang.language as T
    from tilelang.cuda.intrinsics.sparse_layout import (
        GROUP_CONFIG,
        get_e_factor,
        get_e_replicate_factor,
    )

    assert GROUP_CONFIG[T.float16] == (2, 4) and GROUP_CONFIG[T.dtype("float32")] == (1, 2)
    assert GROUP_CONFIG[T.dtype("float8_e4m3")] == (2, 4)  # upstream's name of e4m3fn
    assert get_e_factor(T.float16, T.int16) == 16 and get_e_factor(T.int8, T.int32) == 32
    assert [get_e_replicate_factor(t) for t in (T.float16, T.int8)] == [2, 1]


@pytest.mark.gpu
@pytest.mark.parametrize("form", [{"trans_b": True}, {"trans_a": True, "a_frag": True}], ids=["ss-nt", "rs-tn"])
def test_gemm_sp_on_the_gpu(form):
    torch = pytest.importorskip("torch")
    M, N, K = 256, 256, 256
    rng = np.random.default_rng(5)
    dense = exact(semi_sparse(rng, M, K), "float16")
    b = exact(rng.standard_normal((N, K) if form.get("trans_b") else (K, N)), "float16")
    a_sparse, e = compress(dense, "float16", "int16")
    if form.get("trans_a"):
        a_sparse, e = np.ascontiguousarray(a_sparse.T), np.ascontiguousarray(e.T)
    kernel = tilelang.compile(sparse_gemm(M, N, K, 128, 128, 64, **form), out_idx=[3], target="cuda")
    c = kernel(*(torch.from_numpy(x).cuda() for x in (a_sparse.astype(np.float16), e, b.astype(np.float16))))
    want = dense.astype(np.float64) @ (b.T if form.get("trans_b") else b).astype(np.float64)
    np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-4, atol=1e-4)
