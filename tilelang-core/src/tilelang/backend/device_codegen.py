"""Device codegen components and shared global-function helpers."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import CompileError, ManifestError


@dataclass(frozen=True)
class DeviceOutput:
    """What device codegen produced: a runtime module when compiled, and the source."""

    source: str
    module: Any = None  # tvm runtime Module, present when compiled


@dataclass(frozen=True)
class DeviceCodegen:
    """Device code generation for one target kind.

    source_only(mod, target) -> str: generate source without any device toolchain.
    compiled(mod, target) -> tvm runtime Module: generate and compile (None if the backend
        offers no compiled mode; then only source-consuming execution backends work).
    """

    source_only: Callable[[Any, Any], str]
    compiled: Callable[[Any, Any], Any] | None = None

    def __post_init__(self) -> None:
        if not callable(self.source_only):
            raise ManifestError("DeviceCodegen.source_only must be callable")
        if self.compiled is not None and not callable(self.compiled):
            raise ManifestError("DeviceCodegen.compiled must be callable or None")

    def generate(self, mod: Any, target: Any, compile_device: bool) -> DeviceOutput:
        if compile_device:
            if self.compiled is None:
                raise CompileError(
                    f"the device codegen for {target} has no compiled mode; choose an "
                    "execution backend that consumes source"
                )
            module = self.compiled(mod, target)
            return DeviceOutput(source=inspect_source(module), module=module)
        return DeviceOutput(source=self.source_only(mod, target))


@dataclass(frozen=True)
class HostCodegen:
    """Host code generation for one host target kind: build(mod, target) -> runtime Module."""

    build: Callable[[Any, Any], Any]

    def __post_init__(self) -> None:
        if not callable(self.build):
            raise ManifestError("HostCodegen.build must be callable")


def tvm_build_function(kind: str, source_lines: bool = False) -> Callable[[Any, Any], Any]:
    """The codegen that TVM registers as the global function ``target.build.<kind>``.

    ``source_lines``: the codegen writes C-family source, which under ``tl.emit_line_directives``
    gets ``#line`` directives naming the kernel's Python lines; the backend turns the printed
    markers into directives with ``apply_source_postproc`` (tilelang.transform.source_lines)."""

    def build(mod: Any, target: Any) -> Any:
        import tvm

        func = tvm.get_global_func(f"target.build.{kind}", allow_missing=True)
        if func is None:
            raise CompileError(f"this apache-tvm build has no 'target.build.{kind}' codegen")
        if source_lines:
            from ..transform.source_lines import mark_source_lines

            mod = mark_source_lines(mod)
        return func(mod, target)

    build.__name__ = f"tvm_build_{kind}"
    return build


#: read by TVM's runtime module factories at each build: keep the source, compile nothing
_FORCE_FALLBACK = "TVM_COMPILE_FORCE_FALLBACK"


@contextlib.contextmanager
def tvm_source_only_build() -> Iterator[None]:
    """Builds inside keep their device source. Where TVM's GPU runtime library is loaded
    (a GPU host: ``import tvm`` loads it), ``target.build.cuda`` hands its source to the
    runtime's module factory, which compiles it at once through TVM's own compile callback
    (and, for CUDA, reads the arch from GPU 0, making a context); a codegen that only wants
    the source asks for the factory's fallback instead."""
    previous = os.environ.get(_FORCE_FALLBACK)
    os.environ[_FORCE_FALLBACK] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_FORCE_FALLBACK, None)
        else:
            os.environ[_FORCE_FALLBACK] = previous


def inspect_source(module: Any) -> str:
    """The source text of a TVM runtime module, or '' when it has none to show."""
    try:
        return str(module.inspect_source())
    except Exception:  # noqa: BLE001 - binary-only modules have no source
        return ""
