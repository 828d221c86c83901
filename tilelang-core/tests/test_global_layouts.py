"""A global tensor stored in a T.Layout's order (upstream's flash-attention backward dQ):
every access goes through the map, and kernels that agree on it see the logical tensor."""

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError
from tilelang.testing.kernels import global_layout_pair


@pytest.mark.parametrize("target,backend", [("llvm", "tvm_ffi"), ("c", "cython")])
def test_kernels_agreeing_on_a_layout_round_trip_and_the_storage_is_permuted(target, backend):
    accumulate, unpack = (tilelang.compile(k, target=target, execution_backend=backend)
                          for k in global_layout_pair(16, 32))
    a = np.arange(16 * 32, dtype="float32").reshape(16, 32)
    q = np.zeros_like(a)
    accumulate(a, q)
    accumulate(a, q)
    out = np.zeros_like(a)
    unpack(q, out)
    np.testing.assert_array_equal(out, 2 * a)
    # storage: 8x8 blocks, block-row-major
    np.testing.assert_array_equal(q.reshape(-1), (2 * a).reshape(2, 8, 4, 8).transpose(0, 2, 1, 3).reshape(-1))


def test_a_layout_that_is_not_a_permutation_is_refused():
    with pytest.raises(LanguageError, match=r"maps 512 elements onto storage of shape \[1, 32\] \(32 elements\)"):

        @T.prim_func
        def collapse(Q: T.Tensor((16, 32), "float32")):
            with T.Kernel(1, threads=32):
                T.annotate_layout({Q: T.Layout(Q.shape, lambda i, j: [0, j])})
                Q[0, 0] = 1.0
