"""Building a kernel leaves no reference cycle through its callers' frames: a tensor the
caller holds is freed when the caller returns, without waiting for the garbage collector
(upstream's test_tilelang_globals_leak disables it and checks the same)."""

import gc
import weakref

import numpy as np
import pytest
import tilelang
import tilelang.language as T


def _prim_func():
    @T.prim_func
    def copy_kernel(a: T.Tensor((4,), T.float32)):
        with T.Kernel(1) as _:
            ub = T.alloc_shared((4,), "float32")
            T.copy(a, ub)
            T.copy(ub, a)

    return copy_kernel


@tilelang.jit(target="cpu")
def _jit_factory():
    return _prim_func()


@tilelang.jit(target="cpu")
def _eager(a: T.Tensor((4,), T.float32)):
    with T.Kernel(1) as _:
        ub = T.alloc_shared((4,), "float32")
        T.copy(a, ub)
        T.copy(ub, a)


def _macro_kernel():
    @T.macro
    def twice(ub):
        for i in T.serial(4):
            ub[i] = ub[i] * 2

    @T.prim_func
    def with_macro(a: T.Tensor((4,), T.float32)):
        with T.Kernel(1) as _:
            ub = T.alloc_shared((4,), "float32")
            T.copy(a, ub)
            twice(ub)
            T.copy(ub, a)

    return with_macro


BUILDERS = {
    "prim_func": _prim_func,
    "jit factory": lambda: _jit_factory(),
    "macro": _macro_kernel,
    "eager jit": lambda: _eager.get_tir() if hasattr(_eager, "get_tir") else _eager(np.zeros(4, "float32")),
}


@pytest.mark.parametrize("how", sorted(BUILDERS))
def test_building_a_kernel_frees_the_callers_locals(how):
    def caller():
        held = np.ones(1 << 16, "float32")  # a local of a frame that was on the stack while parsing
        BUILDERS[how]()
        return weakref.ref(held)

    gc.collect()
    gc.disable()
    try:
        held = caller()
        assert held() is None, f"building a kernel ({how}) kept its caller's frame alive"
    finally:
        gc.enable()
