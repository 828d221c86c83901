"""Long rows reduced by the whole block (core's LowerTileOps(cross_thread=True), which the
CUDA pipeline asks for): each thread combines a strided slice and TVM's thread all-reduce
combines the threads, instead of one thread walking each row. Checked in the generated CUDA
here; the GPU runs are the softmax/rmsnorm kernels of test_gpu.py and the benchmark
families."""

from __future__ import annotations

import re

import pytest
import tilelang
import tilelang.language as T

SM90 = {"kind": "cuda", "arch": "sm_90"}


def row_softmax(M, N, rows, threads, clear=True):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            x = T.alloc_fragment((rows, N), "float32")
            row_max = T.alloc_fragment((rows,), "float32")
            row_sum = T.alloc_fragment((rows,), "float32")
            for i, j in T.Parallel(rows, N):
                x[i, j] = T.cast(X[bx * rows + i, j], "float32")
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(rows, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.fill(row_sum, 0.0)
            T.reduce_sum(x, row_sum, dim=1, clear=clear)
            for i, j in T.Parallel(rows, N):
                Y[bx * rows + i, j] = T.cast(x[i, j] / row_sum[i], "float16")

    return main


def body(func) -> str:
    source = tilelang.lower(func, target=SM90).device_source
    return source[source.index('extern "C" __global__'):]


# rows that split the block into warp groups are reduced at once: test_grouped_row_reduce.py
# (a row of at most 64 elements per thread is reduced in registers: test_register_row_reduce.py)
@pytest.mark.parametrize("rows,threads", [(1, 32), (8, 128), (4, 64)])  # groups of 16: under a warp
def test_long_rows_are_reduced_by_every_thread(rows, threads):
    code = body(row_softmax(1024, 4096, rows, threads))
    # warp shuffles, then one shared-memory stage across the warps, per reduction
    assert code.count("__shfl_down_sync(") >= 2 * 5 and ("red_buf_staging" in code or threads == 32)
    # each thread combines 4096 / threads elements of a row, not the whole row
    assert re.search(rf"for \(int r\d+ = 0; r\d+ < {4096 // threads}; \+\+r\d+\)", code)
    assert "< 4096; ++r" not in code


def test_short_rows_many_rows_and_accumulation_keep_one_thread_per_row():
    # 64 rows of 64: rows outnumber MAX_ACROSS_ROWS, a row is shorter than the block
    assert "__shfl_down_sync" not in body(row_softmax(1024, 64, 64, 128))
    # clear=False accumulates into the destination: the row's own thread reads and writes it
    code = body(row_softmax(1024, 4096, 1, 128, clear=False))
    # the max only (in registers: 32 elements a thread), 5 shuffles within warps
    assert code.count("__shfl_xor_sync(") == 5 and "__shfl_down_sync" not in code
