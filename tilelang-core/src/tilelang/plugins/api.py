"""The plugin API version: what a plugin declares and what this core accepts.

A plugin module declares ``TILELANG_PLUGIN_API = "major.minor"``, the API it was written
against. Core accepts the same major and a minor no newer than its own: a minor adds
(a manifest field, a hook), a major removes or changes. Checked before any of the
plugin's hooks is called.
"""

from __future__ import annotations

import re

#: the plugin API this core implements. 1.1 added BackendModule.priority and
#: accepts_external_execution_backends, ExecutionBackend.serves and TargetDetector.backend;
#: 1.2 added AtomicFunctions.helpers and the random-number ops (RNG_INIT, RNG_RAND,
#: RNG_RAND_FLOAT, RNG_GENERATORS); 1.3 LowerGridSync and KernelLaunch.cooperative; 1.4
#: LowerSourceKernels (T.CUDASourceCodeKernel); 1.5 DeviceToolchain.cannot_run_here,
#: device_mismatch and UnrunnableLauncher (a kernel built for another GPU); 1.6
#: gpu_block_passes(vector_fp8=) and PartitionParallelLoops(vector_fp8=) (fp8 vectors); 1.7
#: FindFirstSet (T.__ffs as a dialect's own functions), sparse_group and sparse_e_factor
#: (T.gemm_sp's metadata); 1.8 ATOMIC_RMW_ELEMENT, ATOMIC_RMW_KINDS and ATOMIC_USE_TMA_ATTR
#: (a tile atomic's element ops and its use_tma request, for a backend's bulk reductions);
#: 1.9 LowerClusterOps(store=); 1.10 BackendModule.device_model and the device descriptions
#: (TileDevice, CUDADevice, CDNADevice, CPUDevice) for tilelang.carver.arch.get_arch; 1.11
#: NAMED_BARRIER_ARRIVE (T.named_barrier_arrive, lowered by a backend with named barriers);
#: 1.12 DropDeadBindings (bindings a device-side simplify left unread).
#: 1.13 BackendModule.launch_wrapper (state around a launch: T.annotate_l2_hit_ratio).
#: 1.14 tvm_build_function(source_lines=), keeps_span and stamp_span (tl.emit_line_directives).
PLUGIN_API_VERSION = "1.14"
API_ATTRIBUTE = "TILELANG_PLUGIN_API"

_VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")


def parse_api_version(text: str) -> tuple[int, int]:
    match = _VERSION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a 'major.minor' version")
    return int(match.group(1)), int(match.group(2))


def api_incompatibility(declared: object, module: str, implemented: str = PLUGIN_API_VERSION) -> str | None:
    """None when a plugin written for ``declared`` may load here, else why not and the fix."""
    fix_attr = f'set {API_ATTRIBUTE} = "{implemented}" in module {module!r}'
    if declared is None:
        return (
            f"module {module!r} has no {API_ATTRIBUTE} attribute: a plugin must declare the plugin "
            f"API it was written for, as a \"major.minor\" string (this tilelang-core implements "
            f"{implemented}); to fix: {fix_attr}"
        )
    if not isinstance(declared, str):
        return (
            f"{API_ATTRIBUTE} is {declared!r} ({type(declared).__name__}); it must be a "
            f"\"major.minor\" string (this tilelang-core implements {implemented}); to fix: {fix_attr}"
        )
    try:
        major, minor = parse_api_version(declared)
    except ValueError as err:
        return f"{API_ATTRIBUTE} {err} (this tilelang-core implements {implemented}); to fix: {fix_attr}"
    core_major, core_minor = parse_api_version(implemented)
    if major != core_major:
        return (
            f"written for plugin API {declared}, this tilelang-core implements {implemented} "
            f"(the major versions differ); install a release of the plugin written for API "
            f"{core_major}.x, or a tilelang-core that implements {major}.x"
        )
    if minor > core_minor:
        return (
            f"written for plugin API {declared}, newer than this tilelang-core's {implemented}; "
            "upgrade tilelang-core (or install an older release of the plugin)"
        )
    return None
