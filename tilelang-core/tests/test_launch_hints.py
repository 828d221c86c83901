"""T.annotate_min_blocks_per_sm: recorded on the function for backends whose kernels take
a minimum-blocks launch bound; the CPU ignores it."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError


def copy_rows(min_blocks):
    @T.prim_func
    def main(A: T.Tensor((8, 16), "float32"), B: T.Tensor((8, 16), "float32")):
        with T.Kernel(8, threads=16) as bx:
            T.annotate_min_blocks_per_sm(min_blocks)
            B[bx, T.get_thread_binding()] = A[bx, T.get_thread_binding()] + 1.0

    return main


def test_the_hint_is_recorded_and_the_cpu_runs_the_kernel():
    func = copy_rows(2)
    assert int(func.attrs["tl.min_blocks_per_sm"]) == 2
    a, b = np.arange(128, dtype="float32").reshape(8, 16), np.zeros((8, 16), "float32")
    tilelang.compile(func, target="cpu")(a, b)
    np.testing.assert_array_equal(b, a + 1)


@pytest.mark.parametrize("count", [0, -1, 1.5])
def test_the_block_count_must_be_a_positive_int(count):
    with pytest.raises(LanguageError, match=r"T.annotate_min_blocks_per_sm: the block count must be a positive "
                                            r"constant int, got"):
        copy_rows(count)


def test_outside_a_kernel_it_is_refused():
    with pytest.raises(LanguageError, match=r"T.annotate_min_blocks_per_sm is only valid inside a T.Kernel frame"):
        T.annotate_min_blocks_per_sm(2)
