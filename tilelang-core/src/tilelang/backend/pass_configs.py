"""Pass configs: ``tilelang.compile(..., pass_configs={key: value})``.

Who decides what a key means: the target backend that compiles the kernel. Each manifest
lists the keys its pipeline reads (``BackendModule.pass_configs``, key -> description);
core holds no backend's knobs. A request is checked against the resolved context, once:

- a key the context's backend honours is used;
- a key of ``SESSION_CONFIGS`` is used by core, for every backend: they instrument the
  compilation (upstream's IR dump and pass timing), or turn off core's guard of global
  accesses (``tl.disable_safe_memory_legalize``);
- a key TVM's PassContext knows (``tvm.transform.PassContext.list_configs()``) goes to
  TVM; upstream's ``tir.<name>`` spelling is renamed to TVM 0.27's ``tirx.<name>``;
- a key another installed backend honours, or one of upstream TileLang's keys
  (``PassConfigKey``), is accepted and not applied (a debug log says so): kernels written
  for upstream carry configs for passes this backend does not have;
- anything else is a CompileError naming the nearest valid key and the backend's keys.
"""

from __future__ import annotations

import difflib
import functools
import logging
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..errors import CompileError
from .registry import REGISTRY

if TYPE_CHECKING:
    from .module import BackendContext

log = logging.getLogger("tilelang.pass_configs")


class PassConfigKey(str, Enum):
    """Upstream TileLang's pass-config keys, under upstream's member names. Which of them a
    kernel's compilation applies is up to its target backend (see the module docstring);
    a backend's own keys are ``registered_backends()[name].pass_configs``."""

    TL_SIMPLIFY = "tl.Simplify"
    # sub-keys of the tl.Simplify dict value
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"

    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"

    # TVM's own configs, as upstream names them (TVM 0.27 knows some of them)
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"

    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"

    def __str__(self) -> str:
        # the key itself, so f"{key}" and str(key) read as the config name
        return self.value


#: keys core honours for every target backend: most instrument the compilation session
#: (tilelang.engine.instruments) rather than change what a pass does; one turns off core's
#: own guard of global accesses (tilelang.transform.safe_memory)
SESSION_CONFIGS: dict[str, str] = {
    "tl.enable_dump_ir": "write the IR after every pass to tl.dump_ir_path, one file per pass",
    "tl.dump_ir_path": "the folder tl.enable_dump_ir writes to (default ./dump_ir)",
    "tl.pass_profile": "print how long each pass took, slowest first, after the compilation",
    "tl.pass_profile_threshold_ms": "tl.pass_profile lists only passes that took at least this long",
    # core's own lowering, every backend (transform/safe_memory.py)
    # core's checks before lowering (engine/semantic_check.py), upstream's key
    "tl.disable_prelower_semantic_check": "skip the checks run before lowering (a fragment indexed by a "
                                          "T.Parallel loop of run-time extent)",
    "tl.disable_safe_memory_legalize": "do not guard element accesses of global tensors that may leave them "
                                       "(by default such a write is skipped and such a read gives 0)",
}

#: upstream keys asked for only to see something: enabling one here warns (once) that it
#: shows nothing, and what shows it instead
VISIBLE_KEYS: dict[str, str] = {
    "tl.layout_visualization_enable": "the fragment layouts a kernel gets are its backend's choice, which no "
                                      "backend reports here yet; draw a layout you have with "
                                      "tilelang.tools.plot_layout, and see each pass's IR with TL_LOWER_TRACE",
}
_WARNED: set[str] = set()

#: the keys themselves (the tl.Simplify sub-keys are fields of a value, not keys)
UPSTREAM_KEYS: frozenset[str] = frozenset(k.value for k in PassConfigKey if "." in k.value)


@functools.cache
def tvm_config_names() -> frozenset[str]:
    """The config keys this TVM's PassContext accepts."""
    import tvm

    return frozenset(str(name) for name in tvm.transform.PassContext.list_configs())


def _key_name(key: Any) -> str:
    if isinstance(key, PassConfigKey):
        return key.value
    if not isinstance(key, str):
        raise CompileError(
            f"pass config key {key!r} is a {type(key).__name__}; use a string such as "
            "'tl.disable_vectorize' or a tilelang.PassConfigKey member"
        )
    return str(key)


def _tvm_name(name: str) -> str | None:
    """The TVM config a key names: itself, or upstream's 'tir.x' as TVM 0.27's 'tirx.x'."""
    known = tvm_config_names()
    if name in known:
        return name
    if name.startswith("tir."):
        renamed = "tirx." + name[len("tir."):]
        if renamed in known:
            return renamed
    return None


def resolve_pass_configs(pass_configs: Mapping[Any, Any] | None, context: BackendContext) -> dict[str, Any]:
    """The configs this compilation applies, keyed by name (see the module docstring)."""
    module = context.module
    resolved: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in (pass_configs or {}).items():
        name = _key_name(key)
        if name in module.pass_configs or name in SESSION_CONFIGS:
            resolved[name] = value
            continue
        tvm_name = _tvm_name(name)
        if tvm_name is not None:
            resolved[tvm_name] = value
            continue
        honoured_by = sorted(m.name for m in REGISTRY.backends.values() if name in m.pass_configs)
        if honoured_by or name in UPSTREAM_KEYS:
            where = f"target backends {honoured_by}" if honoured_by else "upstream TileLang"
            log.debug("pass config %r (a key of %s) is not applied by target backend %r",
                      name, where, module.name)
            if value and name in VISIBLE_KEYS and name not in _WARNED:
                import warnings

                _WARNED.add(name)
                warnings.warn(f"pass config {name!r} is accepted and not applied by target backend "
                              f"{module.name!r}: {VISIBLE_KEYS[name]}", stacklevel=4)
            continue
        unknown.append(name)
    if unknown:
        raise CompileError(_unknown_message(unknown, module))
    return resolved


def _unknown_message(unknown: list[str], module: Any) -> str:
    own = sorted(module.pass_configs)
    others = {k for m in REGISTRY.backends.values() for k in m.pass_configs}
    candidates = sorted(set(own) | others | UPSTREAM_KEYS | SESSION_CONFIGS.keys() | tvm_config_names())
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        if close:
            hints.append(f"{name!r}: did you mean {close[0]!r}?")
    return (
        f"unknown pass config(s) {unknown}; valid: {', '.join(own) or 'none'} (the keys target "
        f"backend {module.name!r} honours), TVM PassContext configs "
        "(tvm.transform.PassContext.list_configs(); upstream's 'tir.<name>' is TVM's "
        "'tirx.<name>') and tilelang.PassConfigKey names. "
        + " ".join(hints)
    ).rstrip()


__all__ = ["SESSION_CONFIGS", "UPSTREAM_KEYS", "PassConfigKey", "resolve_pass_configs", "tvm_config_names"]
