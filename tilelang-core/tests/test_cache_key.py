"""The kernel cache key, one input at a time: two compiles that differ in exactly one thing
(the target with the same host, the execution backend with the same target and host) must
not share a key. test_cache.py varies target and host together (llvm vs c), so a key that
dropped the target alone would still pass there (issue 15, item 8). And the plugin code an
editable install hashes into the key is found where its .pth file points."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tilelang.backend import create_backend_context
from tilelang.backend.registry import REGISTRY, origin
from tilelang.jit import fingerprint
from tilelang.jit.adapter.tvm_ffi.backend import TVMFFIExecutionBackend
from tilelang.jit.kernel import _kernel_key
from tilelang.testing.kernels import elementwise_add

FUNC = elementwise_add(16, 16)


def key(context) -> str:
    return _kernel_key(FUNC, context, (), {})


def test_the_same_request_gives_the_same_key() -> None:
    first = create_backend_context({"kind": "llvm", "mcpu": "skylake"}, "llvm", "tvm_ffi")
    again = create_backend_context({"kind": "llvm", "mcpu": "skylake"}, "llvm", "tvm_ffi")
    assert key(first) == key(again)


def test_targets_that_differ_only_in_their_cpu_get_different_keys() -> None:
    # the CPU analogue of sm_80 vs sm_90 under one host: code for one must never load for the other
    skylake = create_backend_context({"kind": "llvm", "mcpu": "skylake"}, "llvm", "tvm_ffi")
    znver3 = create_backend_context({"kind": "llvm", "mcpu": "znver3"}, "llvm", "tvm_ffi")
    assert str(skylake.target_host) == str(znver3.target_host)
    assert skylake.execution_spec.name == znver3.execution_spec.name == "tvm_ffi"
    assert skylake.fingerprint() != znver3.fingerprint()
    assert key(skylake) != key(znver3)


class TwinExecutionBackend(TVMFFIExecutionBackend):
    """tvm_ffi under another name, registered as core's: only the execution backend's name
    differs, not its distribution (which the key's plugin fingerprint covers already)."""

    name = "tvm_ffi_twin"


def test_execution_backends_of_one_distribution_get_different_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY.origins, ("execution", TwinExecutionBackend.name), origin("execution", "tvm_ffi"))
    tvm_ffi = create_backend_context("c", execution_backend="tvm_ffi")
    twin = dataclasses.replace(tvm_ffi, execution_backend=TwinExecutionBackend(),
                               execution_spec=dataclasses.replace(tvm_ffi.execution_spec, name="tvm_ffi_twin"))
    assert (twin.module, twin.target, twin.target_host) == (tvm_ffi.module, tvm_ffi.target, tvm_ffi.target_host)
    assert twin.fingerprint() != tvm_ffi.fingerprint()
    assert key(twin) != key(tvm_ffi)


def test_tvm_ffi_and_cython_on_one_target_get_different_keys() -> None:
    pytest.importorskip("tilelang.jit.adapter.cython", reason="tilelang-exec-cython is not installed")
    tvm_ffi = create_backend_context("c", execution_backend="tvm_ffi")
    cython = create_backend_context("c", execution_backend="cython")
    assert str(tvm_ffi.target) == str(cython.target) and str(tvm_ffi.target_host) == str(cython.target_host)
    assert tvm_ffi.fingerprint() != cython.fingerprint()
    assert key(tvm_ffi) != key(cython)


class _File:
    """A file of an installed distribution, as importlib.metadata lists it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.suffix = path.suffix

    def locate(self) -> Path:
        return self.path


class _Dist:
    def __init__(self, direct_url: dict | None, files: list[Path]) -> None:
        self.direct_url = direct_url
        self.files = [_File(f) for f in files]

    def read_text(self, name: str) -> str | None:
        return json.dumps(self.direct_url) if name == "direct_url.json" and self.direct_url else None


def test_an_editable_plugins_sources_are_the_folders_its_pth_names(tmp_path: Path) -> None:
    """The key hashes an editable plugin's code where its .pth puts it on sys.path (which
    need not be <project>/src); only when no .pth names a folder, the project's src/ or the
    project itself."""
    project, elsewhere, other = tmp_path / "project", tmp_path / "checkout" / "python", tmp_path / "other"
    for folder in (project / "src", elsewhere, other):
        folder.mkdir(parents=True)
    pth, cfg = tmp_path / "_acme.pth", tmp_path / "acme.cfg"
    pth.write_text(f"# a comment\nimport acme_hook\n{elsewhere}\n{tmp_path / 'missing'}\n")
    cfg.write_text(f"{other}\n")  # not a .pth: never read, though it names a folder
    url = {"dir_info": {"editable": True}, "url": project.as_uri()}
    assert fingerprint.editable_source_roots(_Dist(url, [pth, cfg])) == [elsewhere]
    assert fingerprint.editable_source_roots(_Dist(url, [cfg])) == [project / "src"]
    (project / "src").rmdir()
    assert fingerprint.editable_source_roots(_Dist(url, [])) == [project]
    assert fingerprint.editable_source_roots(_Dist({"url": project.as_uri()}, [pth])) is None  # a wheel install
