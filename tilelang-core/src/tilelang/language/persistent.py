"""``T.Persistent``: upstream TileLang's persistent tile loop (a rasterized tile scheduler).

A persistent kernel launches about one block per SM and walks the output tiles in waves::

    with T.Kernel(sm_num, threads=256) as block_id:
        for bx, by in T.Persistent([T.ceildiv(M, bM), T.ceildiv(N, bN)], sm_num, block_id):
            ...                                   # one output tile

Wave ``w`` gives block ``index`` the tile ``w * wave_size + index`` of the domain in
*grouped* order (upstream's, for L2 reuse): the last dimension is cut into groups of
``group_size`` columns; inside a group the last coordinate runs fastest, then the others
(first dimension slowest), then the group. So for a 2-D domain ``[m, n]`` and group ``g``:
``by = (t // g // m) * g + t % g`` and ``bx = (t // g) % m`` — the same tile order as
upstream's hand-written spelling (``for w in T.serial(waves)`` with the guard
``bx * bM < M and by * bN < N``).

It is a plain loop over ``ceildiv(padded tiles, wave_size)`` waves whose body binds the
coordinates and runs only where the last coordinate lies inside the domain: that guard
covers both the group padding (the last dimension need not be a multiple of the group) and
the tiles past the end in the last wave. Upstream additionally breaks out of the loop past
the end; a guard does the same work here (the padded tail is shorter than one wave), and a
loop without ``break`` keeps every block's sequence of tiles statically known, which the
CUDA backend's producer warp replays.

The parser sees a ``T.grid`` over marker extents (as for ``T.Parallel``); the frontend's
``expand_persistent_loops`` turns the nest into that loop right after parsing, so every
backend runs it as ordinary loops and conditions.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import tirx as _ib
from tvm.sym.analyzer import Analyzer
from tvm.tirx import call_intrin

from ..errors import LanguageError, LanguageTypeError
from .ops import is_call_to

#: marks the extents of a T.Persistent nest until the frontend expands it; the operands are
#: (extent of this dimension, wave_size, index, group_size, dimension, number of dimensions)
PERSISTENT_EXTENT = "tl.persistent_extent"
tvm.ir.register_op_attr(PERSISTENT_EXTENT, "TCallEffectKind", tirx.CallEffectKind.Pure.value)
tvm.ir.register_op_attr(PERSISTENT_EXTENT, "TScriptPrinterName", "T.persistent_extent")

_DOC = "T.Persistent(domain, wave_size, index, group_size=8)"


def checked_integer(value: Any, what: str, minimum: int, doc: str = _DOC) -> Any:
    """``value`` as given, once it is an int of at least ``minimum`` or an integer expression
    (a constant one checked too); ``doc`` names the call in the errors."""
    if isinstance(value, bool) or value is None:
        raise LanguageTypeError(f"{doc}: {what} must be an integer or an integer expression, got {value!r}")
    if isinstance(value, int):
        if value < minimum:
            raise LanguageError(f"{doc}: {what} must be at least {minimum}, got {value}")
        return value
    dtype = str(getattr(value, "ty", getattr(value, "dtype", "")))
    if not isinstance(value, tirx.PrimExpr) or not dtype.startswith(("int", "uint")):
        raise LanguageTypeError(f"{doc}: {what} must be an integer or an integer expression, "
                                f"got {value!r} of type {dtype or type(value).__name__}")
    if isinstance(value, tirx.IntImm) and value.value < minimum:
        raise LanguageError(f"{doc}: {what} must be at least {minimum}, got {value.value}")
    return value


def _integer(value: Any, what: str, minimum: int) -> Any:
    """``value`` as an int32 expression; a constant below ``minimum`` is refused."""
    value = checked_integer(value, what, minimum)
    if isinstance(value, int):
        return tirx.IntImm("int32", value)
    return value if str(getattr(value, "ty", getattr(value, "dtype", ""))) == "int32" else tirx.Cast("int32", value)


def Persistent(domain: Any, wave_size: Any, index: Any, group_size: Any = 8) -> Any:
    """``for c0, c1, ... in T.Persistent(domain, wave_size, index, group_size=8)``: the tile
    coordinates (one per dimension of ``domain``) this block handles, wave by wave.

    ``domain``: the number of tiles along each dimension (a list); ``wave_size``: how many
    blocks run at once (usually the launch's block count, e.g. the SM count); ``index``: this
    block's index in the wave (``0 <= index < wave_size``); ``group_size``: the width of a
    rasterization group along the last dimension (clamped to ``[1, domain[-1]]`` as upstream
    does; ``None`` means no grouping, i.e. 1).
    """
    if isinstance(domain, (str, bytes)) or not isinstance(domain, (list, tuple, tvm_ffi.Array)):
        raise LanguageTypeError(f"{_DOC}: domain must be a list of tile counts, one per loop variable "
                                f"(e.g. [T.ceildiv(M, block_M), T.ceildiv(N, block_N)]), got {domain!r}")
    if len(domain) == 0:
        raise LanguageError(f"{_DOC}: domain is empty; give the number of tiles along each dimension")
    extents = [_integer(d, f"domain[{i}]", 0) for i, d in enumerate(domain)]
    wave = _integer(wave_size, "wave_size", 1)
    at = _integer(index, "index", 0)
    group = tirx.IntImm("int32", 1) if group_size is None else _integer(group_size, "group_size", 1)
    count = len(extents)
    marked = [call_intrin("int32", PERSISTENT_EXTENT, e, wave, at, group, i, count) for i, e in enumerate(extents)]
    return _ib.grid(*marked)


def _dimension(loop: Any) -> tuple[int, int] | None:
    """(dimension, number of dimensions) when ``loop`` is a loop of a T.Persistent nest."""
    if not isinstance(loop, tirx.For) or not is_call_to(loop.extent, PERSISTENT_EXTENT):
        return None
    args = loop.extent.args
    return int(args[4].value), int(args[5].value)


def _expand(loop: Any) -> Any:
    """The T.Persistent nest starting at ``loop`` (its dimension 0) as the wave loop."""
    _, count = _dimension(loop)
    loops = [loop]
    while len(loops) < count:
        inner = loops[-1].body
        if _dimension(inner) != (len(loops), count):
            raise LanguageError(f"{_DOC}: the nest over {count} dimensions must bind one loop variable per "
                                f"dimension (`for {', '.join(f'c{i}' for i in range(count))} in T.Persistent(...)`)")
        loops.append(inner)
    _, wave, index, group = (loops[0].extent.args[i] for i in range(4))
    domain = [lp.extent.args[0] for lp in loops]
    last = domain[-1]
    group = tirx.Max(tirx.IntImm("int32", 1), tirx.Min(group, last))
    # the domain in grouped order: (groups, d0, ..., d[n-2], position in the group)
    grouped = [tirx.ceildiv(last, group), *domain[:-1], group]
    padded = grouped[0]
    for extent in grouped[1:]:
        padded = padded * extent
    analyzer = Analyzer()
    w = tirx.Var("w", "int32")
    rest = w * wave + index
    in_group = tirx.floormod(rest, group)
    rest = tirx.floordiv(rest, group)
    coords = [None] * count
    for i in range(count - 2, -1, -1):
        coords[i] = tirx.floormod(rest, domain[i])
        rest = tirx.floordiv(rest, domain[i])
    coords[-1] = rest * group + in_group
    variables = [lp.loop_var for lp in loops]
    binds = [tirx.Bind(v, analyzer.simplify(c)) for v, c in zip(variables, coords)]
    guarded = tirx.IfThenElse(variables[-1] < last, loops[-1].body, None)
    waves = analyzer.simplify(tirx.ceildiv(padded, wave))
    return tirx.For(w, tirx.IntImm("int32", 0), waves, tirx.ForKind.SERIAL, tirx.SeqStmt([*binds, guarded]))


def expand_persistent_loops(body: Any) -> Any:
    """Every T.Persistent nest in ``body`` as its wave loop (see the module docstring)."""

    def on_for(loop: Any) -> Any:
        found = _dimension(loop)
        return _expand(loop) if found is not None and found[0] == 0 else loop

    return tvm_ffi.structural_map(body, (tirx.For, on_for), order="post")


__all__ = ["PERSISTENT_EXTENT", "Persistent", "expand_persistent_loops"]
