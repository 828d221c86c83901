"""When the intra-warpgroup overlap (gemm_overlap.py) is on: by default, where it pays.

``tl.intra_warpgroup_overlap`` True or False forces the schedule on or off. Left unset, a
kernel gets it when it applies and pays, as upstream TileLang's users expect of a plain
T.Pipelined + T.copy + T.gemm flash-attention kernel: the passes from the tensor-core
lowering to the overlap run once with it on, and their result is kept when

- some consumer loop was rotated (its second GEMM issued under the next iteration), and
- every warp-specialized TMA ring of the kernel either gave its operands barriers of their
  own (cp_async._operand_groups: K free as soon as S is done) or has 3 or more stages.

On the H200 (flash attention, head dim 128, 128 x 128 tiles, 256 threads), 2 stages with
the overlap but one barrier pair ran at 0.64x SDPA against 0.90x without the overlap: the
producer waits for a stage that only the next iteration's P V frees. With the K/V split it
ran at 0.99x, and 3 stages with the overlap at 0.91 against 0.85.

Otherwise, when the trial changed something (a ring split, a loop rotated), the same
passes run again with the overlap off: a kernel it does not fit compiles exactly as it
would have with ``tl.intra_warpgroup_overlap`` False (a split ring without the overlap
costs the 9-warp block spills). A kernel the trial left unchanged (one GEMM per loop, no
ring) is lowered once.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang.plugin import pass_config

OVERLAP_CONFIG = "tl.intra_warpgroup_overlap"


@dataclass
class OverlapTrial:
    """What one trial lowering with the overlap on did."""

    rings: list[tuple[int, bool]] = field(default_factory=list)  # (stages, operand groups) per specialized ring
    rotated: int = 0  # consumer loops whose second GEMM was shifted

    def changed(self) -> bool:
        return self.rotated > 0 or any(split for _, split in self.rings)

    def pays(self) -> bool:
        return self.rotated > 0 and bool(self.rings) and all(split or stages >= 3 for stages, split in self.rings)


_TRIAL: contextvars.ContextVar[OverlapTrial | None] = contextvars.ContextVar("tl_cuda_overlap_trial", default=None)
_FORCED_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("tl_cuda_overlap_forced_off", default=False)


def overlap_on() -> bool:
    """Whether the passes lower for the overlap now: the pass config when it is set, else
    within a trial (``OverlapWherePays``) and not in its second, overlap-free run."""
    value = pass_config(OVERLAP_CONFIG, None)
    if value is not None:
        return bool(value)
    return _TRIAL.get() is not None and not _FORCED_OFF.get()


def record_ring(stages: int, split: bool) -> None:
    trial = _TRIAL.get()
    if trial is not None:
        trial.rings.append((stages, split))


def record_rotation() -> None:
    trial = _TRIAL.get()
    if trial is not None:
        trial.rotated += 1


def OverlapWherePays(passes: Sequence[Any]) -> Any:
    """``passes`` (the tensor-core lowering up to OverlapSecondGemm) as one module pass that
    decides the overlap when its pass config is unset (module docstring)."""
    import tvm

    def run(mod: Any, ctx: Any) -> Any:
        sequence = tvm.transform.Sequential(list(passes), name="tl.cuda.overlap_trial")
        if pass_config(OVERLAP_CONFIG, None) is not None:
            return sequence(mod)
        trial = OverlapTrial()
        token = _TRIAL.set(trial)
        try:
            lowered = sequence(mod)
            if trial.pays() or not trial.changed():
                return lowered
            off = _FORCED_OFF.set(True)
            try:
                return sequence(mod)
            finally:
                _FORCED_OFF.reset(off)
        finally:
            _TRIAL.reset(token)

    return tvm.transform.module_pass(run, opt_level=0, name="tl.cuda.OverlapWherePays")


__all__ = ["OVERLAP_CONFIG", "OverlapTrial", "OverlapWherePays", "overlap_on", "record_ring", "record_rotation"]
