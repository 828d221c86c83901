"""Integer division and remainder with negative operands: TIR's floordiv/floormod round
toward minus infinity, truncdiv/truncmod toward zero (C). In CuTe DSL, ``//`` floors
everywhere, but ``%`` floors on trace-time Python ints and truncates on device values
(``arith.remsi``): the printer writes FloorDiv as ``//`` and the other three through the
helpers it puts in every module, which use only ``//``, ``-`` and ``*``."""

from __future__ import annotations

import importlib.util
import itertools

import cute_emulator
import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.cutedsl.printer import INTEGER_HELPERS

OPS = {"floordiv": "//", "floormod": "_tl_floormod(", "truncdiv": "_tl_truncdiv(", "truncmod": "_tl_truncmod("}


def division_kernel(op: str, n: int = 64):
    fn = getattr(T, op)

    @T.prim_func
    def main(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32"), C: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                C[i] = fn(A[i], B[i])

    return main


def reference(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    floor_q = a // b
    trunc_q = np.trunc(a / b).astype(a.dtype)
    return {"floordiv": floor_q, "floormod": a - floor_q * b, "truncdiv": trunc_q, "truncmod": a - trunc_q * b}[op]


OPERANDS = np.array(list(itertools.product(range(-9, 9), [-4, -3, -1, 1, 3, 4])), "int32")[:64]


@pytest.mark.parametrize("op", OPS)
def test_each_division_is_printed_with_its_rounding(op: str) -> None:
    source = tilelang.lower(division_kernel(op), target="cutedsl").device_source
    body = source.split("@cute.kernel", 1)[1]
    assert OPS[op] in body
    assert " % " not in body  # CuTe DSL's % truncates on device values and floors on ints
    a, b = OPERANDS[:, 0].copy(), OPERANDS[:, 1].copy()
    out = np.zeros(64, "int32")
    cute_emulator.run(source, a, b, out)
    np.testing.assert_array_equal(out, reference(op, a, b))


class DeviceInt:
    """An int with the device semantics of CuTe DSL's Int32: // floors, % truncates."""

    def __init__(self, v: int) -> None:
        self.v = int(v)

    def _o(self, x):
        return x.v if isinstance(x, DeviceInt) else int(x)

    def __floordiv__(self, x):
        return DeviceInt(self.v // self._o(x))

    def __mod__(self, x):
        return DeviceInt(int(np.fmod(self.v, self._o(x))))

    def __sub__(self, x):
        return DeviceInt(self.v - self._o(x))

    def __add__(self, x):
        return DeviceInt(self.v + self._o(x))

    def __mul__(self, x):
        return DeviceInt(self.v * self._o(x))

    __rmul__ = __mul__

    def __lt__(self, x):
        return self.v < self._o(x)

    def __ne__(self, x):
        return self.v != self._o(x)


def test_the_helpers_hold_with_device_remainders_too() -> None:
    """The helpers never rely on %: with device ints (truncating %) they give TIR's results."""
    import types

    namespace = {"cutlass": types.SimpleNamespace(select_=lambda c, a, b: a if c else b)}
    exec(INTEGER_HELPERS, namespace)  # noqa: S102 - the printer's own helper source
    assert (DeviceInt(-7) % 2).v == -1  # the trap: not Python's 1
    for a, b in OPERANDS:
        for op, helper in (("floormod", "_tl_floormod"), ("truncdiv", "_tl_truncdiv"), ("truncmod", "_tl_truncmod")):
            want = int(reference(op, np.array([a]), np.array([b]))[0])
            assert namespace[helper](DeviceInt(a), DeviceInt(b)).v == want, (op, a, b)
            assert namespace[helper](int(a), int(b)) == want, (op, a, b)


@pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="NVIDIA CuTe DSL is not installed")
@pytest.mark.parametrize("op", OPS)
def test_cute_compile_takes_the_helpers_on_device_ints(op: str, tmp_path) -> None:
    import cuda.bindings.driver as cuda
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_ptr
    from tilelang.cutedsl.execution_backend import import_source

    (tmp_path / "kernel_cute.py").write_text(tilelang.lower(division_kernel(op), target="cutedsl").device_source)
    module = import_source(tmp_path / "kernel_cute.py", op)
    ptrs = [make_ptr(cutlass.Int32, 1 << 20, cute.AddressSpace.gmem, assumed_align=16) for _ in range(3)]
    assert cute.compile(module.launch, *ptrs, cuda.CUstream(0)) is not None
