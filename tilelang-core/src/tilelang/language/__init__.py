"""The backend-neutral TileLang language: ``import tilelang.language as T``.

It is TVMScript's ``tirx`` surface plus TileLang's own spelling (``T.Kernel``,
``T.Parallel``, ``T.Tensor``, ``T.alloc_shared`` ...). Backend dialects compose it:
``from tilelang.cuda import language as T``.

Importing it imports no TVM: the names are defined in ``_surface`` (add new ones there, and
to ``__all__`` here) and load the first time one is read (PEP 562), so a module that imports
the language at its top and gets its kernel from the disk cache (tilelang.jit.request_key)
never imports TVM.
"""

import importlib as _importlib
import sys as _sys

from .unsupported import __getattr__ as _unsupported

_SURFACE = __name__ + "._surface"
#: the module's own attributes, which publishing the surface leaves alone
_OWN = frozenset({"__name__", "__doc__", "__file__", "__loader__", "__spec__", "__package__",
                  "__builtins__", "__cached__", "__path__", "__all__", "__getattr__", "__dir__"})


def _load_surface():
    """The surface module; published into this package once it has loaded completely.
    While it loads, a submodule that reads a name gets it from the partial module, as it
    would have from a partial package."""
    module = _sys.modules.get(_SURFACE)
    if module is None:
        module = _importlib.import_module(_SURFACE)
    if not getattr(module.__spec__, "_initializing", False):
        # from now on the names are plain attributes: __getattr__ only sees unknown names
        globals().update((k, v) for k, v in vars(module).items() if k not in _OWN)
    return module


def __getattr__(name: str) -> object:
    if name.startswith("__") and name.endswith("__"):  # protocol probes (T.__cos is a name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return vars(_load_surface())[name]
    except KeyError:
        return _unsupported(name)  # an upstream name with what to write instead, else AttributeError


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(vars(_load_surface())) - _OWN)


__all__ = [
    "annotate_consumer_reg_alloc",
    "annotate_producer_reg_dealloc",
    "annotate_restrict_buffers",
    "annotate_safe_value",
    "FragmentBuffer",
    "LocalBuffer",
    "SharedBuffer",
    "ptx_commit_group",
    "ptx_cp_async",
    "wait_wgmma",
    "ptx_wait_group",
    "ClusterKernel",
    "CUDASourceCodeKernel",
    "block_rank_in_cluster",
    "cluster_arrive",
    "cluster_arrive_relaxed",
    "cluster_sync",
    "cluster_wait",
    "pdl_sync",
    "pdl_trigger",
    "sync_grid",
    "__ldg",
    "ldg32",
    "ldg64",
    "ldg128",
    "ldg256",
    "lds32",
    "lds64",
    "lds128",
    "stg32",
    "stg64",
    "stg128",
    "stg256",
    "sts32",
    "sts64",
    "sts128",
    "Fragment",
    "GemmWarpPolicy",
    "Kernel",
    "Layout",
    "Parallel",
    "Persistent",
    "PersistentTileScheduler",
    "Pipelined",
    "Serial",
    "StridedTensor",
    "Tensor",
    "Unroll",
    "Vectorized",
    "__cos",
    "__ffs",
    "__fns",
    "__exp",
    "__exp10",
    "__log",
    "__log2",
    "__log10",
    "__sin",
    "__tan",
    "abs2",
    "access_ptr",
    "activemask",
    "add2",
    "align_up",
    "annotate_min_blocks_per_sm",
    "all_of",
    "all_sync",
    "alloc_barrier",
    "alloc_cluster_barrier",
    "alloc_fragment",
    "alloc_global",
    "alloc_local",
    "alloc_reducer",
    "alloc_shared",
    "alloc_var",
    "annotate_compile_flags",
    "annotate_layout",
    "annotate_pass_configs",
    "any_of",
    "any_sync",
    "atomic_add",
    "atomic_addx2",
    "atomic_addx4",
    "atomic_and",
    "atomic_load",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_store",
    "atomic_xor",
    "ballot",
    "fma2",
    "max2",
    "min2",
    "mul2",
    "sub2",
    "ballot_sync",
    "barrier_arrive",
    "cp_async_barrier_noinc",
    "barrier_wait",
    "async_copy",
    "c2d_im2col",
    "clamp",
    "dp4a",
    "clear",
    "const",
    "copy",
    "copy_cluster",
    "cummax",
    "cummin",
    "cumsum",
    "dec_max_nreg",
    "device_assert",
    "disable_warp_group_reg_alloc",
    "dtype",
    "dynamic",
    "empty",
    "ext",
    "extract_lane",
    "fill",
    "finalize_reducer",
    "gemm",
    "gemm_sp",
    "wgmma_gemm",
    "wgmma_gemm_sp",
    "get_block_binding",
    "get_lane_idx",
    "get_thread_binding",
    "get_warp_group_idx",
    "get_warp_idx",
    "get_warp_idx_sync",
    "ieee_add",
    "ieee_fdiv",
    "ieee_fmaf",
    "ieee_frcp",
    "ieee_frsqrt",
    "ieee_fsqrt",
    "ieee_mul",
    "ieee_sub",
    "im2col",
    "import_source",
    "infinity",
    "let",
    "inc_max_nreg",
    "make_tensor",
    "match_all_sync",
    "match_any_sync",
    "mbarrier_arrive",
    "mbarrier_arrive_expect_tx",
    "mbarrier_expect_tx",
    "mbarrier_wait_parity",
    "no_set_max_nreg",
    "prim_func",
    "print",
    "ptr",
    "reduce",
    "reduce_absmax",
    "reduce_abssum",
    "reduce_bitand",
    "reduce_bitor",
    "reduce_bitxor",
    "reduce_max",
    "reduce_min",
    "reduce_sum",
    "reducer_init",
    "reducer_update",
    "reinterpret",
    "reshape",
    "rng_init",
    "rng_rand",
    "rng_rand_float",
    "round",
    "serial",
    "set_max_nreg",
    "shfl_down",
    "shfl_sync",
    "shfl_up",
    "shfl_xor",
    "symbolic",
    "sync_threads",
    "sync_warp",
    "syncthreads_and",
    "syncthreads_count",
    "syncthreads_or",
    "tma_copy",
    "tma_store_arrive",
    "tma_store_wait",
    "transpose",
    "unroll",
    "use_swizzle",
    "vectorized",
    "view",
    "warp_reduce_bitand",
    "warp_reduce_bitor",
    "warp_reduce_max",
    "warp_reduce_min",
    "warp_reduce_sum",
    "ws",
]
