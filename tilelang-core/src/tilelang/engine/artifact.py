"""CompiledArtifact: what the engine hands to an execution backend. Serializable
(sources, signature, launch metadata); runtime modules ride along in memory only."""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

Dim = int | str  # a constant extent, the name of a symbolic dimension, or an expression over names


def is_symbol(dim: Any) -> bool:
    """A dimension that is a symbol's name (a str dimension that is not one is an expression
    over symbol names, e.g. ``"(m * 4)"``: checked once the symbols are bound)."""
    return isinstance(dim, str) and dim.isidentifier()


def dim_value(dim: Any, symbols: Mapping[str, int]) -> int:
    """A dimension's value given the symbols' values (KeyError: a symbol is unbound)."""
    if not isinstance(dim, str):
        return int(dim)
    if dim.isidentifier():
        return symbols[dim]
    return _evaluate(ast.parse(dim, mode="eval").body, symbols, dim)


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _evaluate(node: ast.AST, symbols: Mapping[str, int], text: str) -> int:
    """Integer arithmetic over symbol names, the only form lower.py writes (an artifact may
    come from a cache entry on disk: nothing else is evaluated)."""
    if isinstance(node, ast.Name):
        return symbols[node.id]
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left, symbols, text), _evaluate(node.right, symbols, text))
    raise ValueError(f"dimension {text!r} is not integer arithmetic over symbols")


def dim_symbols(dim: Any) -> list[str]:
    """The symbol names a dimension refers to."""
    if not isinstance(dim, str):
        return []
    if dim.isidentifier():
        return [dim]
    return [n.id for n in ast.walk(ast.parse(dim, mode="eval")) if isinstance(n, ast.Name)]


@dataclass(frozen=True)
class ParamInfo:
    """One kernel parameter: a tensor (dtype + shape) or a scalar (dtype only)."""

    name: str
    dtype: str
    shape: tuple[Dim, ...] | None = None  # None for scalars
    strides: tuple[Dim, ...] | None = None  # None: compact row-major
    #: a sub-byte tensor's logical dtype (``dtype`` is then its bytes' uint8, and shape and
    #: strides are the bytes'; transform/subbyte.py)
    packs: str | None = None
    #: a tensor the kernel never refers to: a call may pass None for it (upstream's unused bias)
    optional: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def is_scalar(self) -> bool:
        """Upstream KernelParam's spelling of ``not is_tensor``."""
        return self.shape is None


@dataclass(frozen=True)
class KernelLaunch:
    """One device kernel launch, as recorded by CaptureLaunchMetadata: its symbol, its
    operands ("param:<i>" = tensor i's data pointer, else a Python expression over the
    parameter and symbol names) and grid/block/dynamic shared memory expressions."""

    symbol: str
    args: tuple[str, ...]
    arg_types: tuple[str, ...]
    grid: tuple[str, ...]
    block: tuple[str, ...]
    dynamic_smem: str = "0"
    #: all blocks resident at once (the kernel waits at T.sync_grid): a cooperative launch
    cooperative: bool = False

    @classmethod
    def from_dict(cls, data: dict) -> KernelLaunch:
        """From the JSON form (CompiledArtifact.to_json, CaptureLaunchMetadata)."""
        return cls(data["symbol"], tuple(data["args"]), tuple(data["arg_types"]),
                   tuple(data["grid"]), tuple(data["block"]), data["dynamic_smem"],
                   bool(data.get("cooperative", False)))


