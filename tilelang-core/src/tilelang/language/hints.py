"""Upstream scheduling hints.

``T.annotate_min_blocks_per_sm(n)`` asks that n blocks of the kernel fit on one SM at
once (CUDA's second ``__launch_bounds__`` argument, which caps registers per thread). It
is recorded on the function (:data:`MIN_BLOCKS_PER_SM_ATTR`); a backend whose kernels take
the bound applies it to each kernel it splits off, others ignore it.

``T.annotate_l2_hit_ratio({A: 0.8})`` asks that a tensor parameter's lines stay in the
GPU's L2 cache (CUDA's persisting access-policy window, on the launch's stream, for this
kernel's launches). It is recorded on the function (:data:`L2_HIT_RATIO_ATTR`); the
artifact carries it, and a target backend that has such windows sets one around each
launch (CUDA: ``tilelang/cuda/l2_window.py``); elsewhere it is a hint that changes no
result, ignored with a warning.

The others are requests this TileLang already fulfils:

``T.disable_warp_group_reg_alloc()`` (alias ``T.no_set_max_nreg()``) asks upstream's
warp-specialized lowering not to rebalance registers between warpgroups with
``setmaxnreg``. The automatic warp specialization here (a producer warp beside the
consumers) never rebalances registers, and ``setmaxnreg`` is emitted only where a kernel
writes ``T.set_max_nreg`` itself, so the request holds by construction and the call emits
nothing.

``T.annotate_restrict_buffers(x, y)`` says that those tensor parameters may overlap (two
slices of one tensor): the kernel's parameters are then not declared free of aliases
(TVM's ``tirx.noalias`` function attribute is False, so CUDA drops ``__restrict__``, the C
backends ``restrict``). It applies to all parameters, a superset of upstream's per-buffer
choice: a missing ``__restrict__`` only forgoes an optimization.

``T.annotate_producer_reg_dealloc(n)`` / ``T.annotate_consumer_reg_alloc(n)`` ask upstream's
lowering to give a warp-specialized kernel's producer fewer registers and its consumers
more (``setmaxnreg``). They are performance requests: the registers stay as the compiler
allocates them (``T.set_max_nreg`` inside a ``T.ws`` role is how to move them here), and
the calls emit nothing.
"""

from __future__ import annotations

from typing import Any

from ..errors import LanguageError
from .ops import L2_HIT_RATIO_ATTR, MIN_BLOCKS_PER_SM_ATTR, NOALIAS_ATTR


def annotate_min_blocks_per_sm(num_blocks: Any) -> None:
    """``T.annotate_min_blocks_per_sm(2)``, inside ``T.Kernel``: at least that many blocks
    resident per SM (registers are limited to make room)."""
    from tvm import tirx

    from .kernel import _ACTIVE

    if isinstance(num_blocks, tirx.IntImm):
        num_blocks = int(num_blocks.value)
    if not isinstance(num_blocks, int) or isinstance(num_blocks, bool) or num_blocks < 1:
        raise LanguageError(f"T.annotate_min_blocks_per_sm: the block count must be a positive constant int, "
                            f"got {num_blocks!r}")
    if not _ACTIVE:
        raise LanguageError("T.annotate_min_blocks_per_sm is only valid inside a T.Kernel frame")
    _ACTIVE[-1].function_attrs[MIN_BLOCKS_PER_SM_ATTR] = tirx.const(num_blocks, "int32")  # set as it closes


def annotate_l2_hit_ratio(l2_hit_ratio_map: Any) -> None:
    """``T.annotate_l2_hit_ratio({A: 0.8})``, inside ``T.Kernel``: keep that fraction of the
    tensor parameter A's accesses in L2's persisting lines while the kernel runs (upstream's
    spelling). The tensor must be one the call passes (not an output the call allocates);
    a ratio is a number in (0, 1]. A stream holds one window: with several tensors, the
    last one named applies (as upstream's, which sets them one after another)."""
    from tvm import tirx

    from .kernel import _ACTIVE

    what = "T.annotate_l2_hit_ratio"
    if not isinstance(l2_hit_ratio_map, dict) or not l2_hit_ratio_map:
        raise LanguageError(f"{what} takes a dict {{tensor: hit ratio}}, got {l2_hit_ratio_map!r}")
    if not _ACTIVE:
        raise LanguageError(f"{what} is only valid inside a T.Kernel frame")
    ratios: dict[str, Any] = {}
    for buffer, ratio in l2_hit_ratio_map.items():
        if not isinstance(buffer, tirx.Buffer) or buffer.scope() != "global":
            raise LanguageError(f"{what}: a key must be a tensor parameter (global memory), got {buffer!r}"
                                + (f" in {buffer.scope()!r} memory" if isinstance(buffer, tirx.Buffer) else ""))
        if isinstance(ratio, tirx.FloatImm | tirx.IntImm):
            ratio = ratio.value
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
            raise LanguageError(f"{what}: the hit ratio of {buffer.name!r} must be a number in (0, 1], "
                                f"got {ratio!r}")
        ratios[buffer.name] = tirx.FloatImm("float32", float(ratio))
    attrs = _ACTIVE[-1].function_attrs
    attrs[L2_HIT_RATIO_ATTR] = {**attrs.get(L2_HIT_RATIO_ATTR, {}), **ratios}  # set as it closes


def disable_warp_group_reg_alloc() -> None:
    """Keep the register allocation the compiler chose for every warpgroup (always the case here)."""
    return


no_set_max_nreg = disable_warp_group_reg_alloc


def _reg_count(name: str, reg_count: Any) -> None:
    if not isinstance(reg_count, int) or isinstance(reg_count, bool) or not 24 <= reg_count <= 256 or reg_count % 8:
        raise LanguageError(f"T.{name}({reg_count!r}): the register count must be a multiple of 8 from 24 to 256")


def annotate_producer_reg_dealloc(reg_count: int = 24) -> None:
    """A request to shrink the producer's registers to ``reg_count``: kept as allocated here."""
    _reg_count("annotate_producer_reg_dealloc", reg_count)


def annotate_consumer_reg_alloc(reg_count: int = 240) -> None:
    """A request to grow the consumers' registers to ``reg_count``: kept as allocated here."""
    _reg_count("annotate_consumer_reg_alloc", reg_count)


def annotate_restrict_buffers(*buffers: Any) -> None:
    """``T.annotate_restrict_buffers(x, y)``: the tensors ``x`` and ``y`` may overlap, so no
    parameter is promised free of aliases (see the module doc)."""
    from tvm import tirx
    from tvm.script.ir_builder import tirx as _ib

    from .kernel import _ACTIVE

    for buffer in buffers:
        if not isinstance(buffer, tirx.Buffer) or buffer.scope() != "global":
            raise LanguageError(f"T.annotate_restrict_buffers: {getattr(buffer, 'name', buffer)!r} is not a tensor "
                                "parameter; name the kernel's tensors that may overlap")
    if not buffers:
        return
    if _ACTIVE:
        _ACTIVE[-1].function_attrs[NOALIAS_ATTR] = False  # set as it closes
    else:
        _ib.func_attr({NOALIAS_ATTR: False})
