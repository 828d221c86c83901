"""Rows of a register fragment reduced where they lie (core's block_reduce.py, the form in
the fragment's own layout): each thread adds its own points of the fragment into a partial
per row, then every row's partials are combined over the block at once (butterfly shuffles
per row, one shared stage of a value per warp and row). The fragment stays in registers:
upstream's rms_norm of a 32 x 2048 fragment on 128 threads (benchmark/compile_speed's
kernel zoo) used to put it in shared memory, 256 KiB, more than a block has. Checked by
running the lowered device IR in the numpy interpreter, and by what the lowering emits."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
from test_grouped_row_reduce import (
    NUMPY,
    SM90,
    kernel_body,
    row_reduce,
    run,
    small_ints,
)
from tilelang.testing.kernels import rms_norm_rows


def shared_buffers(code: str) -> list[str]:
    return re.findall(r"__shared__[^;]*?(\w+)_ptr\[", code)


@pytest.mark.parametrize("rows,threads,n", [
    (32, 128, 256),  # more rows than go one after another: one thread a row walked them before
    (16, 64, 128),
    (1, 128, 512),  # a single row of 4 elements a thread (T.copy's nest runs over its columns alone)
    (3, 128, 512),  # rows that do not split the block
    (12, 256, 320),  # a row that is no multiple of the threads: partials of uneven shares
])
@pytest.mark.parametrize("kind", ["sum", "max", "absmax"])
def test_rows_of_a_register_fragment_as_lowered_equal_numpy(rows, threads, n, kind):
    x = small_ints((2, rows, n), rows * threads + n)
    out = np.full((2, rows), np.nan, np.float32)
    func = row_reduce(2, (rows, n), threads, kind)
    calls = run(func, x, out)
    assert calls["__shfl_xor_sync"] == 2 * 5 * rows and "__shfl_down_sync" not in calls  # 5 per row and block
    np.testing.assert_array_equal(out, NUMPY[kind](x))
    code = kernel_body(func)
    assert "x" not in shared_buffers(code)  # the fragment in registers: a per-thread array
    assert re.search(rf"float x_ptr\[{rows * n // threads}\];", code)
    # the partials of all rows meet once: one barrier (between the warps' values and their
    # reads); a one-row destination is stored by one thread and read back by all: one more
    assert code.count("__syncthreads()") == (2 if rows == 1 else 1)


@pytest.mark.parametrize("threads", [48, 80, 96])
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_a_block_of_part_of_a_warp_reduces_all_of_its_threads(threads, kind):
    """A row of ``threads`` points on a block of ``threads`` (upstream's allreduce tests of
    a logical width of 48 and 96): 48 and 80 end in a warp of 16 lanes. The register form
    took 48 threads for one warp, stored warp 0's total (32 of the 48 points) and had the
    16-lane warp shuffle past its end; they now take TVM's all-reduce in shared memory."""
    x = small_ints((1, threads), threads)
    out = np.full((1,), np.nan, np.float32)
    calls = run(row_reduce(1, (threads,), threads, kind), x, out)
    np.testing.assert_array_equal(out, NUMPY[kind](x))
    assert ("__shfl_xor_sync" in calls) == (threads % 32 == 0)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [48, 80])
def test_a_block_of_part_of_a_warp_reduces_on_the_gpu(threads):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(row_reduce(8, (threads,), threads, "sum"), target="cuda")
    x = torch.randint(-8, 9, (8, threads), device="cuda").float()
    out = torch.full((8,), float("nan"), device="cuda")
    kernel(x, out)
    torch.testing.assert_close(out, x.sum(1), rtol=0, atol=0)


def test_points_not_dealt_evenly_keep_the_generic_form():
    """12 x 300 points on 256 threads: the last deal is partial, and a thread past the end
    recomputes the clamped last point (stores to memory are guarded, a per-thread partial
    is not), so it would be added twice."""
    x = small_ints((2, 12, 300), 5)
    out = np.full((2, 12), np.nan, np.float32)
    calls = run(row_reduce(2, (12, 300), 256, "sum"), x, out)
    assert "__shfl_xor_sync" not in calls
    np.testing.assert_array_equal(out, NUMPY["sum"](x))


def test_several_row_axes():
    x = small_ints((3, 2, 4, 128), 7)
    out = np.full((3, 2, 4), np.nan, np.float32)
    run(row_reduce(3, (2, 4, 128), 128, "sum"), x, out)
    np.testing.assert_array_equal(out, NUMPY["sum"](x))


def rms_norm_reference(x):
    """Upstream's rms_norm (examples/norm, the kernel zoo of benchmark/compile_speed;
    tilelang.testing.kernels.rms_norm_rows), eps 1e-12."""
    return x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-12)


def test_rms_norm_of_a_fragment_larger_than_shared_memory_lowers():
    """32 x 2048 floats on 128 threads: 512 a thread, in registers (as upstream's, which nvcc
    then spills), not the 256 KiB of shared memory the generic form needed."""
    artifact = tilelang.lower(rms_norm_rows(256, 2048, blk_m=32), target=SM90)
    assert [launch.dynamic_smem for launch in artifact.launches] == ["128"]  # A_powsum's 32 floats
    code = artifact.device_source
    assert "float A_pow_local_ptr[512];" in code and "float A_local_ptr[512];" in code
    # each thread's 512 points are loops under #pragma unroll (nvcc unrolls them: the same
    # registers and spills), not 512 statements each: 250 KB of source before the bound
    assert code.count("#pragma unroll") >= 4 and len(code) < 64_000


