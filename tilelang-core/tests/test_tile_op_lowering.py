"""Tile-op lowering (transform/lower_tile_ops.py) on the CPU: what ``nox -s mutants`` found
untested there. A copy between tiles of different dtypes converts each element; a
reduction's destination of the wrong rank is refused with the ranks it could have; an
integer max/min starts from the type's extremes and bitand from all ones; a tile atomic on
a one-element region updates it once."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError

rng = np.random.default_rng(3)


def cpu(func, out_idx=(-1,)):
    return tilelang.compile(func, out_idx=list(out_idx), target="cpu")


@pytest.mark.parametrize(("src", "dst"), [("float16", "float32"), ("float32", "float16"), ("int32", "float32"),
                                          ("float32", "int32")])
def test_a_copy_between_dtypes_converts_each_element(src: str, dst: str) -> None:
    @T.prim_func
    def main(X: T.Tensor((8, 16), src), Y: T.Tensor((8, 16), dst)):
        with T.Kernel(1, threads=32) as _:
            t = T.alloc_shared((8, 16), dst)
            T.copy(X, t)  # the conversion happens here, tile to tile
            T.copy(t, Y)

    x = (rng.integers(-50, 50, (8, 16)) * 0.25).astype(src)  # exact in every dtype here but int32
    np.testing.assert_array_equal(cpu(main)(x), x.astype(dst))


@pytest.mark.parametrize(("dst_shape", "message"), [
    ((4, 8, 2), r"T.reduce_max: destination is 3-d; reducing a 2-d tile gives 1-d"),
    ((4, 9), (r"T.reduce_max: the destination's extents \[4, 9\] do not match the \[4, 8\] tile reduced "
              r"over dim 0 \(axis 1 should be 8\)")),
])
def test_a_reduction_into_a_destination_of_another_shape_is_refused(dst_shape, message) -> None:
    @T.prim_func
    def main(X: T.Tensor((4, 8), "float32"), R: T.Tensor(dst_shape, "float32")):
        with T.Kernel(1, threads=32) as _:
            x = T.alloc_fragment((4, 8), "float32")
            r = T.alloc_fragment(dst_shape, "float32")
            T.copy(X, x)
            T.reduce_max(x, r, dim=0)
            T.copy(r, R)

    with pytest.raises(LanguageError, match=message):
        cpu(main)


@pytest.mark.parametrize("kind", ["max", "min", "bitand"])
def test_integer_reductions_start_from_their_identity(kind: str) -> None:
    @T.prim_func
    def main(X: T.Tensor((4, 16), "int32"), R: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32) as _:
            x = T.alloc_fragment((4, 16), "int32")
            r = T.alloc_fragment((4,), "int32")
            T.copy(X, x)
            T.reduce(x, r, kind, dim=1, clear=True)
            T.copy(r, R)

    info = np.iinfo("int32")
    x = rng.integers(-1000, 1000, (4, 16)).astype("int32")
    x[0] = info.min  # rows at the extremes: a wrong starting value shows there
    x[1] = info.max
    x[2] = -1  # every bit set: bitand keeps them all only from an all-ones start
    expected = {"max": np.max, "min": np.min, "bitand": np.bitwise_and.reduce}[kind](x, axis=1)
    np.testing.assert_array_equal(cpu(main)(x), expected)


def test_a_tile_atomic_on_a_one_element_region_updates_it_once() -> None:
    @T.prim_func
    def main(A: T.Tensor((4, 4), "float32"), C: T.Tensor((4, 4), "float32")):
        with T.Kernel(1):
            T.atomic_add(C[2:3, 3:4], A[1:2, 0:1])  # every axis of extent 1: a nest of one
            T.atomic_add(C[0:1, 0:1], 0.5)

    a = rng.standard_normal((4, 4)).astype("float32")
    c = np.ones((4, 4), "float32")
    cpu(main, out_idx=())(a, c)
    expected = np.ones((4, 4), "float32")
    expected[2, 3] += a[1, 0]
    expected[0, 0] += 0.5
    np.testing.assert_array_equal(c, expected)
