"""The declared plugin API (``tilelang.plugin``): what it exports, that it stays light, and
that every plugin distribution in this repository (first-party, the vendor example, the
throwaway test distributions) imports core names only through it."""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import tilelang.plugin as api
from tilelang.errors import CompileError, ManifestError
from tilelang.jit.fingerprint import editable_source_roots
from tilelang.plugin import (
    BackendModule,
    DeviceToolchain,
    ExecutionBackendSpec,
    compile_device_source,
    prepare_device_runtime,
)

REPO = Path(__file__).resolve().parents[2]
CORE_SRC = REPO / "tilelang-core" / "src"
# the tests also run as copies against installed wheels (nox -s wheel_tests): no source tree
IN_REPO = CORE_SRC.is_dir()


def _module_name(relative: Path) -> str:
    parts = relative.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _common_package(files: list[Path]) -> str:
    """The package a distribution ships: the deepest folder holding all of its modules
    (paths relative to the folder on sys.path)."""
    return ".".join(Path(os.path.commonpath([f.parent for f in files])).parts) if files else ""


def _own_package(common: str, path: Path) -> str:
    """The package ``path`` belongs to. A distribution whose modules span several of
    tilelang's subpackages (tilelang-cuda: ``tilelang.cuda`` and the ``tilelang.contrib``
    namespace) has ``tilelang`` in common, which would make all of core its own: each file
    then owns just its subpackage."""
    if common != "tilelang":
        return common
    parts = path.parts
    at = max(i for i, part in enumerate(parts) if part == "tilelang")
    return ".".join(parts[at:at + 2])


def plugin_sources() -> dict[str, tuple[str, list[Path]]]:
    """label -> (own package, modules) of every plugin distribution: in the repository, each
    tilelang-<x> but core, the examples and the throwaway distributions of test_plugins.py
    (one module each, no package: own is ''); installed, every distribution but core with a
    tilelang.plugins entry point, its modules read from its RECORD."""
    found: dict[str, tuple[str, list[Path]]] = {}
    if IN_REPO:
        roots = [p / "src" for p in sorted(REPO.glob("tilelang-*")) if p.name != "tilelang-core" and (p / "src").is_dir()]
        roots += [p / "src" for p in sorted((REPO / "examples").glob("*/")) if (p / "pyproject.toml").is_file()]
        for root in roots:
            files = sorted(root.rglob("*.py"))
            found[root.parent.name] = (_common_package([f.relative_to(root) for f in files]), files)
        dists = REPO / "tilelang-core" / "tests" / "plugin_dists"
        found[dists.name] = ("", sorted(dists.glob("*.py")))
        return found
    import importlib_metadata

    for ep in importlib_metadata.entry_points(group="tilelang.plugins"):
        dist = ep.dist
        if dist is None or dist.metadata["Name"] == "tilelang-core":
            continue
        roots = editable_source_roots(dist)
        if roots:  # an editable install: its RECORD lists no modules, its source folders have them
            pairs = [(f.relative_to(root), f) for root in roots for f in sorted(root.rglob("*.py"))]
        else:
            pairs = [(Path(str(f)), Path(f.locate())) for f in dist.files or ()
                     if f.suffix == ".py" and ".dist-info" not in str(f)]
        found[dist.metadata["Name"]] = (_common_package([rel for rel, _ in pairs]), [path for _, path in pairs])
    return found


@functools.cache
def _installed_core_modules() -> frozenset[str]:
    import importlib_metadata

    files = importlib_metadata.distribution("tilelang-core").files or ()
    return frozenset(_module_name(Path(str(f))) for f in files if f.suffix == ".py")


