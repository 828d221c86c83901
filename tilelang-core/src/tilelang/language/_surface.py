"""The language's names, loaded on first use: ``tilelang.language`` (``__init__``) imports
this module the first time a kernel reads ``T.<name>`` and publishes its namespace.

Add a new name here (its import) and to ``__all__`` in ``__init__``: this module imports TVM,
which a disk-cache hit of a kernel module that imports the language at its top must not pay.
"""

# ruff: noqa: F401 - every import here is a name of the language, published by ``__init__``

# The whole TVMScript tirx namespace, so existing TVMScript helpers keep working.
from tvm.script.parser._core import parse as _tvm_parse
from tvm.script.parser._core import utils as _tvm_parser_utils
from tvm.script.parser.tirx import *
from tvm.tirx import PrimExpr  # upstream's T.PrimExpr (isinstance checks)

from ..layout import Fragment, Layout
from ..tvm_compat import install as _install_tvm_names
from . import ops as _ops  # registers TileLang's IR ops
from .allocate import alloc_local, alloc_shared
from .atomic import (
    atomic_add,
    atomic_addx2,
    atomic_addx4,
    atomic_and,
    atomic_load,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_store,
    atomic_xor,
)
from .barriers import (  # upstream's explicit warp-specialized language (barriers, T.tma_copy, T.ws)
    alloc_barrier,
    alloc_cluster_barrier,
    barrier_arrive,
    barrier_wait,
    cp_async_barrier_noinc,
    dec_max_nreg,
    fence_proxy_async,
    get_warp_group_idx,
    inc_max_nreg,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_expect_tx,
    mbarrier_wait_parity,
    set_max_nreg,
    tma_copy,
    tma_store_arrive,
    tma_store_wait,
    ws,
)
from .bit_search import ffs as __ffs
from .bit_search import fns as __fns
from .casts import reinterpret
from .clusters import (
    ClusterKernel,
    block_rank_in_cluster,
    cluster_arrive,
    cluster_arrive_relaxed,
    cluster_sync,
    cluster_wait,
    copy_cluster,
)
from .conv import c2d_im2col, im2col
from .dtypes import DTYPES as _DTYPES
from .dtypes import dtype, ptr
from .eager import (  # the eager @tilelang.jit style's declarations
    annotate_compile_flags,
    annotate_pass_configs,
    const,
    empty,
)
from .explicit_memory import (
    __ldg,
    ldg32,
    ldg64,
    ldg128,
    ldg256,
    lds32,
    lds64,
    lds128,
    stg32,
    stg64,
    stg128,
    stg256,
    sts32,
    sts64,
    sts128,
)
from .ext import ext
from .fastmath import (
    __cos,
    __exp,
    __exp10,
    __log,
    __log2,
    __log10,
    __sin,
    __tan,
    fast_rcp,
    ieee_add,
    ieee_fdiv,
    ieee_fmaf,
    ieee_frcp,
    ieee_frsqrt,
    ieee_fsqrt,
    ieee_mul,
    ieee_sub,
)
from .frontend import normalize as _normalize
from .gemm_sp import gemm_sp, wgmma_gemm_sp
from .grid_dependencies import pdl_sync, pdl_trigger, sync_grid
from .hints import (
    annotate_consumer_reg_alloc,
    annotate_l2_hit_ratio,
    annotate_min_blocks_per_sm,
    annotate_producer_reg_dealloc,
    annotate_restrict_buffers,
    disable_warp_group_reg_alloc,
    no_set_max_nreg,
)
from .int_literals import install as _install_int_literals
from .kernel import Kernel, get_block_binding, get_thread_binding
from .loop import Parallel
from .loop_aliases import Serial, Unroll, Vectorized, serial, unroll, vectorized
from .macros import Ref
from .misc import (
    GemmWarpPolicy,
    align_up,
    all_of,
    any_of,
    clamp,
    device_assert,
    dp4a,
    extract_lane,
    import_source,
    infinity,
    named_barrier_arrive,
    print,
    ptx_commit_group,
    ptx_cp_async,
    ptx_wait_group,
    round,
    sync_threads,
    wait_wgmma,
)
from .packed import abs2, add2, fma2, max2, min2, mul2, sub2
from .parser_hooks import install as _install_parser_hooks
from .persistent import Persistent
from .random import rng_init, rng_rand, rng_rand_float
from .reducer import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from .safe_values import annotate_safe_value
from .source_kernel import CUDASourceCodeKernel
from .symbolic import dynamic, symbolic
from .tile import (
    Pipelined,
    alloc_fragment,
    annotate_layout,
    async_copy,
    clear,
    copy,
    cummax,
    cummin,
    cumsum,
    fill,
    gemm,
    reduce,
    reduce_absmax,
    reduce_abssum,
    reduce_bitand,
    reduce_bitor,
    reduce_bitxor,
    reduce_max,
    reduce_min,
    reduce_sum,
    transpose,
    use_swizzle,
    wgmma_gemm,
)
from .tile_scheduler import PersistentTileScheduler
from .variables import alloc_global, alloc_var, let

