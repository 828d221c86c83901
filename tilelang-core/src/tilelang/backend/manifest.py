"""BackendModule: the compiler-facing manifest of a target backend, validated on construction.

How several manifests share the registry (coexistence, docs/architecture-notes.md item 27):
an alias names its backend; manifests that own one target kind are told apart by their
``supports_target`` predicates, then by ``priority`` (never by registration order); a
manifest that sets ``accepts_external_execution_backends`` can be served by execution
backends that it does not list but that declare, in their own specs, that they serve it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import ManifestError
from . import refs
from .device_codegen import DeviceCodegen, HostCodegen, tvm_build_function
from .execution_backend import ExecutionBackendSpec
from .pass_pipeline.pipeline import PassPipeline
from .target import TargetSpec
from .toolchain import DeviceToolchain

if TYPE_CHECKING:
    from .context import BackendContext

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class BackendModule:
    """The compiler-facing manifest of a target backend. Validated on construction.

    Components may be given as objects or as ``"package.module:attribute"`` references,
    which are imported on first use so that registering a manifest stays cheap.

    priority: orders manifests that own the same target kind and whose predicates both
        accept a target (higher wins; equal priorities are an error that names both).
    accepts_external_execution_backends: execution backends from other distributions
        that declare they serve this backend (``ExecutionBackendSpec.target_backends`` /
        ``target_kinds`` of their ``serves``) may run its kernels, after the ones listed in
        ``execution_backends``.
    """

    name: str
    target_kinds: tuple[str, ...]
    pipelines: Mapping[str, PassPipeline | str]
    device_codegens: Mapping[str, DeviceCodegen | str]
    execution_backends: tuple[ExecutionBackendSpec, ...]
    supports_target: Callable[[Any], bool] | None = None
    host_codegens: Mapping[str, HostCodegen | str] = field(default_factory=dict)
    host_codegen_hooks: tuple[Callable[[Any, BackendContext], Any] | str, ...] = ()
    # device source -> binary, for execution backends that compile it themselves (typed:
    # execution backends call tilelang.backend.toolchain, which wraps its errors once)
    toolchain: DeviceToolchain | str | None = None
    aliases: tuple[str, ...] = ()
    default_target: Callable[[], TargetSpec] | None = None
    canonicalize_target: Callable[[Any], Any] | None = None
    unavailable_reason: Callable[[], str | None] | None = None
    description: str = ""
    # the pass configs (tilelang.compile(pass_configs=...)) this backend's pipeline reads:
    # key -> what it does; see tilelang.backend.pass_configs for how requests are checked
    pass_configs: Mapping[str, str] = field(default_factory=dict)
    priority: int = 0
    accepts_external_execution_backends: bool = False
    # T.ext.<name> -> "package.module:attribute": language extensions only this backend
    # compiles; a kernel using one is routed here (tilelang.backend.routing)
    language_extensions: Mapping[str, str] = field(default_factory=dict)
    # optional parts of the backend-neutral language this backend's pipeline lowers (e.g.
    # "explicit_warp_specialization", tilelang.language.barriers); the engine refuses a kernel
    # using one for a backend that does not list it, before lowering
    language_features: tuple[str, ...] = ()
    # (1.10) the tilelang.carver device description of a target this backend owns: called
    # with the tvm Target, returns a TileDevice (tilelang.carver.arch.get_arch); a callable
    # or a "package.module:attribute" reference
    device_model: Callable[[Any], Any] | str | None = None
    # (1.13) wraps an execution backend's launcher for artifacts that ask for launch-time
    # state (CompiledArtifact.l2_windows: T.annotate_l2_hit_ratio): called with the
    # artifact and the launcher, returns a callable taking the launcher's arguments (and
    # ``stream=``); a callable or a "package.module:attribute" reference. None: the backend
    # has no such state, and the engine warns that the hint is ignored.
    launch_wrapper: Callable[[Any, Any], Any] | str | None = None

    def __post_init__(self) -> None:
        where = f"BackendModule({self.name!r})"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ManifestError(f"{where}: name must be lower_snake_case")
        kinds = tuple(self.target_kinds)
        object.__setattr__(self, "target_kinds", kinds)
        if not kinds or not all(isinstance(k, str) and k for k in kinds):
            raise ManifestError(f"{where}: target_kinds must be a non-empty tuple of kind names")
        for attr in ("pipelines", "device_codegens", "host_codegens", "pass_configs",
                     "language_extensions"):
            object.__setattr__(self, attr, _frozen(getattr(self, attr)))
        for attr, kind_type in (("pipelines", PassPipeline), ("device_codegens", DeviceCodegen)):
            table = getattr(self, attr)
            missing = [k for k in kinds if k not in table]
            extra = [k for k in table if k not in kinds]
            if missing:
                raise ManifestError(f"{where}: {attr} has no entry for owned kind(s) {missing}")
            if extra:
                raise ManifestError(f"{where}: {attr} has entries for kinds it does not own: {extra}")
            for kind, value in table.items():
                _check_component(value, kind_type, f"{where}.{attr}[{kind!r}]")
        for kind, value in self.host_codegens.items():
            _check_component(value, HostCodegen, f"{where}.host_codegens[{kind!r}]")
        object.__setattr__(self, "host_codegen_hooks", tuple(self.host_codegen_hooks))
        for i, hook in enumerate(self.host_codegen_hooks):
            _check_callable(hook, f"{where}.host_codegen_hooks[{i}]")
        if self.toolchain is not None:
            _check_component(self.toolchain, DeviceToolchain, f"{where}.toolchain")
        for key, value in self.pass_configs.items():
            if not isinstance(key, str) or "." not in key or not isinstance(value, str):
                raise ManifestError(
                    f"{where}.pass_configs[{key!r}]: keys are namespaced names ('tl.<name>') "
                    f"and values describe them in words, got {value!r}"
                )
        for key, value in self.language_extensions.items():
            if not isinstance(key, str) or not _NAME.match(key) or not isinstance(value, str):
                raise ManifestError(f"{where}.language_extensions[{key!r}]: names are lower_snake_case "
                                    "and values 'package.module:attribute' references")
            refs.check_ref(value, f"{where}.language_extensions[{key!r}]")
        object.__setattr__(self, "language_features", tuple(self.language_features))
        if not all(isinstance(f, str) and _NAME.match(f) for f in self.language_features):
            raise ManifestError(f"{where}: language_features must be lower_snake_case names, "
                                f"got {self.language_features}")
        self._check_execution_backends(where)
        if isinstance(self.device_model, str):
            refs.check_ref(self.device_model, f"{where}.device_model")
        elif self.device_model is not None and not callable(self.device_model):
            raise ManifestError(f"{where}: device_model must be callable, a 'package.module:attribute' "
                                f"reference or None, got {self.device_model!r}")
        if self.launch_wrapper is not None:
            _check_callable(self.launch_wrapper, f"{where}.launch_wrapper")
        object.__setattr__(self, "aliases", tuple(self.aliases))
        if not all(isinstance(a, str) and _NAME.match(a) for a in self.aliases):
            raise ManifestError(f"{where}: aliases must be lower_snake_case names, got {self.aliases}")
        for attr in ("supports_target", "default_target", "canonicalize_target", "unavailable_reason"):
            value = getattr(self, attr)
            if value is not None and not callable(value):
                raise ManifestError(f"{where}: {attr} must be callable or None")
        if self.aliases and self.default_target is None:
            raise ManifestError(f"{where}: aliases {self.aliases} need a default_target")
        # bool is an int: priority=True is a typo, not a priority
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise ManifestError(f"{where}: priority must be an int, got {self.priority!r}")
        if not isinstance(self.accepts_external_execution_backends, bool):
            raise ManifestError(
                f"{where}: accepts_external_execution_backends must be True or False, "
                f"got {self.accepts_external_execution_backends!r}"
            )

    def _check_execution_backends(self, where: str) -> None:
        specs = tuple(self.execution_backends)
        object.__setattr__(self, "execution_backends", specs)
        if not specs or not all(isinstance(s, ExecutionBackendSpec) for s in specs):
            raise ManifestError(
                f"{where}: execution_backends must be a non-empty tuple of ExecutionBackendSpec"
            )
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ManifestError(f"{where}: execution_backends lists a name twice: {names}")

    # -- component access (resolves lazy references) ------------------------------------
    def pipeline(self, kind: str) -> PassPipeline:
        return refs.resolve(self.pipelines[kind])

    def device_codegen(self, kind: str) -> DeviceCodegen:
        return refs.resolve(self.device_codegens[kind])

    def host_codegen(self, kind: str) -> HostCodegen:
        if kind in self.host_codegens:
            return refs.resolve(self.host_codegens[kind])
        return HostCodegen(build=tvm_build_function(kind))

    def device(self, target: Any) -> Any:
        """The carver's description of ``target`` (a TileDevice), or None when this backend
        declares no device model."""
        if self.device_model is None:
            return None
        return refs.resolve(self.device_model)(target)

    def spec(self, execution_backend: str) -> ExecutionBackendSpec | None:
        """The spec this manifest lists for an execution backend (outside ones: see
        :func:`tilelang.backend.resolution.execution_specs`)."""
        return next((s for s in self.execution_backends if s.name == execution_backend), None)

    def matches(self, target: Any) -> bool:
        if target.kind.name not in self.target_kinds:
            return False
        return self.supports_target is None or bool(self.supports_target(target))


def _check_component(value: Any, kind_type: type, where: str) -> None:
    if isinstance(value, str):
        refs.check_ref(value, where)
    elif not isinstance(value, kind_type):
        raise ManifestError(f"{where} must be a {kind_type.__name__} or a reference, got {value!r}")


def _check_callable(value: Any, where: str) -> None:
    if isinstance(value, str):
        refs.check_ref(value, where)
    elif not callable(value):
        raise ManifestError(f"{where} must be callable or a reference, got {value!r}")
