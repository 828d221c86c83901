"""T.PersistentTileScheduler (language/tile_scheduler.py) on the CPU target: the tiles each
worker visits, in which order, in both of upstream's spellings (the stateful while loop and
the stateless ``coord``), against an order built independently here (panels enumerated
with nested Python loops, not the scheduler's arithmetic); the while loop as a counted loop
where its shape allows and as a while loop elsewhere, with the same results; the state
after the loop; a persistent GEMM against numpy; and the errors for bad use.

The CUDA side (a producer warp that replays the counted loop, the ring protocol, the GEMM
on the GPU) is in tilelang-cuda/tests/test_persistent_ring.py and test_gpu_persistent.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError
from tilelang.testing.kernels import persistent_gemm


def expected_order(m_tiles, n_tiles, swizzle, column_major, cluster=1):
    """The tiles in schedule order: panels of ``swizzle`` lines of the slow axis (the last
    one narrower), inside a panel the fast axis slowest and the panel's lines fastest."""
    rows = -(-m_tiles // cluster)
    fast, slow = (rows, n_tiles) if column_major else (n_tiles, rows)
    order = []
    for first in range(0, slow, swizzle):
        for along in range(fast):
            for across in range(first, min(first + swizzle, slow)):
                order.append((along, across) if column_major else (across, along))
    return order


def visits(m_tiles, n_tiles, workers, swizzle, column_major, cluster=1, spelling="while"):
    """Per linear tile number: (m, n, the worker, the worker's iteration), from a kernel."""
    total = -(-m_tiles // cluster) * n_tiles
    waves = -(-total // workers)

    if spelling == "while":
        @T.prim_func
        def kernel(Mo: T.Tensor((total,), T.int32), No: T.Tensor((total,), T.int32), Wo: T.Tensor((total,), T.int32),
                   Io: T.Tensor((total,), T.int32)):
            with T.Kernel(workers, threads=1) as (block_id,):
                sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=swizzle,
                                                  column_major=column_major, cluster_size=cluster, name="sched")
                sched.init(block_id)
                while sched.valid():
                    Mo[sched.linear_idx] = sched.m_idx
                    No[sched.linear_idx] = sched.n_idx
                    Wo[sched.linear_idx] = block_id
                    Io[sched.linear_idx] = sched.current_iter
                    sched.next_tile()
    else:
        @T.prim_func
        def kernel(Mo: T.Tensor((total,), T.int32), No: T.Tensor((total,), T.int32), Wo: T.Tensor((total,), T.int32),
                   Io: T.Tensor((total,), T.int32)):
            with T.Kernel(workers, threads=1) as (block_id,):
                sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=swizzle,
                                                  column_major=column_major, cluster_size=cluster, stateful=False)
                for w in T.serial(waves):
                    t = workers * w + block_id
                    if t < total:
                        bx, by = sched.coord(t)
                        Mo[t] = bx
                        No[t] = by
                        Wo[t] = block_id
                        Io[t] = w

    outs = [np.full(total, -1, np.int32) for _ in range(4)]
    tilelang.compile(kernel, target="cpu")(*outs)
    return kernel, outs


CASES = [pytest.param(5, 3, 4, 2, True, 1, id="5x3-w4-swizzle2"),
         pytest.param(4, 2, 1, 1, True, 1, id="4x2-w1-column-major"),
         pytest.param(3, 7, 5, 3, False, 1, id="3x7-w5-swizzle3-row-major"),
         pytest.param(7, 4, 3, 8, True, 1, id="7x4-w3-swizzle-wider-than-grid"),
         pytest.param(6, 5, 4, 2, True, 2, id="6x5-w4-cluster2")]


@pytest.mark.parametrize("spelling", ["while", "coord"])
@pytest.mark.parametrize("m_tiles,n_tiles,workers,swizzle,column_major,cluster", CASES)
def test_every_tile_once_in_the_panel_order(m_tiles, n_tiles, workers, swizzle, column_major, cluster, spelling):
    _, (mo, no, wo, io) = visits(m_tiles, n_tiles, workers, swizzle, column_major, cluster, spelling)
    order = expected_order(m_tiles, n_tiles, swizzle, column_major, cluster)
    assert list(zip(mo.tolist(), no.tolist())) == order
    numbers = np.arange(len(order))
    np.testing.assert_array_equal(wo, numbers % workers)  # worker w takes w, w + workers, ...
    np.testing.assert_array_equal(io, numbers // workers)  # current_iter counts its tiles


def test_the_while_loop_becomes_a_counted_loop_over_named_state():
    kernel, _ = visits(5, 3, 4, 2, True)
    script = kernel.script()
    assert "while" not in script and "for sched_iter in range(" in script
    for field in ("m_idx", "n_idx", "linear_idx", "current_iter"):
        assert f"sched_{field}" in script


def other_loop(shape):
    """Loops ``while sched.valid()`` that are not the counted shape, which stay while loops."""
    m_tiles, n_tiles, workers = 3, 2, 2

    @T.prim_func
    def kernel(Mo: T.Tensor((10,), T.int32), No: T.Tensor((10,), T.int32)):
        with T.Kernel(workers, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers)
            sched.init(block_id)
            if shape == "advance_first":
                while sched.valid():
                    sched.next_tile()
                    Mo[sched.current_iter * 2 + block_id] = sched.m_idx  # the next tile (past the end: 3)
                    No[sched.current_iter * 2 + block_id] = sched.n_idx
            else:
                while sched.valid():
                    Mo[sched.current_iter * 2 + block_id] = sched.m_idx
                    if sched.m_idx == 1:
                        sched.next_tile()  # a tile of row 1 is counted twice: twice as many steps
                    sched.next_tile()
                    No[sched.current_iter * 2 + block_id] = sched.n_idx

    mo, no = np.full(10, -1, np.int32), np.full(10, -1, np.int32)
    tilelang.compile(kernel, target="cpu")(mo, no)
    return kernel, mo.tolist(), no.tolist()


def test_other_loop_shapes_stay_while_loops_with_upstreams_meaning():
    kernel, mo, no = other_loop("advance_first")
    assert "while" in kernel.script()
    # tile t is (t % 3, t // 3); worker 0 stands on 0 2 4 and writes tiles 2 4 6 at slots 2 4
    # 6, worker 1 stands on 1 3 5 and writes 3 5 7 at slots 3 5 7 (6 and 7: past the end)
    assert mo == [-1, -1, 2, 0, 1, 2, 0, 1, -1, -1] and no == [-1, -1, 0, 1, 1, 1, 2, 2, -1, -1]
    kernel, mo, no = other_loop("conditional")
    assert "while" in kernel.script()
    # worker 0: tiles 0 -> 2 -> 4 (row 1: two steps) -> 8, rows at slots 0 2 4, columns of
    # 2 4 8 at slots 2 4 8; worker 1: tiles 1 (row 1) -> 5 -> 7, rows at 1 5, columns of 5 7 at 5 7
    assert mo == [0, 1, 2, -1, 1, 2, -1, -1, -1, -1] and no == [-1, -1, 0, -1, 1, 1, -1, 2, 2, -1]


def test_the_state_after_a_counted_loop_is_the_while_loops():
    @T.prim_func
    def kernel(Out: T.Tensor((3, 4), T.int32)):
        with T.Kernel(3, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(4, 2, num_workers=3, swizzle_size=2)
            sched.init(block_id)
            while sched.valid():
                sched.next_tile()
            Out[block_id, 0] = sched.linear_idx
            Out[block_id, 1] = sched.current_iter
            Out[block_id, 2] = sched.m_idx
            Out[block_id, 3] = T.if_then_else(sched.valid(), 1, 0)

    assert "while" not in kernel.script()
    out = np.full((3, 4), -1, np.int32)
    tilelang.compile(kernel, target="cpu")(out)
    # 8 tiles: worker 0 visits 0 3 6 and stops at 9, worker 1 at 10, worker 2 at 8; the
    # number past the end decodes like any other: panel 1 (numbers 8..) starts at column 2,
    # is clamped to width 1, so row = number - 8
    assert out.tolist() == [[9, 3, 1, 0], [10, 3, 2, 0], [8, 2, 0, 0]]


@pytest.mark.parametrize("spelling", ["scheduler", "scheduler_coord"])
def test_persistent_gemm_with_the_scheduler_equals_numpy(spelling):
    M, N, K = 96, 80, 48  # 3 x 5 tiles of 32 x 16 over 4 workers, panels of 2 (the last narrower)
    func = persistent_gemm(M, N, K, 32, 16, 16, 32, 2, 4, spelling, group_size=2, dtype="float32",
                           accum_dtype="float32")
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    c = np.full((M, N), np.nan, np.float32)
    tilelang.compile(func, target="cpu")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_the_eager_style_takes_the_scheduler():
    @tilelang.jit(target="cpu")
    def tile_rows(A, workers: int = 3):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B = T.empty((M, N), T.float32)
        with T.Kernel(workers, threads=1) as block_id:
            sched = T.PersistentTileScheduler(T.ceildiv(M, 4), T.ceildiv(N, 4), num_workers=workers, swizzle_size=2)
            sched.init(block_id)
            while sched.valid():
                for i, j in T.grid(4, 4):
                    B[sched.m_idx * 4 + i, sched.n_idx * 4 + j] = A[sched.m_idx * 4 + i, sched.n_idx * 4 + j] * 2.0
                sched.next_tile()
        return B

    a = np.arange(12 * 20, dtype=np.float32).reshape(12, 20)
    np.testing.assert_array_equal(tile_rows(a), a * 2)


def parse_error(build):
    with pytest.raises(LanguageError) as caught:
        build()
    return str(caught.value)


def test_stateless_scheduler_has_no_fields():
    def build():
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.int32)):
            with T.Kernel(1, threads=1) as (block_id,):
                sched = T.PersistentTileScheduler(4, 2, num_workers=1, stateful=False)
                A[block_id] = sched.m_idx

    message = parse_error(build)
    assert "stateful=False) keeps no state, so sched.m_idx is not available" in message
    assert "sched.coord(tile_id)" in message


@pytest.mark.parametrize("keyword,value,expected", [
    ("swizzle_size", 0, "swizzle_size must be a Python int of at least 1"),
    ("cluster_size", 1.5, "cluster_size must be a Python int of at least 1"),
    ("num_workers", 0, "num_workers must be at least 1, got 0"),
    ("name", "a b", "name must be an identifier"),
])
def test_bad_arguments_say_which(keyword, value, expected):
    def build():
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.int32)):
            with T.Kernel(1, threads=1) as (block_id,):
                sched = T.PersistentTileScheduler(4, 2, **{"num_workers": 1, keyword: value})
                A[block_id] = sched.m_idx

    assert expected in parse_error(build)


