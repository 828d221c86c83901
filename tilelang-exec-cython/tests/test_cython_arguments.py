"""The compiled launcher's share of the argument rules (issue 15, item 5).

The behaviour is pinned for every CPU execution backend by tilelang-core's
test_reliability_arguments.py; these tests pin the C the launcher generates for it, so a
check dropped from the C (which the shared binder would then never see, since a call the C
accepts is launched) fails here even when another check happens to catch the same call.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError
from tilelang.jit.adapter.cython.codegen import KernelSource, kernel_header


def scale_rows():
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), s: T.int16, B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64)) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = A[bx * 64 + i] * T.cast(s, "float32")

    return main


@pytest.fixture(scope="module")
def header() -> str:
    artifact = tilelang.lower(scale_rows(), target="c")
    compiled = tilelang.compile(scale_rows(), target="c", execution_backend="cython")
    assert compiled.artifact.written == (2,) and artifact.narrow_symbols == (("n", "int32"),)
    return kernel_header(compiled.artifact, KernelSource(device_type=1, host_call=True))


def test_only_written_tensors_need_a_writable_buffer(header: str) -> None:
    assert "if (tl_view_of(st, argv[0], &v[0], 0)) TL_MISS(TL_MISS_NOT_TENSOR, 0);" in header
    assert "if (tl_view_of(st, argv[2], &v[2], 1)) TL_MISS(TL_MISS_NOT_TENSOR, 2);" in header


def test_an_int32_symbolic_extent_is_range_checked(header: str) -> None:
    assert "s0 = v[0].dl.shape[0];\n  if (s0 > 2147483647) TL_MISS(TL_MISS_SHAPE, 0);" in header


def test_the_scalar_range_is_its_type(header: str) -> None:
    assert "switch (tl_int_arg(argv[1], (-INT64_C(32768)), UINT64_C(32767), &p1)) {" in header


def test_the_c_path_refuses_what_the_binder_refuses() -> None:
    kernel = tilelang.compile(scale_rows(), target="c", execution_backend="cython")
    a = np.arange(100, dtype="float32")
    out = np.zeros(100, dtype="float32")
    kernel(a, 3, out)
    np.testing.assert_array_equal(out, 3 * a)
    out.flags.writeable = False
    with pytest.raises(ArgumentError, match=r"argument 'B' \(#2\): it is a read-only array and the kernel writes it"):
        kernel(a, 3, out)
    with pytest.raises(ArgumentError, match=r"32768 does not fit its type int16"):
        kernel(a, 2**15, np.zeros(100, dtype="float32"))
    with pytest.raises(ArgumentError, match=r"a numpy masked array is refused"):
        kernel(np.ma.masked_array(a), 3, np.zeros(100, dtype="float32"))
