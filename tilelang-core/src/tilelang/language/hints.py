"""Upstream scheduling hints whose request this TileLang already fulfils.

``T.disable_warp_group_reg_alloc()`` (alias ``T.no_set_max_nreg()``) asks upstream's
warp-specialized lowering not to rebalance registers between warpgroups with
``setmaxnreg``. The automatic warp specialization here (a producer warp beside the
consumers) never rebalances registers, and ``setmaxnreg`` is emitted only where a kernel
writes ``T.set_max_nreg`` itself, so the request holds by construction and the call emits
nothing.
"""

from __future__ import annotations


def disable_warp_group_reg_alloc() -> None:
    """Keep the register allocation the compiler chose for every warpgroup (always the case here)."""
    return None


no_set_max_nreg = disable_warp_group_reg_alloc
