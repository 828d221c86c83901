"""T.gemm_sp (language/gemm_sp.py), upstream's 2:4 sparse GEMM, on the CPU against numpy:
the four operand forms, both transposes, 16- and 32-bit types with 8-, 16- and 32-bit
metadata; the format against the kit's independent compressor; errors for bad operands.

Tolerances: the inputs are exact in their dtype and every product is summed in float32, so
against numpy's float64 product the error is a few float32 ulps of the sums (K <= 128,
standard-normal values): rtol = atol = 1e-4. A misread metadata chunk moves or drops a
whole product term (an error of order one), and the all-kept-values check below fails
by construction if a value is dropped.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.testing.sparse import compress, semi_sparse, sparse_gemm


def typed(x: np.ndarray, dtype: str):
    """``x`` as the kernel takes it: a numpy array of ``dtype``, or a torch tensor for
    bfloat16 (numpy's, from ml_dtypes, has no DLPack form)."""
    if dtype != "bfloat16":
        return x.astype(dtype)
    torch = pytest.importorskip("torch")
    return torch.from_numpy(x.astype(np.float32)).bfloat16()


def exact(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype``'s values, as float32."""
    t = typed(x, dtype)
    return (t.float().numpy() if dtype == "bfloat16" else t.astype(np.float32))


def run(M: int, N: int, K: int, dtype: str = "float16", meta: str = "int16", trans_a: bool = False,
        trans_b: bool = False, seed: int = 0, **kw) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dense = exact(semi_sparse(rng, M, K, dtype), dtype)
    b = exact(rng.standard_normal((N, K) if trans_b else (K, N)), dtype)
    a_sparse, e = compress(dense, dtype, meta)
    if trans_a:
        a_sparse, e = np.ascontiguousarray(a_sparse.T), np.ascontiguousarray(e.T)
    kernel = tilelang.compile(sparse_gemm(M, N, K, trans_a=trans_a, trans_b=trans_b, dtype=dtype, meta=meta, **kw),
                              out_idx=[3], target="cpu")
    got = np.asarray(kernel(typed(a_sparse, dtype), e, typed(b, dtype)))
    return got, dense.astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)


@pytest.mark.parametrize(("trans_a", "trans_b", "a_frag", "b_frag"), [
    (False, False, False, False), (False, True, False, False), (True, False, False, False),
    (True, True, True, False), (False, True, False, True), (False, False, True, True),
], ids=["ss-nn", "ss-nt", "ss-tn", "rs-tt", "sr-nt", "rr-nn"])
def test_gemm_sp_equals_the_dense_product(trans_a, trans_b, a_frag, b_frag):
    got, want = run(64, 64, 64, trans_a=trans_a, trans_b=trans_b, bM=32, bN=32, bK=32, a_frag=a_frag,
                    b_frag=b_frag)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("dtype", "meta", "bK"), [("float32", "int16", 32), ("float16", "int8", 32),
                                                   ("float16", "int32", 32), ("bfloat16", "int16", 32)])
def test_gemm_sp_types_and_metadata_widths(dtype, meta, bK):
    got, want = run(32, 32, 64, dtype=dtype, meta=meta, bM=32, bN=32, bK=bK)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_kits_compressor_keeps_every_value_and_packs_lowest_group_first():
    rng = np.random.default_rng(1)
    dense = semi_sparse(rng, 8, 32, "float16")
    sparse, e = compress(dense, "float16", "int16")
    assert sorted(sparse[sparse != 0].tolist()) == sorted(dense[dense != 0].tolist())
    row = np.zeros((1, 16), np.float32)
    row[0, [1, 3, 4, 6, 8, 9, 14, 15]] = [1, 2, 3, 4, 5, 6, 7, 8]
    sparse, e = compress(row, "float16", "int16")
    # groups (1, 3), (0, 2), (0, 1), (2, 3): chunks 0b1101, 0b1000, 0b0100, 0b1110
    assert int(e[0, 0]) & 0xFFFF == 0xE48D and sparse.tolist() == [[1, 2, 3, 4, 5, 6, 7, 8]]
    # 32-bit: one of two kept, positions in 16-bit halves (0b0100: the first, 0b1110: the second)
    sparse, e = compress(np.array([[0, 5, 6, 0, 0, 0, 0, 7]], np.float32), "float32", "int16")
    assert int(e[0, 0]) & 0xFFFF == 0xE44E and sparse.tolist() == [[5, 6, 0, 7]]


def sparse_kernel(a_shape, e_shape, e_dtype="int16", a_dtype="float16"):
    @T.prim_func
    def bad(A: T.Tensor((64, 32), a_dtype), E: T.Tensor((64, 4), e_dtype), B: T.Tensor((64, 64), a_dtype),
            C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared(a_shape, a_dtype)
            E_s = T.alloc_shared(e_shape, e_dtype)
            B_s = T.alloc_shared((64, 64), a_dtype)
            C_f = T.alloc_fragment((64, 64), "float32")
            T.gemm_sp(A_s, E_s, B_s, C_f)

    return bad


@pytest.mark.parametrize(("a_shape", "e_shape", "e_dtype", "a_dtype", "message"), [
    ((64, 64), (64, 4), "int16", "float16",
     r"T.gemm_sp: A_sparse A_s has shape \[64, 64\], expected \[64, 32\] \(half of B's K\)"),
    ((64, 32), (64, 8), "int16", "float16",
     r"T.gemm_sp: E E_s has shape \[64, 8\], expected \[64, 4\] \(one int16 element per 16 elements of K\)"),
    ((64, 32), (64, 4), "float16", "float16",
     "T.gemm_sp: the metadata E must be an 8-, 16- or 32-bit integer tensor, got float16"),
    ((64, 32), (64, 4), "int16", "float64",
     r"T.gemm_sp: A of float64 has no 2:4 sparse form \(8-, 16- or 32-bit types have one\)"),
])
def test_bad_operands_are_refused_at_the_users_line(a_shape, e_shape, e_dtype, a_dtype, message):
    with pytest.raises(tilelang.LanguageError, match=message) as info:
        sparse_kernel(a_shape, e_shape, e_dtype, a_dtype)
    assert "T.gemm_sp(A_s, E_s, B_s, C_f)" in str(info.value)  # the user's source line


def test_upstream_names_of_the_format():
    torch = pytest.importorskip("torch")
    from tilelang.language.dtypes import _TORCH_DTYPE_TO_STR, dtype
    from tilelang.plugin import sparse_e_factor, sparse_group

    assert dtype(_TORCH_DTYPE_TO_STR[torch.bfloat16]) == T.bfloat16 and _TORCH_DTYPE_TO_STR[torch.int8] == "int8"
    assert torch.float8_e5m2 in _TORCH_DTYPE_TO_STR and "float16" not in _TORCH_DTYPE_TO_STR
    assert [sparse_group(t) for t in ("float32", "float16", "int8", "float8_e5m2")] == [(1, 2), (2, 4), (2, 4), (2, 4)]
    assert [sparse_e_factor(a, m) for a, m in (("float16", "int16"), ("int8", "int32"), ("float32", "int16"),
                                               ("float16", "int8"))] == [16, 32, 8, 8]
