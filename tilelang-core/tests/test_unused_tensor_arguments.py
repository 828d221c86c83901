"""None for a tensor the kernel never uses (upstream's `kernel(a, b, c, None)` for a bias
its `with_bias=False` build does not read): such a parameter is optional, the binder
accepts None (or a tensor, still checked) and the packed entry takes a null pointer; a
tensor the kernel reads or writes refuses None with the reason."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError

torch = pytest.importorskip("torch")


def biased(with_bias, n=16):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32), Bias: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                if with_bias:
                    C[i] = A[i] * 2 + Bias[i]
                else:
                    C[i] = A[i] * 2

    return main


def test_none_stands_for_a_tensor_the_kernel_never_uses():
    kernel = tilelang.compile(biased(False), target="cpu")
    assert kernel.params[2].optional and not kernel.params[0].optional
    a, c = torch.arange(16, dtype=torch.float32), torch.zeros(16)
    kernel(a, c, None)
    assert torch.equal(c, a * 2)
    kernel(a, c, torch.zeros(16))  # a tensor still fits
    with pytest.raises(ArgumentError, match=r"argument 'Bias' \(#2\): expected shape \(16,\), got \(3,\)"):
        kernel(a, c, torch.zeros(3))


def test_none_for_a_tensor_the_kernel_reads_is_refused():
    kernel = tilelang.compile(biased(True), target="cpu")
    assert not kernel.params[2].optional
    with pytest.raises(ArgumentError, match=r"kernel 'main', argument 'Bias' \(#2\): got None, but the kernel reads "
                                            r"or writes this tensor; pass a tensor \(None may only stand for a "
                                            r"tensor the kernel never uses\)"):
        kernel(torch.ones(16), torch.zeros(16), None)


def test_an_unused_tensor_that_alone_gives_a_symbol_is_not_optional():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((16,), T.float32), Extra: T.Tensor((n,), T.float32), m: T.int32):
        with T.Kernel(1, threads=1):
            A[0] = T.cast(n + m, "float32")

    kernel = tilelang.compile(main, target="cpu")
    assert not kernel.params[1].optional  # a call binds n from it
    a = torch.zeros(16)
    kernel(a, torch.zeros(5), 2)
    assert a[0] == 7
