"""The compiler entry point: PrimFunc + BackendContext -> CompiledArtifact.

It owns the pass-instrumentation session (a tvm PassContext with the caller's configs and
instruments); backends only add their phase scopes. Nothing here asks which target kind is
being compiled: every target-specific answer comes from the context's manifest.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..backend.module import BackendContext
from ..backend.pass_configs import resolve_pass_configs, tvm_config_names
from ..backend.pass_pipeline.pipeline import (  # current_pass_configs: re-exported by tilelang.engine
    ACTIVE_PASS_CONFIGS,
    current_pass_configs,  # noqa: F401
    take_pass_error,
)
from ..backend.routing import check_extensions
from ..backend.target import target_to_json
from ..errors import CompileError, LanguageError, TileLangError
from .artifact import CompiledArtifact, KernelLaunch, ParamInfo
from .instruments import session_instruments

#: module attribute a pipeline sets when kernels need aligned tensor pointers (bytes)
ALIGNMENT_ATTR = "tilelang.min_alignment"

# the active compilation's pass configs live below the engine (passes read them)
_PASS_CONFIGS = ACTIVE_PASS_CONFIGS


def validate_pass_configs(pass_configs: Mapping[Any, Any] | None, context: BackendContext) -> dict[str, Any]:
    """The configs the context's backend (or TVM) applies; raises CompileError for a key
    nobody knows (tilelang.backend.pass_configs)."""
    return resolve_pass_configs(pass_configs, context)


@contextlib.contextmanager
def _session(configs: Mapping[str, Any], instruments: Sequence[Any]) -> Iterator[None]:
    import tvm

    tvm_configs = {k: v for k, v in configs.items() if k in tvm_config_names()}
    token = _PASS_CONFIGS.set(dict(configs))
    try:
        with tvm.transform.PassContext(opt_level=3, config=tvm_configs, instruments=list(instruments)):
            yield
    finally:
        _PASS_CONFIGS.reset(token)


def _dim(expr: Any, where: str, plain: set[str]) -> int | str:
    """A constant, a symbol's name, or integer arithmetic (+ - * // %) over symbols that
    some dimension is exactly (``m * 4`` beside an ``m``): the binder checks it."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    from ..backend.pass_pipeline.launch_metadata import python_expr

    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tirx.Var):
        return expr.name
    arithmetic = (tirx.Add, tirx.Sub, tirx.Mul, tirx.FloorDiv, tirx.FloorMod, tirx.IntImm, tirx.Var)
    nodes: list[Any] = []
    tvm_ffi.structural_walk(expr, (object, nodes.append))
    exprs = [n for n in nodes if tvm.ir.is_prim_expr(n)]
    names = {n.name for n in exprs if isinstance(n, tirx.Var)}
    if all(isinstance(n, arithmetic) for n in exprs) and names <= plain:
        return python_expr(expr)[1:-1]  # a binary operation: its own parentheses dropped
    raise LanguageError(
        f"{where}: dimension {expr} is an expression{' of ' + ', '.join(sorted(names - plain)) if names - plain else ''}; "
        "use a constant, a symbolic dimension (T.symbolic), or integer arithmetic (+ - * // %) over "
        "symbols that are whole dimensions of some tensor parameter"
    )


def kernel_params(func: Any, name: str) -> tuple[ParamInfo, ...]:
    from tvm import tirx
    from tvm.ir import PointerType

    from ..transform.subbyte import packed_params

    packed = packed_params(func)
    plain = {d.name for p in func.params if isinstance(p.ty, tirx.BufferType)
             for d in [*p.ty.shape, *p.ty.strides] if isinstance(d, tirx.Var)}
    # an integer scalar parameter is a call's value: dimensions may be arithmetic over it
    # (``T.empty((n + 1,))``), as over a tensor's dimensions
    plain |= {p.name for p in func.params if not isinstance(p.ty, (tirx.BufferType, PointerType))
              and str(p.ty.dtype).startswith(("int", "uint"))}
    params = []
    for param in func.params:
        buffer = param.ty
        if not isinstance(buffer, tirx.BufferType):  # a scalar, or an address (`T.ptr`: "handle")
            params.append(ParamInfo(param.name, "handle" if isinstance(buffer, PointerType) else str(buffer.dtype)))
            continue
        where = f"kernel {name!r}, parameter {param.name!r}"
        shape = tuple(_dim(d, where, plain) for d in buffer.shape)
        strides = tuple(_dim(s, where, plain) for s in buffer.strides) if len(buffer.strides) else None
        params.append(ParamInfo(param.name, str(buffer.dtype), shape, strides, packed.get(param.name)))
    return tuple(params)


