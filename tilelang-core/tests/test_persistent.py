"""T.Persistent (upstream TileLang's persistent tile loop, language/persistent.py) on the CPU
backend: the persistent GEMM of upstream's examples/gemm/example_gemm_persistent.py in both
of its spellings (T.Persistent, and the hand-written wave loop with its guard) against
numpy, a persistent elementwise kernel, the tile order against a Python model of upstream's
rasterization, and the errors for bad arguments.

Tolerances: float32 products summed in float32 over K <= 64 terms of [0, 1) values stay
within 1e-5 of the float64 product; a lost or doubled tile is off by ~K/4.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError, LanguageTypeError

rng = np.random.default_rng(14)


@tilelang.jit
def matmul_persistent(A, B, block_M, block_N, block_K, sm_num, use_persistent_primitive=True, group_size=8):
    """Upstream's kernel (fp32 here: the CPU), with the SM count as an argument."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float32)
    B: T.Tensor((K, N), T.float32)
    C = T.empty((M, N), T.float32)
    m_blocks = T.ceildiv(M, block_M)
    n_blocks = T.ceildiv(N, block_N)
    waves = T.ceildiv(m_blocks * n_blocks, sm_num)
    with T.Kernel(sm_num, threads=128) as (block_id):
        A_shared = T.alloc_shared((block_M, block_K), T.float32)
        B_shared = T.alloc_shared((block_K, block_N), T.float32)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        C_shared = T.alloc_shared((block_M, block_N), T.float32)
        if use_persistent_primitive:
            for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id,
                                       group_size):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[bx * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, by * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[bx * block_M, by * block_N])
        else:
            for w in T.serial(waves):
                tile_id = sm_num * w + block_id
                bx = (tile_id // group_size) % m_blocks
                by = (tile_id % group_size) + (tile_id // group_size) // m_blocks * group_size
                if bx * block_M < M and by * block_N < N:
                    T.clear(C_local)
                    for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                        T.copy(A[bx * block_M, k * block_K], A_shared)
                        T.copy(B[k * block_K, by * block_N], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
                    T.copy(C_local, C_shared)
                    T.copy(C_shared, C[bx * block_M, by * block_N])
    return C


@pytest.mark.parametrize("M,N,K,sm_num,group_size", [
    (64, 64, 32, 4, 8),     # 4 x 4 tiles, 4 waves of 4 blocks
    (70, 50, 40, 3, 2),     # tail tiles in M, N and K; the last wave part-full
    (100, 90, 48, 5, 4),    # 6 tile columns in groups of 4: padding inside the order
    (40, 120, 16, 7, None),  # no grouping
])
def test_persistent_gemm_matches_numpy(M, N, K, sm_num, group_size):
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    c = matmul_persistent(a, b, 16, 16, 16, sm_num, group_size=group_size)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_upstream_hand_written_wave_loop_matches_numpy():
    # the example's other spelling; its wave count covers every tile when the tile columns
    # are a multiple of the group (upstream's formula has no padding term)
    a = rng.random((70, 40), dtype=np.float32)
    b = rng.random((40, 64), dtype=np.float32)
    c = matmul_persistent(a, b, 16, 16, 16, 3, use_persistent_primitive=False, group_size=2)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def upstream_order(domain: list[int], wave: int, group: int) -> dict[tuple[int, ...], int]:
    """Tile -> the block that handles it, from upstream's definition (tilelang/src/ir.cc
    PersistentFor): tile t of the grouped domain (groups, d0, ..., d[n-2], group) decoded
    last-fastest; the last coordinate is group * g + position; t runs over whole waves."""
    group = max(1, min(group, domain[-1]))
    grouped = [-(-domain[-1] // group), *domain[:-1], group]
    padded = int(np.prod(grouped))
    owner = {}
    for t in range(-(-padded // wave) * wave):
        rest, coords = t, [0] * len(grouped)
        for i in range(len(grouped) - 1, 0, -1):
            coords[i], rest = rest % grouped[i], rest // grouped[i]
        coords[0] = rest
        tile = (*coords[1:-1], coords[0] * group + coords[-1])
        if tile[-1] < domain[-1]:
            assert tile not in owner
            owner[tile] = t % wave
    return owner


def visits_kernel(d0: int, d1: int, d2: int, wave: int, group: int):
    @T.prim_func
    def visits(Count: T.Tensor((d0, d1, d2), "int32"), Owner: T.Tensor((d0, d1, d2), "int32")):
        with T.Kernel(wave, threads=1) as block:
            for i, j, k in T.Persistent([d0, d1, d2], wave, block, group_size=group):
                Count[i, j, k] = Count[i, j, k] + 1
                Owner[i, j, k] = block

    return visits


@pytest.mark.parametrize("d0,d1,d2,wave,group", [(3, 4, 5, 4, 2), (2, 3, 7, 5, 8), (1, 1, 9, 2, 4)])
def test_every_tile_once_in_upstream_order(d0, d1, d2, wave, group):
    kernel = tilelang.compile(visits_kernel(d0, d1, d2, wave, group), target="cpu")
    count = np.zeros((d0, d1, d2), "int32")
    owner = np.full((d0, d1, d2), -1, "int32")
    kernel(count, owner)
    assert (count == 1).all()
    expected = np.full_like(owner, -1)
    for tile, block in upstream_order([d0, d1, d2], wave, group).items():
        expected[tile] = block
    np.testing.assert_array_equal(owner, expected)


@tilelang.jit
def persistent_scale(X, block, sm_num, factor: float = 2.0):
    """An elementwise kernel over 1-D tiles, one tile per wave and block."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    with T.Kernel(sm_num, threads=32) as bid:
        for (t,) in T.Persistent([T.ceildiv(N, block)], sm_num, bid):
            for i in T.Parallel(block):
                if t * block + i < N:
                    Y[t * block + i] = X[t * block + i] * factor + 1.0
    return Y


def test_persistent_elementwise_matches_numpy():
    x = rng.random(1000, dtype=np.float32)
    np.testing.assert_allclose(persistent_scale(x, 64, 3), x * 2 + 1, rtol=1e-6)


def test_the_wave_loop_guards_tiles_past_the_end():
    # 7 columns in groups of 4 over 3 blocks: 2 groups x 4 = 8 padded tiles, 3 waves
    script = visits_kernel(1, 1, 7, 3, 4).script()
    assert "for w in range(3):" in script
    assert "if k < 7:" in script


def load(path) -> None:
    """Import a kernel module from a file (TVMScript parses kernels from their source)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def bad(domain, wave_size, index, group_size=8, names="bx, by"):
    source = f"""
import tilelang.language as T

@T.prim_func
def main(C: T.Tensor((64,), "float32")):
    with T.Kernel(4, threads=32) as bid:
        for {names} in T.Persistent({domain}, {wave_size}, {index}, {group_size}):
            C[0] = 1.0
"""
    return source


@pytest.mark.parametrize("args,error,match", [
    (("4", 4, "bid"), LanguageTypeError, r"domain must be a list of tile counts.*got 4"),
    (("[]", 4, "bid"), LanguageError, r"domain is empty"),
    (("[4, -1]", 4, "bid"), LanguageError, r"domain\[1\] must be at least 0, got -1"),
    (("[4, 4]", 0, "bid"), LanguageError, r"wave_size must be at least 1, got 0"),
    (("[4, 4]", 2.5, "bid"), LanguageTypeError, r"wave_size must be an integer.*got 2.5"),
    (("[4, 4]", 4, "bid", 0), LanguageError, r"group_size must be at least 1, got 0"),
    (("[4, 4]", 4, "T.float32(1.0)"), LanguageTypeError, r"index must be an integer.*of type float32"),
])
def test_bad_arguments_are_explained(tmp_path, args, error, match):
    path = tmp_path / "kernel.py"
    path.write_text(bad(*args))
    with pytest.raises(error, match=match):
        load(path)


def test_one_loop_variable_per_dimension(tmp_path):
    # TVMScript's own diagnostic, with the line: the nest yields one value per dimension
    path = tmp_path / "kernel.py"
    path.write_text(bad("[4, 4, 2]", 4, "bid", names="bx, by"))
    with pytest.raises(Exception, match=r"too many values to unpack \(expected 2\)\n --> .*kernel.py:7"):
        load(path)
