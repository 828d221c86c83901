"""T.copy of part of an accumulator, for the tensor-core pass: upstream's GQA decoding keeps
64 rows of C (a tensor-core tile) for the 4 heads a KV head serves, and writes back only
those (``T.copy(acc_o[:valid_block_H, :], O_shared)``).

A thread holds C's elements at the positions its layout gives, not at the copy's loop
indices, so the copy becomes a nest over the whole of C (which the pass maps onto the
thread's own elements) guarded to the part."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import FRAGMENT_SCOPE, is_full_region, static_ints, substitute
from tvm import tirx


def copied_part(args: Any, part: Any) -> list[tuple[int, int]] | None:
    """(start, extent) per axis of ``part``, the region of a 2-d fragment that a T.copy
    (``args``) reads or writes, when the copy can be a guarded nest over the fragment: a
    static box of at least 2 x 2 inside it, and the other side a memory region whose axes
    longer than 1 are the box's extents in order (so the copy's loops are the box's axes).
    None otherwise, and for the whole fragment."""
    if is_full_region(part):
        return None
    shape = static_ints(part.source.shape)
    mins = static_ints([r.min for r in part.region])
    extents = static_ints([r.extent for r in part.region])
    if shape is None or mins is None or extents is None or len(shape) != 2 or min(extents) < 2 or \
            any(lo + n > d for lo, n, d in zip(mins, extents, shape)):
        return None
    other = args[1] if args[0].same_as(part) else args[0]
    if other.source.scope() == FRAGMENT_SCOPE:
        return None
    other_extents = static_ints([r.extent for r in other.region])
    if other_extents is None or [n for n in other_extents if n != 1] != extents:
        return None
    return list(zip(mins, extents))


def over_whole_fragment(loops: list[Any], inner: Any, box: list[tuple[int, int]], shape: list[int]) -> Any:
    """The lowered copy's nest (``loops`` over the box's axes, ``inner`` addressing the
    fragment at start + loop index) as a nest over the fragment's ``shape``, each loop
    index now the fragment's own, the body guarded to the box."""
    pairs, guard = [], None
    for loop, (start, extent) in zip(loops, box):
        var = loop.loop_var
        pairs.append((var, var - start))
        cond = tirx.And(var >= start, var < start + extent) if start else var < extent
        guard = cond if guard is None else tirx.And(guard, cond)
    body = tirx.IfThenElse(guard, substitute(inner, pairs), None)
    for loop, extent in reversed(list(zip(loops, shape))):
        body = tirx.For(loop.loop_var, 0, extent, loop.kind, body)
    return body