def unused_tensor_params(func: Any) -> set[str]:
    """Tensor parameters the kernel never refers to, whose dimensions other parameters
    give as well (a None argument can stand for such a tensor: nothing is read, nothing
    bound from it)."""
    import tvm_ffi
    from tvm import tirx

    seen: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.Var, seen.append))
    tensors = [p for p in func.params if isinstance(p.ty, tirx.BufferType)]
    unused = [p for p in tensors if not any(v.same_as(p) for v in seen)]
    found = set()
    for param in unused:
        others = [d for q in func.params if not q.same_as(param) and isinstance(q.ty, tirx.BufferType)
                  for d in [*q.ty.shape, *q.ty.strides] if isinstance(d, tirx.Var)]
        others += [q for q in func.params if not isinstance(q.ty, tirx.BufferType)]
        dims = [d for d in [*param.ty.shape, *param.ty.strides] if not isinstance(d, tirx.IntImm)]
        if all(isinstance(d, tirx.Var) and any(d.same_as(o) for o in others) for d in dims):
            found.add(param.name)
    return found


def _as_handles(func: Any, names: set[str]) -> Any:
    """``func`` with the tensor parameters ``names`` as opaque handles: the packed entry
    then accepts None for them (the binder checks a tensor given for one)."""
    from tvm import tirx

    params = [tirx.Var(p.name, "handle") if p.name in names else p for p in func.params]
    return tirx.PrimFunc(params, func.body, func.ret_type, func.attrs, func.span)


def lower(func: Any, target: Any = "auto", target_host: Any = None, *args: Any, **kwargs: Any) -> CompiledArtifact:
    """Upstream's ``tilelang.engine.lower.lower``: ``tilelang.lower`` (a target, not a
    backend context; lower_with_context takes one)."""
    from ..jit import lower as lower_for_target

    return lower_for_target(func, target, target_host, *args, **kwargs)


