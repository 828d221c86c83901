"""The backend absent, refused or unable to run: what users are told."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import tilelang
from click.testing import CliRunner
from cute_kernels import swizzled_transpose, tile_copy_scale
from tilelang.backend import create_backend_context
from tilelang.cli.main import cli
from tilelang.errors import BackendNotFoundError, LanguageError


@pytest.fixture
def without_cutedsl(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILELANG_PLUGINS_DENY", "cutedsl")
    monkeypatch.delenv("TILELANG_ROUTE", raising=False)
    tilelang.load_plugins(force=True)
    yield
    monkeypatch.delenv("TILELANG_PLUGINS_DENY")
    tilelang.load_plugins(force=True)


def test_backends_list_says_why_cutedsl_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilelang.cutedsl import target

    monkeypatch.setattr(target, "dsl_unavailable_reason", lambda: "NVIDIA CuTe DSL is not installed (test)")
    result = CliRunner().invoke(cli, ["backends", "list", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    (execution,) = [e for e in report["execution_backends"] if e["name"] == "cutedsl"]
    assert "NVIDIA CuTe DSL is not installed (test)" in json.dumps(execution)
    (backend,) = [b for b in report["target_backends"] if b["name"] == "cutedsl"]
    assert backend["distribution"].startswith("tilelang-cutedsl")


def test_dsl_missing_reason_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from tilelang.cutedsl import target

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cutlass" else real(name, *a))
    assert target.dsl_unavailable_reason() == (
        "NVIDIA CuTe DSL is not installed (the 'cutlass' package); to fix: pip install "
        "'tilelang-cutedsl[dsl]' (nvidia-cutlass-dsl 4.8)")


def test_opting_in_to_a_refused_backend_says_so(without_cutedsl: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_ROUTE", "cutedsl")
    with pytest.raises(BackendNotFoundError, match=re.escape(
            "TILELANG_ROUTE names router 'cutedsl', which no installed plugin provides (installed routers: none); "
            "to fix: install the distribution that provides it, or remove it from TILELANG_ROUTE. Note: "
            "'cutedsl' was claimed by a plugin that is not used: plugin 'cutedsl' from tilelang-cutedsl")):
        create_backend_context("cuda", kernel=tile_copy_scale(), execution_backend=None)


def test_without_the_backend_cuda_stays_and_the_extension_is_unknown(without_cutedsl: None) -> None:
    context = create_backend_context("cuda", kernel=tile_copy_scale(), execution_backend=None)
    assert context.module.name == "cuda" and context.route is None
    with pytest.raises(LanguageError, match=re.escape(
            "T.ext.swizzled_shared: no installed plugin provides this language extension (installed: none)")):
        swizzled_transpose()
