"""The kernel cache key covers the code of every plugin distribution in a compile: a vendor
pass edited without a version bump must not hit kernels the old pass compiled. Distributions
are made here as an installer would leave them (a dist-info folder on sys.path), editable
(sources through a .pth file) and from a wheel (file hashes in RECORD)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_plugins import dist_info
from tilelang.backend import create_backend_context
from tilelang.jit import fingerprint
from tilelang.jit.kernel import _kernel_key
from tilelang.testing.kernels import elementwise_add

PASS_V1 = "def acme_pass(func):\n    return func\n"
PASS_V2 = "def acme_pass(func):\n    return func.with_attr('acme', 1)\n"


@pytest.fixture
def editable_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An editable install of 'acme-fp': its sources live in a project folder."""
    source = tmp_path / "project" / "src" / "acme_fp" / "passes.py"
    source.parent.mkdir(parents=True)
    source.write_text(PASS_V1)
    site = tmp_path / "site"
    site.mkdir()
    (site / "_acme_fp.pth").write_text(f"{tmp_path / 'project' / 'src'}\n")
    dist_info(site, "acme-fp", ["_acme_fp.pth,,"],
              {"dir_info": {"editable": True}, "url": (tmp_path / "project").as_uri()})
    monkeypatch.syspath_prepend(str(site))
    return source


def fresh(name: str) -> str:
    return fingerprint.distribution_fingerprint.__wrapped__(name)


def test_editing_an_editable_plugins_pass_changes_its_fingerprint(editable_plugin: Path) -> None:
    first = fresh("acme-fp")
    assert first and fresh("acme-fp") == first  # stable while nothing changes
    editable_plugin.write_text(PASS_V2)
    assert fresh("acme-fp") != first


def test_a_wheel_installed_plugin_is_fingerprinted_from_its_record(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "acme_whl").mkdir(parents=True)
    (site / "acme_whl" / "passes.py").write_text(PASS_V1)
    record = ["acme_whl/passes.py,sha256=AAAA,40", "acme_whl/README.txt,sha256=BBBB,5"]
    dist_info(site, "acme-whl", record)
    monkeypatch.syspath_prepend(str(site))
    first = fresh("acme-whl")
    # a reinstall of an edited pass writes another hash; a file that is not code does not count
    record_file = next(site.glob("acme_whl-*.dist-info")) / "RECORD"
    record_file.write_text(record_file.read_text().replace("BBBB", "CCCC"))
    assert fresh("acme-whl") == first
    record_file.write_text(record_file.read_text().replace("AAAA", "DDDD"))
    assert fresh("acme-whl") != first


def test_the_kernel_key_changes_when_the_target_backends_plugin_changes(
        editable_plugin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the context's target backend is taken to come from acme-fp, as if acme-fp had registered it
    real_origin = fingerprint.origin
    monkeypatch.setattr(fingerprint, "origin",
                        lambda category, name: ("acme-fp", "1.0") if category == "backend" else real_origin(category, name))
    monkeypatch.setattr(fingerprint, "distribution_fingerprint", fingerprint.distribution_fingerprint.__wrapped__)
    context = create_backend_context("cpu", execution_backend="tvm_ffi")
    func = elementwise_add(64, 64)
    assert "acme-fp:" in fingerprint.plugins_fingerprint(context)
    first = _kernel_key(func, context, (), {})
    assert _kernel_key(func, context, (), {}) == first
    editable_plugin.write_text(PASS_V2)
    assert _kernel_key(func, context, (), {}) != first


def test_core_is_not_hashed_twice_and_an_unknown_distribution_hashes_empty() -> None:
    context = create_backend_context("cpu", execution_backend="tvm_ffi")
    assert fingerprint.plugins_fingerprint(context) == ""  # cpu and tvm_ffi are core's
    assert fresh("no-such-distribution-here") == ""
