"""The ROCm manifest, targets, detector and execution backends, without an AMD GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tilelang
from tilelang.rocm import execution, target
from tilelang.testing import kernels as kit

PACKAGE = Path(target.__file__).parent


def test_manifest_registered_with_hip_alias():
    backend = tilelang.backend.registered_backends()["rocm"]
    assert backend.target_kinds == ("rocm",)
    assert backend.aliases == ("hip",)
    assert [s.name for s in backend.execution_backends] == ["tvm_ffi", "cython"]


@pytest.mark.skipif(target.gpu_unavailable_reason() is None, reason="an AMD GPU is present")
def test_hip_alias_without_a_gpu_targets_gfx90a():
    context = tilelang.backend.create_backend_context("hip", execution_backend=None)
    assert context.module.name == "rocm"
    assert context.target.export()["mcpu"] == target.DEFAULT_ARCH == "gfx90a"
    assert int(context.target.export()["thread_warp_size"]) == 64


@pytest.mark.parametrize("requested", ["rocm", {"kind": "rocm"}])
def test_tvm_rocm_targets_resolve_to_this_backend(requested):
    """TVM fills a missing mcpu itself (rocminfo; gfx900 without a GPU): kept, it is a gfx name."""
    context = tilelang.backend.create_backend_context(requested, execution_backend=None)
    assert context.module.name == "rocm"
    assert target.parse_arch(context.target.export()["mcpu"])


def test_explicit_arch_is_kept():
    context = tilelang.backend.create_backend_context({"kind": "rocm", "mcpu": "gfx942"}, execution_backend=None)
    assert context.target.export()["mcpu"] == "gfx942"


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1030", "gfx90a:xnack-"])
def test_parse_arch_accepts_llvm_processor_names(arch):
    assert target.parse_arch(arch) == arch


@pytest.mark.parametrize("arch", ["sm_90", "gfx", "mi300", "gfx90a;rm"])
def test_parse_arch_refuses_other_names(arch):
    with pytest.raises(tilelang.LanguageError, match=r"is not an AMD GPU processor name: write it as LLVM names it"):
        target.parse_arch(arch)


def test_mfma_archs():
    assert target.has_mfma("gfx90a") and target.has_mfma("gfx942:sramecc+")
    assert not target.has_mfma("gfx1030") and not target.has_mfma("gfx908")


def test_detector_says_why_without_a_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(target, "_KFD", str(tmp_path / "kfd"))
    arch, why = target._probe.__wrapped__()
    assert arch is None
    assert re.search(r"no AMD GPU on this machine \(.*/kfd, the ROCm kernel driver's device, does not exist\)", why)


def test_detector_with_a_device_file_but_no_agent(monkeypatch, tmp_path):
    (tmp_path / "kfd").touch()
    monkeypatch.setattr(target, "_KFD", str(tmp_path / "kfd"))
    monkeypatch.setattr(target, "_agents_from_tools", list)
    arch, why = target._probe.__wrapped__()
    assert arch is None and "neither rocm_agent_enumerator nor rocminfo reports a GPU agent" in why


def test_detector_picks_the_first_gpu_agent(monkeypatch, tmp_path):
    (tmp_path / "kfd").touch()
    monkeypatch.setattr(target, "_KFD", str(tmp_path / "kfd"))
    monkeypatch.setattr(target, "_agents_from_tools", lambda: ["gfx942", "gfx942"])
    assert target._probe.__wrapped__() == ("gfx942", None)


@pytest.mark.skipif(target.gpu_unavailable_reason() is None, reason="an AMD GPU is present")
def test_execution_backends_say_why_they_cannot_run():
    assert "no AMD GPU" in execution.tvm_ffi_unavailable_reason()
    assert "no AMD GPU" in execution.cython_unavailable_reason()
    with pytest.raises(tilelang.TileLangError, match=r"no AMD GPU"):
        tilelang.compile(kit.elementwise_add(64, 64), target="hip")


def test_execution_backends_without_a_rocm_runtime(monkeypatch):
    """With a GPU but this TVM wheel (no ROCm runtime), tvm_ffi names what is missing;
    cython names its missing HIP launcher: no launch is ever faked."""
    monkeypatch.setattr(execution, "gpu_unavailable_reason", lambda: None)
    assert "no ROCm runtime (device_api.rocm)" in execution.tvm_ffi_unavailable_reason()
    assert "has no HIP launcher" in execution.cython_unavailable_reason()


@pytest.mark.skipif(target.gpu_unavailable_reason() is None, reason="an AMD GPU is present")
def test_backends_list_shows_rocm_compiles_but_cannot_run():
    out = subprocess.run([sys.executable, "-m", "tilelang", "backends", "list", "--json"], capture_output=True,
                         text=True, check=True).stdout
    rocm = next(e for e in json.loads(out)["target_backends"] if e["name"] == "rocm")
    assert rocm["distribution"] == "tilelang-rocm"
    assert "generates code" in rocm["reason"] and "no AMD GPU" in rocm["reason"]


def test_imports_nothing_from_the_cuda_backend():
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "tilelang.cuda" in p.read_text()]
    assert not offenders, f"tilelang-rocm imports the CUDA backend: {offenders}"


def test_import_stays_light():
    code = "import sys, tilelang, tilelang.rocm.backend; print('tvm' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