_install_tvm_names()  # tvm.tirx.PrimExpr for upstream kernels that import TVM directly
_install_parser_hooks()  # a Python callable named in a kernel body (`scan = T.cumsum`)
_install_int_literals()  # `n & 0xFFFFFFFF` on a uint32: the literal in n's type, all 32 bits
from .views import (
    FragmentBuffer,
    LocalBuffer,
    SharedBuffer,
    StridedTensor,
    Tensor,
    access_ptr,
    make_tensor,
    reshape,
    view,
)
from .warp import (  # upstream's warp intrinsics, lowered by each GPU backend
    activemask,
    all_sync,
    any_sync,
    ballot,
    ballot_sync,
    get_lane_idx,
    get_warp_idx,
    get_warp_idx_sync,
    match_all_sync,
    match_any_sync,
    shfl_down,
    shfl_sync,
    shfl_up,
    shfl_xor,
    sync_warp,
    syncthreads_and,
    syncthreads_count,
    syncthreads_or,
    warp_reduce_bitand,
    warp_reduce_bitor,
    warp_reduce_max,
    warp_reduce_min,
    warp_reduce_sum,
)

# T.float16, T.float, T.int8x4, ... as TileLang dtypes (str subclasses, still callable like
# TVMScript's constructors): they replace the tirx namespace's constructors of the same names.
globals().update(_DTYPES)


def _tvm_prim_func(f, check_well_formed=True, **_parser_reads):
    """TVMScript's ``prim_func(f)``, without the reference cycle it leaves: it keeps
    ``inspect.stack()`` in a local of its own frame, so every caller's frame, and each tensor
    one holds, stayed alive until the garbage collector ran (upstream's
    ``test_tilelang_globals_leak`` disables it and checks). ``private=`` and the other
    keywords are read by the parser from the decorator's source."""
    import inspect

    outer_stack = inspect.stack()
    try:
        if _tvm_parser_utils.is_defined_in_class(outer_stack, f):
            return f
        extra_vars = _tvm_parser_utils.inspect_function_capture(f)
        _tvm_parser_utils.resolve_closure_vars(f, extra_vars, outer_stack)
        parsed = _tvm_parse(f, extra_vars, check_well_formed=check_well_formed)
        parsed.__name__ = f.__name__
        return parsed
    finally:
        outer_stack.clear()


def prim_func(func=None, **kwargs):
    """``@T.prim_func``: parse a kernel body into a PrimFunc (TVMScript, then TileLang's
    frontend normalization)."""

    def wrap(f):
        if _declares_its_parameters(f):  # `def kernel(A): A: T.Tensor(...)`: upstream's lazy style
            from ..jit.eager import lazy_prim_func

            return lazy_prim_func(f)
        try:
            parsed = _tvm_prim_func(f, **kwargs)
        except OSError as err:  # inspect could not find the function's source
            from ..errors import LanguageError

            raise LanguageError(
                f"T.prim_func {getattr(f, '__name__', f)!r}: its source code cannot be read "
                f"({err}); kernels are parsed from source, so define them in a file, not in "
                "`python -c` or an interactive prompt"
            ) from None
        except Exception as err:  # TVMScript reports our errors as diagnostics with a location
            from .diagnostics import raise_for_user

            raise_for_user(err)
            raise
        return _with_def_span(_normalize(parsed), f)

    return wrap(func) if func is not None else wrap


def _with_def_span(func, f):
    """``func`` with the span of its ``def`` line, which TVMScript leaves out (under
    ``tl.emit_line_directives`` the kernel's entry in generated source names it; passes
    that rebuild the function drop it, so lowering takes it first: source_lines.kernel_lines).
    The file is named as TVMScript names it in its statements' spans."""
    import inspect

    import tvm
    from tvm import tirx as _tvm_tirx

    if not isinstance(func, _tvm_tirx.PrimFunc) or func.span is not None:
        return func
    try:
        path = inspect.getsourcefile(f)
        lines, first = inspect.getsourcelines(f)
    except (OSError, TypeError):
        return func
    if path is None:
        return func
    offset = next((i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "async def "))), 0)
    column = len(lines[offset]) - len(lines[offset].lstrip()) + 1
    span = tvm.ir.Span(tvm.ir.SourceName(path), first + offset, first + offset, column, column)
    return _tvm_tirx.PrimFunc(func.params, func.body, func.ret_type, func.attrs, span)


def _declares_its_parameters(f) -> bool:
    """Whether a Python function is upstream's lazy kind: its parameters have no annotations
    (they are declared in its body, before its first `with`), or it makes T.empty outputs."""
    import inspect

    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return False
    # (no `bool(...)` here: this module's `bool` is the dtype T.bool)
    if len(params) > 0 and all(p.annotation is inspect.Parameter.empty for p in params):
        return True
    from ..jit.eager_source import makes_outputs

    return makes_outputs(f)  # `def kernel(n: T.int32): out = T.empty(...)`: lazy as well


# TVMScript recognizes its decorator by this token when it meets `@T.prim_func` inside
# another parsed function.
prim_func.dispatch_token = "tirx"
