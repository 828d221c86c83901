"""Upstream TileLang names this language does not provide, each with what to write instead.

Kernels written for upstream TileLang reach for Hopper/Blackwell primitives (TMA, mbarriers,
warp specialization, TMEM, tcgen05). Those not implemented here make ``T.<name>`` raise a
LanguageError that says so and names the replacement, instead of a bare AttributeError. ``tilelang.language``
takes this module's ``__getattr__`` as its own (Python looks a module's missing attributes
up there, PEP 562); names not listed here still raise AttributeError, so ``hasattr`` and
TVMScript's own probing keep working.
"""

from __future__ import annotations

from ..errors import LanguageError

_PIPELINE_ADVICE = ("write the copies as T.copy inside a T.Pipelined(n, num_stages=s) loop: the CUDA "
                    "backend pipelines them itself (on sm_90 with TMA boxes, mbarriers, a producer warp "
                    "and wgmma; cp.async stage rings elsewhere)")
_HOPPER = "a Hopper (sm_90) primitive this TileLang does not implement yet"
_BLACKWELL = "a Blackwell (sm_100) primitive this TileLang does not implement yet"

#: name -> (what it is, what to write instead)
_UNSUPPORTED: dict[str, tuple[str, str]] = {}


def _add(names: str, what: str, advice: str) -> None:
    for name in names.split():
        _UNSUPPORTED[name] = (what, advice)


_add("tma_load tma_load_2sm tma_gather4 tma_gather4_bytes tma_scatter4 "
     "create_tma_descriptor",
     _HOPPER, _PIPELINE_ADVICE)
_add("ptx_arrive_cluster_barrier",
     f"{_HOPPER} (barriers across a cluster's blocks; T.ClusterKernel with T.cluster_sync() is provided)",
     "use T.cluster_sync() for a cluster-wide barrier or T.sync_threads() for a block-wide one; for "
     "producer/consumer overlap, " + _PIPELINE_ADVICE)
_add("ws_op WSID WSRole WSPipeline WSInstr WSOpRef WSSync WSSyncKind WSScope WSSchedule "
     "annotate_ws_schedule",
     f"{_HOPPER} (warp specialization)",
     "write the roles with T.ws(k), T.alloc_barrier and T.tma_copy, or without warp roles: " + _PIPELINE_ADVICE)
_add("alloc_descriptor alloc_wgmma_desc increase_descriptor_offset",
     _HOPPER, "use T.gemm on shared tiles inside T.Pipelined: the CUDA backend selects wgmma on sm_90 itself")
_add("alloc_tmem deallocate_tmem tcgen05_gemm tcgen05_gemm_blockscaled tcgen05_mma_arrive "
     "tcgen05_sf_warp_transpose tcgen05_cp_warpx4 alloc_tcgen05_smem_desc alloc_tcgen05_instr_desc "
     "alloc_tcgen05_instruction_desc",
     _BLACKWELL, "use T.gemm into a T.alloc_fragment accumulator")
_add("clc_try_cancel clc_try_cancel_multicast clc_is_canceled clc_get_first_ctaid_x",
     f"{_BLACKWELL} (cluster launch control)", "launch a persistent grid with T.Kernel and T.PersistentTileScheduler")


def unsupported_names() -> list[str]:
    """Every upstream name this module explains (sorted)."""
    return sorted(_UNSUPPORTED)


def __getattr__(name: str) -> object:
    entry = _UNSUPPORTED.get(name)
    if entry is None:
        raise AttributeError(f"module 'tilelang.language' has no attribute {name!r}")
    what, advice = entry
    raise LanguageError(f"T.{name} is {what}; {advice}")