def test_rms_norm_of_a_fragment_larger_than_shared_memory_as_lowered_equals_numpy():
    x = np.random.default_rng(2).standard_normal((32, 2048)).astype(np.float32)
    out = np.zeros_like(x)
    run(rms_norm_rows(32, 2048, blk_m=32), x, out)
    np.testing.assert_allclose(out, rms_norm_reference(x), rtol=1e-5, atol=1e-6)


def test_rms_norm_as_lowered_equals_numpy():
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    out = np.zeros_like(x)
    run(rms_norm_rows(64, 256, blk_m=16), x, out)
    np.testing.assert_allclose(out, rms_norm_reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_rms_norm_of_a_large_fragment_matches_torch():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(rms_norm_rows(1408, 2048, blk_m=32), out_idx=[1], target="cuda")
    a = torch.randn(1408, 2048, device="cuda")
    expected = a * torch.rsqrt(a.pow(2).mean(1, keepdim=True) + 1e-12)
    torch.testing.assert_close(kernel(a), expected, rtol=1e-5, atol=1e-5)


def test_upstreams_one_row_rms_norm_keeps_its_fragments_in_registers():
    """examples/norm/rms_norm.py runs blk_m = 1: T.copy into the (1, N) fragment is a nest
    over the N columns, which deals the fragment's points as a nest over (1, N) does, so
    the fragment stays in registers (it went to shared memory, 4 bytes a point)."""
    x = np.random.default_rng(1).standard_normal((4, 1024)).astype(np.float32)
    out = np.zeros_like(x)
    func = rms_norm_rows(4, 1024, blk_m=1)
    run(func, x, out)
    np.testing.assert_allclose(out, rms_norm_reference(x), rtol=1e-5, atol=1e-6)
    code = kernel_body(func)
    assert "float A_local_ptr[8];" in code and "float A_pow_local_ptr[8];" in code
    assert not {"A_local", "A_pow_local"} & set(shared_buffers(code))


def test_rms_norm_source_declares_no_scalar_it_does_not_read():
    """The device-side StmtSimplify puts CommonSubexprElim's values back into their uses and
    keeps the bindings; DropDeadBindings removes them (33 unread ``int cse_vN = ...;`` lines
    in this kernel before), and the kernel still equals numpy."""
    func = rms_norm_rows(64, 1024, blk_m=4)
    code = kernel_body(func)
    declared = re.findall(r"^\s*(?:int|float|uint|bool|int64_t) (\w+) = ", code, re.MULTILINE)
    unread = [name for name in declared if len(re.findall(rf"\b{name}\b", code)) == 1]
    assert unread == []
    x = np.random.default_rng(5).standard_normal((64, 1024)).astype(np.float32)
    out = np.zeros_like(x)
    run(func, x, out)
    np.testing.assert_allclose(out, rms_norm_reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows,n", [(1, 256), (1, 1024), (2, 256), (4, 512)])
def test_rms_norm_of_fragments_dealt_in_vectors_as_lowered_equals_numpy(rows, n):
    """Register fragments dealt in vectors of 2-4 points a thread: the nests over them are
    vectors, but the nest adding each point into its row's partial runs its lanes one after
    another (as vectors, every lane updated the one partial and the last lane's won)."""
    x = np.random.default_rng(rows + n).standard_normal((4 * rows, n)).astype(np.float32)
    out = np.zeros_like(x)
    func = rms_norm_rows(4 * rows, n, blk_m=rows)
    assert "*(float4*)(A_local_ptr + 0)" in kernel_body(func) or "*(float2*)(A_local_ptr + 0)" in kernel_body(func)
    run(func, x, out)
    np.testing.assert_allclose(out, rms_norm_reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows,n", [(2, 256), (4, 128), (4, 512)])
def test_vectors_leave_every_thread_the_same_rows(rows, n):
    """Where the 128 threads divide a row, point by point every thread holds the same rows;
    its vectors keep that (a round of 128 vectors within a row: 2 points where a row has
    256). Vectors of 4 would give thread t the row t // 64 of 2 x 256: the row reduction
    then indexed its partial sums by the thread (local memory) and added zeros for the
    rows the thread lacks (the families' rmsnorm of 4 x 1024 on 512 threads, 0.87x torch
    against 1.05x)."""
    func = rms_norm_rows(4 * rows, n, blk_m=rows)
    code = kernel_body(func)
    partials = re.findall(r"row_partial\d+_ptr\[([^\]]*)\] = ", code)
    assert partials and not [index for index in partials if "threadIdx" in index]
    lanes = min(4, n // 128)  # 128 threads: a point each where a row has 128
    assert (f"*(float{lanes}*)(A_local_ptr + 0)" in code) == (lanes > 1)
    x = np.random.default_rng(rows * n).standard_normal((4 * rows, n)).astype(np.float32)
    out = np.zeros_like(x)
    run(func, x, out)
    np.testing.assert_allclose(out, rms_norm_reference(x), rtol=1e-5, atol=1e-6)