@dataclass(frozen=True)
class CompiledArtifact:
    kernel_name: str
    params: tuple[ParamInfo, ...]
    out_idx: tuple[int, ...]
    target: str
    target_host: str
    target_backend: str
    execution_backend: str
    host_source: str = ""
    device_source: str = ""
    launches: tuple[KernelLaunch, ...] = ()
    # bytes every tensor's data pointer must be aligned to (vectorized accesses), 0 = any
    min_alignment: int = 0
    # tensor parameters the kernel may write (engine/written_params.py); None: unknown, so
    # every tensor counts as written (a read-only array is then refused everywhere)
    written: tuple[int, ...] | None = None
    # (name, dtype) of the symbolic dimensions narrower than int64: a call's extents must fit
    narrow_symbols: tuple[tuple[str, str], ...] = ()
    # dimensions a symbol was solved from (transform/solved_dims.py): (parameter index, axis,
    # the dimension's symbol, a, b, the solved symbol, the dimension as written); a call's
    # dimension must be a * n + b for a whole n >= 0
    shape_checks: tuple[tuple[int, int, str, int, int, str, str], ...] = ()
    # the per-kernel routing decision (tilelang.backend.routing.Route.describe()), "" if none
    route: str = ""
    # the DLPack device type the kernel runs on (1 CPU, 2 CUDA, ...); 0: not recorded (an
    # artifact made by hand), ask the context's target. Loading a cached kernel reads it
    # here, so that it needs no TVM target.
    device_type: int = 0
    # (input index, hit ratio): T.annotate_l2_hit_ratio's tensors, by their index among the
    # call's inputs (not parameters: outputs are not passed), in the order named; a target
    # backend's launch wrapper applies them (BackendModule.launch_wrapper)
    l2_windows: tuple[tuple[int, float], ...] = ()
    # in-memory only: tvm runtime modules produced by codegen
    host_module: Any = field(default=None, compare=False, repr=False)
    device_module: Any = field(default=None, compare=False, repr=False)
    # in-memory only: the lowered IRModules codegen read (upstream's host_mod / device_mod;
    # device_mod is None when the kernel has no device part, as on the CPU)
    host_mod: Any = field(default=None, compare=False, repr=False)
    device_mod: Any = field(default=None, compare=False, repr=False)

    _IN_MEMORY = ("host_module", "device_module", "host_mod", "device_mod")

    @property
    def kernel_source(self) -> str:
        """Upstream's name: the device source (CUDA, ...), else the host source (CPU)."""
        return self.device_source or self.host_source

    @property
    def rt_mod(self) -> Any:
        """Upstream's name for the host runtime module (None for codegen-only artifacts)."""
        return self.host_module

    @property
    def symbols(self) -> tuple[str, ...]:
        """Names of the symbolic dimensions, in first-use order."""
        seen: dict[str, None] = {}
        for p in self.params:
            for d in (p.shape or ()) + (p.strides or ()):
                if is_symbol(d):
                    seen.setdefault(d)
        return tuple(seen)

    @property
    def input_symbols(self) -> tuple[str, ...]:
        """The symbolic dimensions the input tensors' shapes determine, in first-use order:
        the ones a call binds (outputs take their shapes from them)."""
        seen: dict[str, None] = {}
        for i, p in enumerate(self.params):
            if i not in self.out_idx:
                for d in p.shape or ():
                    if is_symbol(d):
                        seen.setdefault(d)
        return tuple(seen)

    @property
    def scalar_dims(self) -> tuple[str, ...]:
        """The integer scalar parameters named in a tensor's shape (``n: T.int32``, then
        ``T.empty((n + 1,))`` in an eager kernel, or an input of ``(n * 2,)``): a call's value
        of each is that symbol's value, which sizes the outputs and checks the inputs."""
        dims = [d for p in self.params for d in p.shape or ()]
        return tuple(p.name for i, p in enumerate(self.params)
                     if i not in self.out_idx and not p.is_tensor and p.dtype.startswith(("int", "uint"))
                     and any(p.name in dim_symbols(d) for d in dims))

    def to_json(self) -> str:
        data = asdict(replace(self, **dict.fromkeys(self._IN_MEMORY)))
        for name in self._IN_MEMORY:
            data.pop(name)
        return json.dumps(data, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CompiledArtifact:
        data = json.loads(text)
        data["params"] = tuple(
            ParamInfo(
                p["name"],
                p["dtype"],
                None if p["shape"] is None else tuple(p["shape"]),
                None if p["strides"] is None else tuple(p["strides"]),
                p.get("packs"),
                bool(p.get("optional", False)),
            )
            for p in data["params"]
        )
        data["launches"] = tuple(
            KernelLaunch.from_dict(k) for k in data["launches"]
        )
        data["out_idx"] = tuple(data["out_idx"])
        if isinstance(data.get("written"), list):
            data["written"] = tuple(data["written"])
        if isinstance(data.get("narrow_symbols"), list):
            data["narrow_symbols"] = tuple(tuple(s) if isinstance(s, list) else s for s in data["narrow_symbols"])
        if isinstance(data.get("l2_windows"), list):
            data["l2_windows"] = tuple(tuple(w) if isinstance(w, list) else w for w in data["l2_windows"])
        if isinstance(data.get("shape_checks"), list):
            data["shape_checks"] = tuple(tuple(c) if isinstance(c, list) else c for c in data["shape_checks"])
        return cls(**data)
