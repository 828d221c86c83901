"""PreLowerSemanticCheck: backend-neutral checks with readable errors, before lowering."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import Call, PointerType

from ..errors import LanguageError
from ..language.kernel import BLOCK_TAGS
from ..transform.subbyte import SUBBYTE_BITS, is_subbyte

SUPPORTED_DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "bfloat16", "float32", "float64",
     # OCP fp8 (torch.float8_e4m3fn / float8_e5m2; CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2)
     "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"}
)


def check_kernel(func: Any, name: str) -> None:
    """Raise LanguageError for anything in ``func`` no backend could compile."""
    if not isinstance(func, tirx.PrimFunc):
        raise LanguageError(
            f"kernel {name!r}: expected a T.prim_func, got {type(func).__name__}; decorate the "
            "kernel body with @T.prim_func and return it from the @tilelang.jit function"
        )
    for param in func.params:
        ty = param.ty
        if isinstance(ty, PointerType):  # `a_ptr: T.ptr`: an address, given a type by T.make_tensor
            continue
        dtype = str(ty.dtype) if hasattr(ty, "dtype") else str(ty)
        if dtype not in SUPPORTED_DTYPES and not (isinstance(ty, tirx.BufferType) and is_subbyte(dtype)):
            raise LanguageError(
                f"kernel {name!r}: parameter {param.name!r} has dtype {dtype!r}; supported: "
                f"{', '.join(sorted(SUPPORTED_DTYPES))} (and for tensors {', '.join(SUBBYTE_BITS)})"
            )
    _check_launch_nesting(func.body, name)


def _check_launch_nesting(body: Any, name: str) -> None:
    """T.Kernel frames must not nest. (Errors are raised after the walk: an exception
    thrown inside a tvm_ffi callback comes back as a plain RuntimeError.)"""
    kernels = []

    def visit(stmt: Any) -> None:
        if stmt.attr_key == "thread_extent" and stmt.node.thread_tag == BLOCK_TAGS[0]:
            kernels.append(stmt)

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, visit))
    for outer in kernels:
        inner: list[Any] = []
        tvm_ffi.structural_walk(outer.body, (tirx.AttrStmt, lambda s: inner.append(s) if (
            s.attr_key == "thread_extent" and s.node.thread_tag == BLOCK_TAGS[0]) else None))
        if inner:
            raise LanguageError(
                f"kernel {name!r}: T.Kernel frames are nested; a kernel body may contain "
                "T.Kernel frames one after another, not one inside another"
            )


#: the pass config that turns off the checks run before lowering (upstream's key)
DISABLE_CONFIG = "tl.disable_prelower_semantic_check"


def check_parallel_fragments(func: Any, name: str) -> None:
    """LanguageError for a fragment indexed by the variable of a T.Parallel loop whose range
    is not constant (upstream's FragmentLoopChecker, with its rule): the fragment's elements
    are placed on threads by a layout fixed at compile time, so the run-time extent may run
    past the fragment (before, the write went past it: a crash on the CPU, shared memory
    overwritten on the GPU)."""
    from ..language.bounds import source_location
    from ..language.local_indices import FRAGMENT, parallel_indexed

    found = parallel_indexed(func.body, FRAGMENT, run_time_range_only=True)
    if found:
        loop, buffer, span, axis = found[0]
        var = loop.loop_var.name
        extent = str(loop.extent) if isinstance(loop.min, tirx.IntImm) and loop.min.value == 0 else \
            f"{loop.min}, {loop.min + loop.extent}"
        raise LanguageError(
            f"kernel {name!r}: fragment {buffer.name!r} is indexed by {var}, the variable of "
            f"T.Parallel({extent}), whose range is known only at run time; a fragment's elements are "
            "placed on the threads by a layout fixed at compile time, and this range may run past "
            f"them. Loop over the fragment's extent and guard the rest (for {var} in "
            f"T.Parallel({buffer.shape[axis]}): if {var} < ...), or use a shared buffer (T.alloc_shared)"
            + source_location(span if span is not None else loop.span))


def _first_span(func: Any, op_name: str) -> Any:
    """The span of the first statement that calls ``op_name`` (None if it has none)."""
    from ..language.ops import is_call_to

    found: list[Any] = []

    def on_stmt(stmt: Any) -> None:
        hits: list[Any] = []
        for part in (getattr(stmt, "value", None), getattr(stmt, "condition", None)):
            if part is not None and not isinstance(part, (int, str)):
                tvm_ffi.structural_walk(part, (Call, lambda c: hits.append(c) if is_call_to(c, op_name) else None))
        if hits and stmt.span is not None:
            found.append(stmt.span)

    tvm_ffi.structural_walk(func.body, [((tirx.BufferStore, tirx.Evaluate, tirx.IfThenElse, tirx.Bind), on_stmt)])
    return found[0] if found else None


def check_fully_lowered(mod: Any, name: str, backend: str) -> None:
    """A TileLang op that reached codegen would fail with a confusing message; say it here."""
    from ..language.bounds import source_location
    from ..language.ops import (
        NAMED_BARRIER_ARRIVE,
        SOURCE_KERNEL,
        SYNC_GRID,
        WARP_OPS,
        is_named_barrier,
        tl_op_names_in,
    )
    from ..language.random import RANDOM_OPS

    for func in mod.functions.values():
        calls: list[Any] = []
        tvm_ffi.structural_walk(func, (Call, calls.append))
        if any(is_named_barrier(c) for c in calls):
            raise LanguageError(
                f"kernel {name!r}: T.sync_threads(barrier_id, arrive_count) is a named barrier, which "
                f"target backend {backend!r} does not have; use T.sync_threads() (every thread of the "
                "block) or compile for a backend with named barriers (CUDA)")
        left = tl_op_names_in(func)
        # the neutral op families a backend may leave unlowered: op -> spelling, and why / what instead
        for spellings, why in ((WARP_OPS, ("is a warp intrinsic, which target backend {backend!r} does not lower "
                                           "(it has no warps to shuffle or vote over); compile the kernel for a "
                                           "GPU target, or reduce tiles with T.reduce_*")),
                               (RANDOM_OPS, ("draws random numbers, which target backend {backend!r} has no "
                                             "generator for; compile the kernel for CUDA, or pass random numbers "
                                             "in as a tensor (torch.rand)")),
                               ({NAMED_BARRIER_ARRIVE: "T.named_barrier_arrive"}, (
                                   "is an arrive at a named barrier, which target backend {backend!r} does not "
                                   "have; use T.sync_threads() (every thread of the block) or compile for a "
                                   "backend with named barriers (CUDA)")),
                               ({SYNC_GRID: "T.sync_grid()"}, (
                                   "is a barrier for the whole grid, which target backend {backend!r} cannot launch "
                                   "(it needs every block resident at once: a cooperative launch); compile the "
                                   "kernel for CUDA, or split it into two kernels at the barrier")),
                               ({SOURCE_KERNEL: "T.CUDASourceCodeKernel"}, (
                                   "is a kernel written in CUDA C++, which target backend {backend!r} does not "
                                   "compile; compile the function for CUDA, or write the kernel with T.Kernel"))):
            found = sorted(left & spellings.keys())
            if found:
                raise LanguageError(f"kernel {name!r}: {spellings[found[0]]} " + why.format(backend=backend)
                                    + source_location(_first_span(func, found[0])))
        if left:
            raise LanguageError(
                f"kernel {name!r}: target backend {backend!r} did not lower {sorted(left)}; the "
                "op is not supported by this backend (choose another target or report it)"
            )


__all__ = ["DISABLE_CONFIG", "SUPPORTED_DTYPES", "check_fully_lowered", "check_kernel", "check_parallel_fragments"]