def test_init_inside_the_loop_keeps_a_while_loop():
    @T.prim_func
    def kernel(A: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(4, 2, num_workers=3)
            sched.init(block_id)
            while sched.valid():
                A[sched.linear_idx] = 1
                sched.init(sched.linear_idx + 3)
                sched.next_tile()

    assert "while" in kernel.script()
    a = np.zeros(8, np.int32)
    tilelang.compile(kernel, target="cpu")(a)
    assert a.tolist() == [1, 0, 0, 0, 0, 0, 1, 0]  # 0, then init(3) + 3 = 6, then 12 ends it


def moved_or_repeated(shape):
    """A scheduler moved after init(), or a loop around its while loop: the counted loop
    would restart at init()'s tile, so these stay while loops."""

    @T.prim_func
    def kernel(Count: T.Tensor((2,), T.int32)):
        with T.Kernel(2, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(3, 2, num_workers=2)
            sched.init(block_id)
            Count[block_id] = 0
            if shape == "moved":
                sched.next_tile()  # skip the first tile
                while sched.valid():
                    Count[block_id] = Count[block_id] + 1
                    sched.next_tile()
            else:
                for _ in T.serial(2):  # the second turn finds every tile walked
                    while sched.valid():
                        Count[block_id] = Count[block_id] + 1
                        sched.next_tile()

    count = np.full(2, -1, np.int32)
    tilelang.compile(kernel, target="cpu")(count)
    return kernel, count.tolist()


@pytest.mark.parametrize("shape,expected", [("moved", [2, 2]), ("repeated", [3, 3])])
def test_a_moved_or_repeated_scheduler_keeps_its_while_loop(shape, expected):
    kernel, count = moved_or_repeated(shape)
    assert "while" in kernel.script()
    assert count == expected  # 6 tiles over 2 workers: 3 each, one fewer when moved first