def is_core(module: str) -> bool:
    """Whether tilelang-core ships ``module`` (``tilelang.jit`` is core, ``tilelang.jit.adapter.nvrtc``
    and ``tilelang.cuda`` are other distributions': an explicit reuse of another plugin, such as
    CuTeDSL composing the CUDA pipeline, is that plugin's business, not core's API)."""
    if not IN_REPO:
        return module in _installed_core_modules()
    path = CORE_SRC.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def api_violations(source: str, own: str) -> Iterator[str]:
    """Imports of core modules outside the plugin API (``own``: the distribution's package)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [a.name for a in node.names])]
        elif isinstance(node, ast.Import):
            modules = [(a.name, []) for a in node.names]
        else:
            continue
        for module, names in modules:
            if not is_core(module) or (own and (module == own or module.startswith(own + "."))):
                continue
            if module not in api.PUBLIC_MODULES:
                yield f"line {node.lineno}: {module} is not part of the plugin API"
            elif module == "tilelang.plugin":
                for name in names:
                    if name not in api.__all__:
                        yield f"line {node.lineno}: tilelang.plugin has no {name!r}"


def test_every_plugin_distribution_imports_core_only_through_the_plugin_api() -> None:
    found = []
    sources = plugin_sources()
    assert sources, "no plugin distribution found"
    for label, (own, files) in sources.items():
        assert files, f"no modules in {label}"
        for path in files:
            found += [f"{label}: {path.name} {v}" for v in api_violations(path.read_text(), _own_package(own, path))]
    assert not found, ("plugin distributions import core outside tilelang.plugin / tilelang.language / "
                       "tilelang.errors (export the name from tilelang/plugin.py, or use what is there):\n"
                       + "\n".join(found))


@pytest.mark.skipif(not IN_REPO, reason="scans the repository's source tree")
def test_the_scan_covers_every_first_party_plugin_and_the_vendor_example() -> None:
    sources = plugin_sources()
    assert {"tilelang-cuda", "tilelang-exec-nvrtc", "tilelang-exec-cython", "vendor-backend"} <= set(sources)
    assert sources["tilelang-exec-nvrtc"][0] == "tilelang.jit.adapter.nvrtc"
    assert sources["vendor-backend"][0] == "tilelang_acme"


@pytest.mark.parametrize(("source", "expected"), [
    ("from tilelang.backend.manifest import BackendModule", ["line 1: tilelang.backend.manifest is not part"]),
    ("def f():\n    from tilelang.jit.arguments import ArgumentBinder",
     ["line 2: tilelang.jit.arguments is not part"]),
    ("import tilelang.cache", ["line 1: tilelang.cache is not part"]),
    ("from tilelang import __version__", ["line 1: tilelang is not part"]),
    ("from tilelang.plugin import take_pass_error", ["line 1: tilelang.plugin has no 'take_pass_error'"]),
    (("from tilelang.plugin import BackendModule\nfrom tilelang.language import *\n"
      "from tilelang.errors import CompileError\nfrom tilelang.acme.ops import x\nimport tvm\n"
      "from tilelang.cuda.pipeline import lowering_passes"), []),
])
def test_the_scan_flags_imports_outside_the_api(source: str, expected: list[str]) -> None:
    found = list(api_violations(source, own="tilelang.acme"))
    assert len(found) == len(expected) and all(f.startswith(e) for f, e in zip(found, expected)), found


def test_every_exported_name_resolves_to_its_core_object() -> None:
    import tilelang.backend.manifest
    import tilelang.transform.gpu

    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert api.BackendModule is tilelang.backend.manifest.BackendModule
    assert api.PartitionParallelLoops is tilelang.transform.gpu.PartitionParallelLoops
    assert set(dir(api)) == set(api.__all__)


def test_a_name_outside_the_api_is_refused_with_where_to_look() -> None:
    with pytest.raises(AttributeError, match=r"'take_pass_error': it is not part of the plugin API "
                       r"\(tilelang.plugin.__all__ lists what is; docs/writing-a-backend.md"):
        api.take_pass_error  # noqa: B018


def test_importing_the_plugin_api_and_manifest_types_does_not_import_tvm() -> None:
    code = ("import sys, tilelang.plugin as p; p.BackendModule, p.ExecutionBackendSpec, p.TargetDetector, "
            "p.hookimpl, p.DeviceToolchain, p.PassPipeline, p.CompiledArtifact; "
            "print(sorted(m for m in sys.modules if m == 'tvm' or m.startswith('tvm.')))")
    env = {**os.environ, "TILELANG_NO_PLUGIN_AUTOLOAD": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


# -- the typed device toolchain ---------------------------------------------------------


def _manifest(**extra: object) -> BackendModule:
    return BackendModule(name="acme", target_kinds=("llvm",), pipelines={"llvm": "tilelang.cpu.pipeline:CPU_PIPELINE"},
                         device_codegens={"llvm": "tilelang.cpu.codegen:CPU_DEVICE_CODEGEN"},
                         execution_backends=(ExecutionBackendSpec("tvm_ffi"),), **extra)


def test_a_manifest_toolchain_must_be_a_device_toolchain() -> None:
    with pytest.raises(ManifestError, match=r"BackendModule\('acme'\).toolchain must be a DeviceToolchain or a "
                       "reference, got 42"):
        _manifest(toolchain=42)
    with pytest.raises(ManifestError, match=r"DeviceToolchain\(''\): name must be a non-empty string"):
        DeviceToolchain("", compile=bytes)
    with pytest.raises(ManifestError, match=r"DeviceToolchain\('x'\).compile must be callable or a "
                       r"'package.module:attribute' reference, got 3"):
        DeviceToolchain("x", compile=3)  # type: ignore[arg-type]
    assert _manifest(toolchain=DeviceToolchain("cc", compile=lambda s, t, n: b"")).toolchain.name == "cc"


def _context(toolchain: object) -> SimpleNamespace:
    return SimpleNamespace(module=_manifest(toolchain=toolchain), target="the-target")


ARTIFACT = SimpleNamespace(kernel_name="k", device_source="__global__ void k() {}")


def test_compile_device_source_wraps_every_toolchain_failure_once() -> None:
    def broken(source: str, target: object, name: str) -> bytes:
        raise OSError("cc: not found")

    with pytest.raises(CompileError, match=r"kernel 'k' \(execution backend 'nvrtc'\): the cc toolchain of target "
                       r"backend 'acme' failed: OSError: cc: not found"):
        compile_device_source(ARTIFACT, _context(DeviceToolchain("cc", compile=broken)), "nvrtc")
    with pytest.raises(CompileError, match="the cc toolchain of target backend 'acme' returned str, not the "
                       "binary's bytes"):
        compile_device_source(ARTIFACT, _context(DeviceToolchain("cc", compile=lambda s, t, n: "text")), "nvrtc")
    calls = []
    good = DeviceToolchain("cc", compile=lambda s, t, n: calls.append((s, t, n)) or b"\x7fELF")
    assert compile_device_source(ARTIFACT, _context(good), "nvrtc") == b"\x7fELF"
    assert calls == [(ARTIFACT.device_source, "the-target", "k")]


def test_prepare_device_runtime_runs_the_hook_and_wraps_its_failure() -> None:
    ran = []
    prepare_device_runtime(_context(DeviceToolchain("cc", compile=bytes, prepare_runtime=lambda: ran.append(1))))
    prepare_device_runtime(_context(None))  # no toolchain: nothing to prepare
    assert ran == [1]

    def broken() -> None:
        raise RuntimeError("no driver")

    with pytest.raises(CompileError, match="preparing TVM's runtime: the cc toolchain of target backend 'acme' "
                       "failed: RuntimeError: no driver"):
        prepare_device_runtime(_context(DeviceToolchain("cc", compile=bytes, prepare_runtime=broken)))


def test_one_stream_rule_for_every_launcher():
    # nvrtc, cython and tvm_ffi all take stream= through tilelang.plugin.stream_handle
    from tilelang.errors import ArgumentError
    from tilelang.plugin import stream_handle

    class TorchLikeStream:
        cuda_stream = 1234

    assert stream_handle(7, "k") == 7 and stream_handle(TorchLikeStream(), "k") == 1234
    for bad in (True, "stream", 1.5j, None):
        with pytest.raises(ArgumentError, match=r"kernel 'k': stream= takes a CUDA stream handle \(int\) or a "
                                                r"torch.cuda.Stream, got"):
            stream_handle(bad, "k")
