"""Upstream's explicit loads and stores of raw words: ``T.ldg32/64/128/256`` (global),
``T.lds32/64/128`` (shared), their stores ``T.stg*`` / ``T.sts*``, and ``T.__ldg``.

``T.ldg64(X[i * 2 : i * 2 + 2])`` reads the 64 bits of those elements as a ``uint32x2``
(``uint32`` for 32 bits), which the kernel reinterprets (``T.reinterpret(v,
T.float32x2)``); ``T.stg64(Y[...], v)`` stores such a word vector's bits into the
elements. ``pred=`` guards the access: a load that is not taken gives zeros, a store that
is not taken writes nothing. The source is an element (the run starts there), a slice or
a buffer of exactly the width's elements along the last axis.

Upstream emits its own PTX helpers (``tl::load_global_128``) for these. Here they are the
vector loads and stores every backend already lowers: on CUDA a 16-byte access of a
16-byte aligned address is one ``ld.global.v4`` / ``st.global.v4`` (what those helpers
issue), and the CPU runs the same kernel. ``T.__ldg(x)`` (CUDA's read-only cache load) is
the plain load: loads of kernel inputs never written are marked ``__restrict__`` already.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .atomic import _lanes

_WIDTHS = (32, 64, 128, 256)


def _word_type(bits: int) -> str:
    return "uint32" if bits == 32 else f"uint32x{bits // 32}"


def _access(what: str, operand: Any, bits: int) -> tuple[Any, list[Any], str]:
    """(buffer, indices with a ramp on the last axis, the elements' vector type)."""
    source = operand
    for attr in ("source", "buffer"):  # an element (a load) or a region
        if getattr(source, attr, None) is not None:
            source = getattr(source, attr)
            break
    dtype = str(getattr(source, "dtype", ""))
    if not dtype:
        raise LanguageError(f"{what}: expected a buffer element or a slice such as X[i * 4 : i * 4 + 4], "
                            f"got {type(operand).__name__}")
    element_bits = tvm.DataType(dtype).bits
    if bits % element_bits:
        raise LanguageError(f"{what}: {bits} bits are not a whole number of {dtype} elements")
    lanes = bits // element_bits
    buffer, indices = _lanes(what, operand, lanes, access=f"{bits}-bit access")
    if lanes > 1:
        indices = [*indices[:-1], tirx.Ramp(indices[-1], tirx.const(1, str(indices[-1].ty.dtype)), lanes)]
    return buffer, indices, dtype if lanes == 1 else f"{dtype}x{lanes}"


def _load(bits: int, scope: str, src: Any, pred: Any) -> Any:
    what = f"T.ld{scope}{bits}"
    buffer, indices, _ = _access(what, src, bits)
    value = tirx.reinterpret(_word_type(bits), tirx.BufferLoad(buffer, indices))
    if pred is None:
        return value
    zero = tirx.const(0, "uint32") if bits == 32 else tirx.Broadcast(tirx.const(0, "uint32"), bits // 32)
    return tirx.if_then_else(pred, value, zero)


def _store(bits: int, scope: str, dst: Any, value: Any, pred: Any) -> None:
    what = f"T.st{scope}{bits}"
    buffer, indices, vector = _access(what, dst, bits)
    kind = tvm.DataType(str(getattr(getattr(value, "ty", None), "dtype", "")) or "void")
    if kind.bits * kind.lanes != bits:
        raise LanguageError(f"{what}: the value must be {bits} bits ({_word_type(bits)}, e.g. from "
                            f"T.ld{scope}{bits}), got {value!r} of type {kind}")
    data = tirx.reinterpret(vector, value)
    if pred is None:
        _ib.buffer_store(buffer, data, indices)
        return
    with _ib.If(pred), _ib.Then():
        _ib.buffer_store(buffer, data, indices)


def _loader(bits: int, scope: str) -> Any:
    def load(src: Any, pred: Any = None) -> Any:
        return _load(bits, scope, src, pred)

    load.__name__ = f"ld{scope}{bits}"
    load.__doc__ = f"The {bits} bits at ``src`` as {_word_type(bits)} (zeros where ``pred`` is false)."
    return load


def _storer(bits: int, scope: str) -> Any:
    def store(dst: Any, value: Any, pred: Any = None) -> None:
        _store(bits, scope, dst, value, pred)

    store.__name__ = f"st{scope}{bits}"
    store.__doc__ = f"Store the {bits} bits of ``value`` at ``dst`` (nothing where ``pred`` is false)."
    return store


ldg32, ldg64, ldg128, ldg256 = (_loader(b, "g") for b in _WIDTHS)
stg32, stg64, stg128, stg256 = (_storer(b, "g") for b in _WIDTHS)
lds32, lds64, lds128 = (_loader(b, "s") for b in _WIDTHS[:3])
sts32, sts64, sts128 = (_storer(b, "s") for b in _WIDTHS[:3])


def __ldg(value: Any) -> Any:
    """CUDA's read-only cache load: the value itself (see the module doc)."""
    return value


NAMES = ("ldg32", "ldg64", "ldg128", "ldg256", "stg32", "stg64", "stg128", "stg256",
         "lds32", "lds64", "lds128", "sts32", "sts64", "sts128", "__ldg")
