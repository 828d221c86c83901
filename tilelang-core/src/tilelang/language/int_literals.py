"""Python integer literals in bitwise and shift operators, read in the expression's type.

``n & 0xFFFFFFFF`` with ``n: T.uint32`` is upstream's way of writing a mask (upstream issue
tile-ai/tilelang#1299). TVM 0.27's ``&``, ``|``, ``^``, ``<<`` and ``>>`` pass a Python
``int`` operand to C++ as a 32-bit C ``int`` before making a constant of the other
operand's type, so a literal outside ``[-2**31, 2**31)`` loses its high bits:
``uint32 & 0xFFFFFFFF`` fails ("cannot make uint from negative value -1") and, silently,
``int64 ^ 0x100000000`` becomes ``x ^ 0``.

``install()`` wraps those ten operators (``tvm.ir._overload_prim_expr``, which every
expression's Python operators call, in a kernel body and outside one alike). For an
integer-typed expression the literal becomes a constant of that expression's type, with
C's conversions where the literal is written for the other signedness of the same width:

* a value of the type's range is itself (``uint32 & 0xFFFFFFFF``, ``int64 & 2**63 - 1``);
* a signed type takes the two's-complement pattern of an unsigned-range literal
  (``int32 & 0xFFFFFFFF`` is ``& -1``, as TVM already did);
* an unsigned type wraps a negative literal (``uint32 & -1`` is ``& 0xFFFFFFFF``, C's
  ``(uint32_t)-1``);
* a literal wider than the type is a LanguageError: truncating it would change the program.

Literals TVM already reads correctly (inside ``int32``'s range, for a signed type or a
non-negative one) and non-integer operands take TVM's own path, unchanged.
"""

from __future__ import annotations

from typing import Any

from ..errors import LanguageError

#: Python operator name -> its symbol, for messages
_OPERATORS = {"and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
_INT32_MIN, _INT32_END = -(2 ** 31), 2 ** 31
_INSTALLED = False


def _is_integer_dtype(dtype: Any) -> bool:
    return dtype.type_code in (0, 1)  # DataTypeCode.INT, DataTypeCode.UINT (bool has a code of its own)


def _literal_in_dtype(value: int, expr: Any, symbol: str) -> Any:
    """``value`` as a constant of ``expr``'s integer type (its lanes' type, broadcast to a
    vector's lanes), following the conversions in the module's docstring."""
    from tvm import DataType, tirx

    full = DataType(str(expr.ty.dtype))
    scalar = full.with_lanes(1) if full.lanes > 1 else full
    bits, unsigned = scalar.bits, scalar.type_code == 1
    if not -(2 ** (bits - 1)) <= value < 2 ** bits:
        raise LanguageError(
            f"the literal {value:#x} in `{symbol}` does not fit {scalar} (the type of {expr}); "
            f"cast the expression to a wider type (T.Cast('int64', x)) or use a literal of "
            f"{bits} bits"
        )
    if unsigned and value < 0:
        value += 2 ** bits  # C's conversion of a negative value to an unsigned type
    elif not unsigned and value >= 2 ** (bits - 1):
        value -= 2 ** bits  # the two's-complement pattern, as C reads 0xFFFFFFFF into int32
    if unsigned and value >= 2 ** 63:
        # TVM's integer constants are int64 inside: the upper half of uint64 is a bit pattern
        const = tirx.reinterpret(str(scalar), tirx.const(value - 2 ** 64, "int64"))
    else:
        const = tirx.const(value, str(scalar))
    return tirx.Broadcast(const, full.lanes) if full.lanes > 1 else const


def _needs_help(value: Any, expr: Any) -> bool:
    """Whether TVM would misread the Python int ``value`` against ``expr``."""
    from tvm.ir.expr import is_prim_expr

    if isinstance(value, bool) or not isinstance(value, int) or not is_prim_expr(expr):
        return False
    if not _is_integer_dtype(expr.ty.dtype):
        return False
    unsigned = expr.ty.dtype.type_code == 1
    return not _INT32_MIN <= value < _INT32_END or (unsigned and value < 0)


def _wrap(original: Any, symbol: str, reflected: bool) -> Any:
    def operator(self: Any, other: Any) -> Any:
        if _needs_help(other, self):
            other = _literal_in_dtype(other, self, symbol)
        return original(self, other)

    operator.__name__ = getattr(original, "__name__", "operator")
    operator.__doc__ = (f"`{symbol}` with a Python int read in the expression's type "
                        f"({'reflected; ' if reflected else ''}tilelang.language.int_literals)")
    operator._tilelang_int_literals = True  # type: ignore[attr-defined]
    return operator


def install() -> None:
    """Wrap TVM's bitwise and shift operators (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from tvm.ir import _overload_prim_expr as overloads

    for name, symbol in _OPERATORS.items():
        for dunder, reflected in ((f"__{name}__", False), (f"__r{name}__", True)):
            original = getattr(overloads, dunder)
            if not getattr(original, "_tilelang_int_literals", False):
                setattr(overloads, dunder, _wrap(original, symbol, reflected))
    _INSTALLED = True