def lower_with_context(
    func: Any,
    context: BackendContext,
    *,
    name: str | None = None,
    out_idx: Sequence[int] = (),
    pass_configs: Mapping[str, Any] | None = None,
    instruments: Sequence[Any] = (),
    timings: dict[str, float] | None = None,
) -> CompiledArtifact:
    """Lower and generate code for one kernel. Raises LanguageError or CompileError.
    ``timings``: filled with the seconds each stage took (benchmarks/compile_time.py)."""
    import tvm
    from tvm.tirx.build import split_host_device_mods

    from ..language.barriers import check_lowerable
    from ..language.clusters import check_clusters
    from ..transform.source_lines import kernel_lines
    from .semantic_check import DISABLE_CONFIG as NO_SEMANTIC_CHECK
    from .semantic_check import check_fully_lowered, check_kernel, check_parallel_fragments

    def_line = kernel_lines(func)  # tl.emit_line_directives: the kernel's def line
    if name is None:
        symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
        name = str(symbol) if symbol else "main"
    check_kernel(func, name)
    from ..transform.single_trip_loops import inline_single_trip_loops
    from ..transform.source_kernels import bind_source_kernel_operands
    from ..transform.solved_dims import solve_dimension_symbols
    from ..transform.subbyte import pack_params

    func = pack_params(func, name)  # sub-byte tensors: byte parameters
    func = inline_single_trip_loops(func)  # T.serial(start, start + 1): TVM's simplifier trips on it
    func = bind_source_kernel_operands(func)  # T.CUDASourceCodeKernel: the tensors and symbols it is given
    func, shape_checks = solve_dimension_symbols(func)  # T.Tensor((n * 4,)) with n given by nothing else
    check_extensions(func, name, context.module, context.route)
    check_lowerable(func, name, context.module.name, context.module.language_features)  # T.ws, barriers
    check_clusters(func, name, context.module.name, context.module.language_features)  # T.ClusterKernel
    params = kernel_params(func, name)
    out_idx = tuple(i if i >= 0 else len(params) + i for i in out_idx)
    for i in out_idx:
        if not 0 <= i < len(params) or not params[i].is_tensor:
            raise LanguageError(f"kernel {name!r}: out_idx {i} is not the index of a tensor parameter")
    l2_windows = _l2_windows(func, params, out_idx, name, context.module)
    configs = validate_pass_configs(pass_configs, context)
    if not configs.get(NO_SEMANTIC_CHECK):
        check_parallel_fragments(func, name)
    from ..backend.pass_pipeline.bounds_checks import CONFIG_KEYS as BOUNDS_CHECKS
    from ..transform.safe_memory import DISABLE_CONFIG, guard_global_accesses

    # element accesses that may leave a global tensor: guarded, unless the run-time bounds
    # check was asked for (it reports them) or the guard was turned off
    if not configs.get(DISABLE_CONFIG) and not any(configs.get(key) for key in BOUNDS_CHECKS):
        func = guard_global_accesses(func)
    from .written_params import narrow_symbols, written_params

    written = written_params(func)
    unused = unused_tensor_params(func)
    if unused:  # None may stand for them (upstream's `kernel(a, b, c, None)` for an unused bias)
        params = tuple(replace(p, optional=True) if p.name in unused and i not in out_idx else p
                       for i, p in enumerate(params))
        func = _as_handles(func, {p.name for p in params if p.optional})
    from ..backend.device_codegen import inspect_source

    take_pass_error()  # forget one left by an earlier compilation
    clock = _StageClock(timings)
    stage = clock.enter("lowering")
    trace = _lower_trace(name)
    failure: BaseException | None = None
    try:
        traced = [trace.instrument] if trace is not None else []
        with _session(configs, [*instruments, *session_instruments(configs, name), *traced]), def_line:
            mod = tvm.IRModule({name: func.with_attr("global_symbol", name)})
            mod = tvm.tirx.transform.BindTarget(context.target)(mod)
            mod = context.lower(mod)
            check_fully_lowered(mod, name, context.module.name)
            launches, min_alignment = _launch_facts(mod)
            stage = clock.enter("host/device split")
            host_mod, device_mods = split_host_device_mods(mod)
            device_source, device_module, device_ir = "", None, None
            if len(device_mods) > 1:
                raise CompileError(f"kernel {name!r} produced device code for several targets")
            for device_mod in device_mods.values():
                if len(device_mod.functions) == 0:
                    continue
                stage = clock.enter("device codegen")
                device_mod = device_ir = context.finalize_device(device_mod)
                output = context.codegen_device(device_mod)
                device_source, device_module = output.source, output.module
            stage = clock.enter("host codegen")
            host_mod = context.finalize_host(host_mod)
            host_mod = context.preprocess_host_codegen(host_mod)
            # a codegen-only context (tilelang.lower) still generates the host code of a
            # kernel that has no device part (CPU targets): that code is its source
            host_only = context.execution_backend is None and device_module is None and not device_source
            needs_host = context.execution_spec.requires_host_codegen or host_only
            host_module = context.codegen_host(host_mod) if needs_host else None
            clock.enter("")
        if trace is not None:
            source = device_source or (inspect_source(host_module) if host_module is not None else "")
            trace.codegen(device_ir if device_source else host_mod, source, "src")
    except TileLangError as err:
        failure = err
        raise
    except Exception as err:  # TVM reports its own error types
        failure = err
        original = take_pass_error()
        if original is not None and str(original) in str(err):
            failure = original
            raise original from None  # a TileLang pass's own error, type restored
        hint = next((f"\n{advice}" for text, advice in _KNOWN_FAILURES if text in str(err)), "")
        raise CompileError(
            f"kernel {name!r}: {stage} failed in {context.describe()}: {type(err).__name__}: {err}{hint}"
        ) from err
    finally:
        if trace is not None:
            trace.close(failure)

    return CompiledArtifact(
        kernel_name=name,
        params=params,
        out_idx=out_idx,
        target=target_to_json(context.target),
        target_host=target_to_json(context.target_host),
        target_backend=context.module.name,
        execution_backend=context.execution_spec.name,
        host_source=inspect_source(host_module) if host_module is not None else "",
        device_source=device_source,
        launches=launches,
        min_alignment=min_alignment,
        written=written,
        narrow_symbols=narrow_symbols(func),
        shape_checks=shape_checks,
        host_module=host_module,
        device_module=device_module,
        host_mod=host_mod,
        device_mod=device_ir,
        route=context.route.describe() if context.route is not None else "",
        device_type=int(context.target.get_target_device_type()),
        l2_windows=l2_windows,
    )


