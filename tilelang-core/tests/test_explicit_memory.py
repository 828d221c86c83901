"""Upstream's raw-word loads and stores (T.ldg*/T.stg* global, T.lds*/T.sts* shared,
T.__ldg), against numpy on the CPU; language/explicit_memory.py says how they lower."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

N = 128


@T.prim_func
def words(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32), Z: T.Tensor((N,), T.float32),
          W: T.Tensor((N,), T.float32)):
    with T.Kernel(N // 4, threads=1) as pid:
        S = T.alloc_shared((N,), T.float32)
        Y[pid * 4 : pid * 4 + 4] = T.reinterpret(T.ldg128(X[pid * 4 : pid * 4 + 4]), T.float32x4)
        T.sts64(S[pid * 2 : pid * 2 + 2], T.ldg64(X[pid * 2 : pid * 2 + 2]))
        T.stg64(Z[pid * 2 : pid * 2 + 2], T.lds64(S[pid * 2 : pid * 2 + 2]))
        W[pid] = T.reinterpret(T.ldg32(X[pid], pred=pid < 16), T.float32) + T.__ldg(X[pid])
        T.stg32(W[pid + 64], T.ldg32(X[pid]), pred=pid < 8)


def expected_words(x):
    y = x.copy()
    z = np.zeros(N, np.float32)
    z[:64] = x[:64]
    w = np.zeros(N, np.float32)
    w[:32] = np.where(np.arange(32) < 16, x[:32], 0) + x[:32]
    w[64:72] = x[:8]
    return y, z, w


def test_words_move_bits_unchanged():
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    y, z, w = (np.zeros(N, np.float32) for _ in range(3))
    tilelang.compile(words, target="cpu")(x, y, z, w)
    for got, want in zip((y, z, w), expected_words(x)):
        np.testing.assert_array_equal(got, want)


def test_the_c_target_refuses_vectors_with_the_statement():
    """TVM's C code generator has no vector types: it printed `int32_t4`, which the C
    compiler of the cython launcher refused."""
    with pytest.raises(LanguageError, match=r"kernel 'words': this statement computes a vector .* the C target has "
                                            r"no vector types; compile with target='cpu'(.|\n)*Y\[pid \* 4"):
        tilelang.compile(words, target="c", execution_backend="cython")


def test_a_width_that_is_not_whole_elements_is_refused():
    with pytest.raises(LanguageError, match=r"T.ldg32: 32 bits are not a whole number of float64 elements"):
        @T.prim_func
        def bad(X: T.Tensor((8,), T.float64), Y: T.Tensor((8,), T.float64)):
            with T.Kernel(1, threads=1):
                Y[0] = T.reinterpret(T.ldg32(X[0]), T.float32)


def test_a_slice_of_the_wrong_length_is_refused():
    with pytest.raises(LanguageError, match=r"T.ldg128: 'X' gives a tile of \[2\]; a 4-wide 128-bit access takes "
                                            r"4 consecutive elements of the last axis"):
        @T.prim_func
        def bad(X: T.Tensor((8,), T.float32), Y: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                Y[0:4] = T.reinterpret(T.ldg128(X[0:2]), T.float32x4)


def test_a_store_needs_a_value_of_its_width():
    with pytest.raises(LanguageError, match=r"T.stg64: the value must be 64 bits \(uint32x2, e.g. from T.ldg64\)"):
        @T.prim_func
        def bad(X: T.Tensor((8,), T.float32), Y: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                T.stg64(Y[0:2], T.ldg32(X[0]))
