"""``T.ext.swizzled_shared``: store a shared tile in a CuTe swizzled layout.

CuTe's ``Swizzle<B, M, S>`` XORs B bits of an element offset, taken from bit M+S up, into
the bits from M up: consecutive rows of a tile then start in different shared-memory banks,
so column accesses by a warp stop conflicting (CUTLASS, "cute/swizzle.hpp"; the 32 banks of
4 bytes of the CUDA C Programming Guide, "Shared Memory"). Every access goes through the
same layout, so results never change: only where elements live. The CUDA backend has no
such storage, so a kernel using it compiles on cutedsl only (routed there by core).
"""

from __future__ import annotations

from typing import Any

from tilelang.plugin import LanguageError, extension_call

SHARED_SCOPES = ("shared", "shared.dyn")


def swizzled_shared(buffer: Any, bits: int = 3, base: int = 3, shift: int = 3) -> None:
    """Mark ``buffer`` (a T.alloc_shared tile) to be stored as Swizzle<bits, base, shift>
    over its flat element offset (default 3, 3, 3: 8-element units over 8 rows of 64)."""
    from tvm import tirx
    from tvm.script.ir_builder import tirx as ib

    if not isinstance(buffer, tirx.Buffer) or buffer.scope() not in SHARED_SCOPES:
        raise LanguageError(f"T.ext.swizzled_shared: expected a shared tile (T.alloc_shared), got {buffer!r}")
    for name, value in (("bits", bits), ("base", base), ("shift", shift)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 8:
            raise LanguageError(f"T.ext.swizzled_shared: {name} must be an int in 0..8, got {value!r}")
    if shift < bits:
        raise LanguageError(f"T.ext.swizzled_shared: shift ({shift}) must be at least bits ({bits}), "
                            "or the XOR would read the bits it writes")
    import tvm

    ib.evaluate(extension_call("swizzled_shared", tvm.ir.StringImm(buffer.name),
                               tirx.const(bits, "int32"), tirx.const(base, "int32"), tirx.const(shift, "int32")))
