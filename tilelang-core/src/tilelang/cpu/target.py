"""CPU targets: ``llvm`` for this machine's CPU when TVM has LLVM, else ``c``."""

from __future__ import annotations

from typing import Any

from .threads import setting_error


def llvm_enabled() -> bool:
    import tvm

    return bool(tvm.runtime.enabled("llvm"))


def default_cpu_target() -> dict[str, Any]:
    """The best CPU target here: llvm tuned for the host CPU, or c without LLVM."""
    if not llvm_enabled():
        return {"kind": "c"}
    from tvm.target import codegen

    return {"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu()}


def canonicalize(target: Any) -> Any:
    """An llvm target that names no CPU, for this machine's triple (TVM fills in the host's
    when none is given), gets the host CPU, as the default target does. Without ``mcpu``
    LLVM targets the baseline of the triple (x86-64: SSE2, 128-bit vectors, no FMA), and
    the GEMM micro-kernels size themselves from the target's vector width
    (transform/gemm.py). A cross target (another triple) is left as written."""
    if str(target.kind.name) != "llvm":
        return target
    from tvm.target import Target, codegen

    config = dict(target.export())
    if config.get("mcpu") or str(config.get("mtriple") or codegen.llvm_get_system_triple()) != str(
            codegen.llvm_get_system_triple()):
        return target

    config["mcpu"] = codegen.llvm_get_system_cpu()
    host = config.pop("host", None)
    return Target(config, host=host) if host else Target(config)


def is_c_target(target: Any) -> bool:
    """Targets whose host code is C source (the kind TVM's C codegen emits)."""
    return str(target.kind.name) == "c"


def detect() -> dict[str, Any]:
    """Target detector: a CPU is always there; lowest priority, so any device wins."""
    return default_cpu_target()


def unavailable_reason() -> str | None:
    """The CPU backend needs either TVM's LLVM or a C compiler to build the c kind, and a
    valid thread count (threads.py). The compiler is looked for first: that answer needs
    no TVM import (`tilelang backends list` stays fast)."""
    import shutil

    why = setting_error()
    if why is not None:
        return why
    if shutil.which("cc") or shutil.which("gcc") or llvm_enabled():
        return None
    return "this apache-tvm build has no LLVM and no C compiler (cc/gcc) is on PATH"
