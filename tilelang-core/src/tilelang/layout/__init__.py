"""Layouts for ``T.annotate_layout``, with upstream TileLang's spelling and modules
(``tilelang.layout.layout``, ``.fragment``, ``.swizzle``): ``T.Layout(shape, forward_fn)``,
``T.Fragment(shape, forward_thread_fn=..., forward_index_fn=...)`` and the swizzled layouts
of shared tiles (``make_swizzled_layout(buffer)``, the full/half/quarter-bank ones).

The compiler chooses layouts itself (fragments follow their instructions, shared tiles that
feed tensor cores are laid out bank-conflict free). What a kernel can ask for:

* ``make_swizzled_layout(A_shared)`` (or a bank swizzle, see tilelang.layout.swizzle): the
  bank-conflict-free layout of a shared tile the compiler would otherwise keep row-major;
  backends with banked shared memory (CUDA) give it one of their choosing, others keep
  their layout, which never changes results.
* a ``Layout`` equal to the buffer's own row-major order (``lambda *i: i``): honoured as is.
  Another one-to-one map on an on-chip tile (``lambda i: i ^ 1``) is accepted and not
  followed, with a warning: the tile stays row-major, which never changes results (every
  access goes through the language). A many-to-one map is refused, naming two elements it
  sends to one address, as upstream refuses it. A map the check cannot enumerate (a symbolic
  shape, over 2**20 elements, an operation it does not evaluate) is refused as before:
  storing a tile in an arbitrary order is not implemented.
* a ``Fragment`` on a ``T.alloc_fragment`` buffer: accepted as a hint and not followed —
  each backend places fragment elements in the layout of the instructions that use them
  (the CPU keeps a fragment as an ordinary array), which never changes results.

``Layout`` and ``Fragment`` evaluate their maps (``map_forward_index``,
``map_forward_thread``, ``get_output_shape``), so kernels and tests can inspect them, and
tilelang.tools.plot_layout draws them.
"""

from __future__ import annotations

from typing import Any

from .fragment import (
    Fragment,
    make_fully_replicated_layout_fragment,
    make_gemm_fragment_8x8,
    make_gemm_fragment_8x8_transposed,
)
from .layout import _UNKNOWN, Layout, _first_collision, make_linear_layout
from .swizzle import (
    SwizzledLayout,
    make_full_bank_swizzled_layout,
    make_half_bank_swizzled_layout,
    make_quarter_bank_swizzled_layout,
    make_swizzled_layout,
    make_wgmma_swizzled_layout,
)


def accepted_as_is(buffer: Any, layout: Any) -> bool:
    """For ``T.annotate_layout``: True when ``layout`` needs nothing done to ``buffer`` (a
    row-major Layout, a Fragment hint on a fragment); False when it is not a Layout at all;
    a LanguageError with the reason when it is one that cannot be honoured."""
    from ..errors import LanguageError

    if not isinstance(layout, Layout):
        return False
    where = f"T.annotate_layout: the {type(layout).__name__} given for {buffer.name!r}"
    scope = buffer.scope()
    if isinstance(layout, Fragment):
        if scope == "local.fragment":
            return True
        raise LanguageError(f"{where}: a Fragment describes registers of a T.alloc_fragment buffer, but "
                            f"{buffer.name!r} is a {scope} buffer; use a Layout, or drop the annotation")
    if layout.is_identity_for(buffer.shape):
        return True
    if scope != "global":
        collision = _first_collision(layout)
        if collision is not None and collision is not _UNKNOWN:
            a, b, at = collision
            raise LanguageError(f"{where}: the Layout of shared buffer `{buffer.name}` must be injective: elements "
                                f"{a} and {b} both map to physical coordinates {at}, so one would overwrite the "
                                "other; give each element its own storage index, or drop the annotation")
        if collision is None:
            import warnings

            warnings.warn(f"{where}: {buffer.name!r} is stored row-major, not in the order the Layout gives "
                          f"({layout.forward_index}); an on-chip tile's storage order never changes results "
                          "here, only its bank conflicts (tilelang.layout.make_swizzled_layout asks for a "
                          "bank-conflict-free one)", stacklevel=4)
            return True
    # (a global tensor's Layout is applied: language/tile.py, transform/global_layouts.py)
    advice = ("use tilelang.layout.make_swizzled_layout(buffer) for a bank-conflict-free shared tile, "
              "or drop the annotation: results never depend on an on-chip tile's storage order")
    raise LanguageError(f"{where} maps {layout.shape} to {layout.forward_index}; storing a {scope} buffer "
                        f"in an order other than row-major is not implemented; {advice}")



__all__ = [
    "Fragment",
    "Layout",
    "SwizzledLayout",
    "accepted_as_is",
    "make_full_bank_swizzled_layout",
    "make_fully_replicated_layout_fragment",
    "make_gemm_fragment_8x8",
    "make_gemm_fragment_8x8_transposed",
    "make_half_bank_swizzled_layout",
    "make_linear_layout",
    "make_quarter_bank_swizzled_layout",
    "make_swizzled_layout",
    "make_wgmma_swizzled_layout",
]