def _l2_windows(func: Any, params: tuple[ParamInfo, ...], out_idx: tuple[int, ...], name: str,
                module: Any) -> tuple[tuple[int, float], ...]:
    """T.annotate_l2_hit_ratio's tensors as (input index, ratio); a tensor the call does not
    pass is refused. On a target backend without a launch wrapper, a warning: the hint is
    ignored there (results are the same either way)."""
    from ..language.ops import L2_HIT_RATIO_ATTR

    asked = func.attrs[L2_HIT_RATIO_ATTR] if func.attrs is not None and L2_HIT_RATIO_ATTR in func.attrs else None
    if not asked:
        return ()
    inputs = [i for i in range(len(params)) if i not in out_idx]
    windows = []
    for buffer, ratio in asked.items():
        index = next((i for i, p in enumerate(params) if p.name == str(buffer)), None)
        if index is None or not params[index].is_tensor:
            raise LanguageError(f"kernel {name!r}: T.annotate_l2_hit_ratio names {str(buffer)!r}, which is not "
                                "a tensor parameter; name a tensor the call passes")
        if index in out_idx:
            raise LanguageError(f"kernel {name!r}: T.annotate_l2_hit_ratio names {str(buffer)!r}, an output "
                                "the call allocates (out_idx); name a tensor the call passes (pass the output "
                                "in, without out_idx, to keep it in L2)")
        windows.append((inputs.index(index), float(ratio.value)))
    if getattr(module, "launch_wrapper", None) is None:
        warnings.warn(f"kernel {name!r}: T.annotate_l2_hit_ratio is ignored on the {module.name!r} target "
                      "backend (it sets no L2 access-policy windows); results are the same", stacklevel=2)
        return ()
    if len(windows) > 1:
        warnings.warn(f"kernel {name!r}: T.annotate_l2_hit_ratio names {len(windows)} tensors, but a stream holds "
                      "one L2 access-policy window: the last one named applies", stacklevel=2)
    return tuple(windows)


def _lower_trace(kernel: str) -> Any:
    """tilelang.tools.lower_trace's trace of this compilation, when tracing is on (imported
    only when the environment asks for it or a program enabled it)."""
    import os
    import sys

    if not os.environ.get("TL_LOWER_TRACE") and "tilelang.tools.lower_trace" not in sys.modules:
        return None
    from ..tools.lower_trace import kernel_trace

    return kernel_trace(kernel)


#: (text of a TVM failure, what it means in the kernel's terms and how to fix it)
_KNOWN_FAILURES = (
    ("Cannot insert syncs inside condition",
     ("A barrier (__syncthreads) is needed inside a loop or branch whose condition may differ between "
      "the threads of a block: it reads the thread index or a value only some threads hold, so not every "
      "thread would reach the barrier. Make the condition the same in every thread (block indices, "
      "parameters, T.alloc_var counters every thread updates alike, e.g. `while tile < n: ...; "
      "tile += blocks`), or move the shared-memory accesses out of it.")),
)


class _StageClock:
    """Adds each stage's seconds to ``into`` (when a caller passed a dict)."""

    def __init__(self, into: dict[str, float] | None) -> None:
        self.into = into
        self.stage = ""
        self.start = time.perf_counter()

    def enter(self, stage: str) -> str:
        now = time.perf_counter()
        if self.into is not None and self.stage:
            self.into[self.stage] = self.into.get(self.stage, 0.0) + now - self.start
        self.stage, self.start = stage, now
        return stage


def _launch_facts(mod: Any) -> tuple[tuple[KernelLaunch, ...], int]:
    """What backend passes recorded for host-side launchers (module attributes)."""
    import json

    from ..backend.pass_pipeline.launch_metadata import LAUNCHES_ATTR

    attrs = mod.attrs
    raw = attrs.get(LAUNCHES_ATTR) if attrs is not None else None
    launches = tuple(KernelLaunch.from_dict(k) for k in json.loads(str(raw))) if raw is not None else ()
    alignment = 0
    for func in mod.functions.values():
        value = func.attrs.get(ALIGNMENT_ATTR) if func.attrs is not None else None
        alignment = max(alignment, int(value) if value is not None else 0)
    return launches, alignment
