"""Upstream TileLang's module surface, as its tests and scripts use it: ``from tilelang
import tvm``, ``with tvm.target.Target(...)`` choosing the target, the artifact and kernel
attributes, ``tilelang.PassConfigKey`` and pass-config resolution against the backend,
``tilelang.env`` and the cache switches, and ``tilelang.testing``'s helpers."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tilelang
import tilelang.testing
import torch
from tilelang import CompileError, ManifestError, tvm
from tilelang.backend import BackendModule, create_backend_context, registered_backends
from tilelang.cache import KernelCache, default_cache_dir
from tilelang.engine import CompiledArtifact
from tilelang.testing import upstream
from tilelang.testing.kernels import elementwise_add

PassConfigKey = tilelang.PassConfigKey


def _inputs(m: int = 64, n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((m, n), dtype=np.float32), rng.standard_normal((m, n), dtype=np.float32)


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


# -- from tilelang import tvm -------------------------------------------------------------------

def test_tilelang_tvm_is_the_tvm_module_and_import_tilelang_stays_tvm_free() -> None:
    code = textwrap.dedent("""
        import sys, tilelang
        before = "tvm" in sys.modules
        from tilelang import tvm
        import tvm as real
        print(before, tvm is real, tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER.value)
    """)
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "tl.disable_tma_lower"]
    with pytest.raises(AttributeError, match="module 'tilelang' has no attribute 'no_such_name'"):
        tilelang.no_such_name  # noqa: B018


# -- target="auto" and an enclosing tvm.target.Target ---------------------------------------------

def test_enclosing_target_chooses_what_auto_compiles_for() -> None:
    func = elementwise_add(64, 16)
    with tvm.target.Target("c"):
        artifact = tilelang.lower(func)
    assert artifact.target.startswith('{"kind": "c"') and artifact.target_backend == "cpu"
    assert "#include" in artifact.kernel_source and artifact.kernel_source == artifact.host_source
    with tvm.target.Target("c"):
        kernel = tilelang.compile(func, -1, execution_backend="cython")
        explicit = tilelang.compile(func, out_idx=-1, target="llvm")  # an argument wins
    assert kernel.target.kind.name == "c" and kernel.execution_backend == "cython"
    assert "enclosing tvm.target.Target" in kernel.describe()
    assert explicit.target.kind.name == "llvm"
    a, b = _inputs()
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6, atol=1e-6)


def test_enclosing_target_is_kept_like_an_explicit_one() -> None:
    # "auto" alone would switch to the c kind for cython; a target the caller chose is kept
    with tvm.target.Target("llvm"), pytest.raises(tilelang.TileLangError,
                                                 match="does not support target kind 'llvm'.*pass target='c'"):
        create_backend_context("auto", execution_backend="cython")


def test_default_target_and_execution_backend_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", '{"kind": "c"}')
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "cython")
    assert tilelang.env.get_default_target() == {"kind": "c"}
    context = create_backend_context()
    assert context.target.kind.name == "c" and context.execution_spec.name == "cython"
    assert context.target_source == "auto (TILELANG_DEFAULT_TARGET)"
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "{kind: c}")
    with pytest.raises(ValueError, match="Use JSON syntax"):
        tilelang.env.get_default_target()


# -- CompiledArtifact and JITKernel attributes ------------------------------------------------------

def test_lowered_artifact_has_upstreams_attributes() -> None:
    artifact = tilelang.lower(elementwise_add(64, 16), target="llvm", out_idx=[-1])
    assert artifact.kernel_source and artifact.kernel_source == artifact.host_source  # LLVM IR
    assert isinstance(artifact.host_mod, tvm.IRModule) and artifact.device_mod is None
    assert artifact.rt_mod is artifact.host_module is not None
    assert [p.name for p in artifact.params] == ["A", "B", "C"] and not artifact.params[0].is_scalar()
    again = CompiledArtifact.from_json(artifact.to_json())  # IR stays in memory only
    assert again.host_mod is None and again.kernel_source == artifact.kernel_source


def test_engine_lower_is_upstreams_lower_with_its_keywords() -> None:
    """Upstream's tests call ``tilelang.engine.lower.lower(func, target=...)`` and pass
    ``enable_device_compile=False``; the backend-context form is lower_with_context."""
    from tilelang.engine.lower import lower

    artifact = lower(elementwise_add(64, 16), target="llvm", runtime_only=False,
                     enable_host_codegen=True, enable_device_compile=False)
    assert artifact.kernel_name == "main" and [p.name for p in artifact.params] == ["A", "B", "C"]
    again = tilelang.lower(elementwise_add(64, 16), "llvm", None, enable_device_compile=True)
    assert again.kernel_source == artifact.kernel_source

def test_cuda_artifact_kernel_source_is_the_device_source() -> None:
    if "cuda" not in registered_backends():
        pytest.skip("tilelang-cuda is not installed")
    artifact = tilelang.lower(elementwise_add(64, 16), target={"kind": "cuda", "arch": "sm_80"})
    assert "__global__" in artifact.kernel_source and artifact.kernel_source == artifact.device_source
    assert isinstance(artifact.device_mod, tvm.IRModule)


def test_jit_kernel_has_upstreams_attributes() -> None:
    kernel = tilelang.compile(elementwise_add(64, 16), out_idx=[-1], target="llvm")
    assert kernel.out_idx == [2]
    assert [(p.name, p.dtype, p.shape) for p in kernel.params] == [
        ("A", "float32", (64, 16)), ("B", "float32", (64, 16)), ("C", "float32", (64, 16))]
    assert kernel.target.kind.name == "llvm" and kernel.target_host.kind.name == "llvm"
    assert kernel.execution_backend == "tvm_ffi"
    assert kernel.kernel_source == kernel.get_kernel_source() == kernel.host_source != ""
    assert kernel.prim_func is not None and kernel.pass_configs == {}


def test_run_once_and_show_source(capsys) -> None:
    kernel = tilelang.compile(elementwise_add(64, 16), out_idx=[-1], target="llvm")
    out = kernel.run_once()  # on inputs the profiler makes
    assert tuple(out.shape) == (64, 16)
    seen = []
    kernel.run_once(lambda a, b: seen.append((tuple(a.shape), tuple(b.shape))))
    assert seen == [((64, 16), (64, 16))]
    kernel.show_source("both")
    assert capsys.readouterr().out.count(kernel.get_kernel_source()) >= 1
    with pytest.raises(ValueError, match="show_source\\(which='device'\\): use 'kernel', 'host' or 'both'"):
        kernel.show_source("device")


# -- PassConfigKey and pass configs ---------------------------------------------------------------

def test_pass_config_key_spells_upstreams_keys() -> None:
    import tilelang.transform

    assert tilelang.transform.PassConfigKey is PassConfigKey
    assert PassConfigKey.TL_DISABLE_WARP_SPECIALIZED == "tl.disable_warp_specialized"
    assert str(PassConfigKey.TL_ENABLE_FAST_MATH) == f"{PassConfigKey.TL_ENABLE_FAST_MATH}" == "tl.enable_fast_math"
    assert PassConfigKey("tl.config_index_bitwidth") is PassConfigKey.TL_CONFIG_INDEX_BITWIDTH
    assert PassConfigKey.TIR_DISABLE_VECTORIZE.value == "tirx.disable_vectorize"


def test_backends_declare_the_pass_configs_they_honour() -> None:
    cpu = registered_backends()["cpu"]
    assert set(cpu.pass_configs) == {"tl.disable_vectorize", "tl.disable_parallel", "tl.bounds_check",
                                     "tl.emit_line_directives"}
    if "cuda" in registered_backends():
        assert {"tl.disable_wgmma", "tl.min_blocks_per_sm"} <= set(registered_backends()["cuda"].pass_configs)
    with pytest.raises(ManifestError, match=r"pass_configs\['nodot'\]: keys are namespaced names"):
        BackendModule(name="toy", target_kinds=("llvm",), pipelines={"llvm": cpu.pipelines["llvm"]},
                      device_codegens={"llvm": cpu.device_codegens["llvm"]},
                      execution_backends=cpu.execution_backends, pass_configs={"nodot": "x"})


def test_upstream_keys_the_backend_does_not_apply_are_accepted(caplog) -> None:
    plain = tilelang.compile(elementwise_add(64, 16), out_idx=[-1], target="llvm")
    with caplog.at_level(logging.DEBUG, logger="tilelang.pass_configs"):
        kernel = tilelang.compile(elementwise_add(64, 16), out_idx=[-1], target="llvm", pass_configs={
            PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True, "tl.enable_fast_math": True})
    assert kernel.pass_configs == {} and kernel.cache_key == plain.cache_key  # nothing applied
    assert "'tl.enable_fast_math' (a key of upstream TileLang) is not applied by target backend 'cpu'" \
        in caplog.text
    if "cuda" in registered_backends():  # the CUDA backend applies it (its TMA rings' producer warp)
        assert "'tl.disable_warp_specialized' (a key of target backends ['cuda']) is not applied by target " \
               "backend 'cpu'" in caplog.text
    a, b = _inputs()
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6, atol=1e-6)


def test_another_backends_key_is_accepted_and_not_applied(caplog) -> None:
    if "cuda" not in registered_backends():
        pytest.skip("tilelang-cuda is not installed")
    context = create_backend_context("llvm")
    from tilelang.engine.lower import validate_pass_configs

    with caplog.at_level(logging.DEBUG, logger="tilelang.pass_configs"):
        assert validate_pass_configs({"tl.min_blocks_per_sm": 2}, context) == {}
    assert "target backends ['cuda']" in caplog.text


def test_tvm_configs_reach_tvms_pass_context_under_tvm_027_names() -> None:
    seen = []

    @tvm.instrument.pass_instrument
    class RecordConfig:
        def run_before_pass(self, mod, info):
            if not seen:
                seen.append(dict(tvm.transform.PassContext.current().config))

    kernel = tilelang.compile(elementwise_add(64, 16), out_idx=[-1], target="llvm", instruments=[RecordConfig()],
                              pass_configs={"tir.disable_vectorize": True, "tirx.noalias": True,
                                            "tl.disable_parallel": True})
    assert kernel.pass_configs == {"tirx.disable_vectorize": True, "tirx.noalias": True, "tl.disable_parallel": True}
    assert {k: bool(v) for k, v in seen[0].items()} == {"tirx.disable_vectorize": True, "tirx.noalias": True}


@pytest.mark.parametrize("configs, message", [
    ({"tl.disable_paralel": 1}, r"unknown pass config\(s\) \['tl.disable_paralel'\]; valid: tl.bounds_check, tl.disable_parallel, "
                                r"tl.disable_vectorize, tl.emit_line_directives \(the keys target backend 'cpu' honours\).* "
                                r"'tl.disable_paralel': did you mean 'tl.disable_parallel'\?$"),
    ({"tir.disable_vectorise": 1}, r"\['tir.disable_vectorise'\].*did you mean 'tirx.disable_vectorize'\?"),
    ({3: True}, r"pass config key 3 is a int; use a string such as 'tl.disable_vectorize'"),
])
def test_unknown_pass_configs_name_the_nearest_key(configs, message) -> None:
    with pytest.raises(CompileError, match=message):
        tilelang.compile(elementwise_add(8, 8), target="cpu", pass_configs=configs)


# -- tilelang.env and the cache switches ------------------------------------------------------------

def _descriptor(name: str):
    return type(tilelang.env).__dict__[name]


def test_env_attributes_read_the_environment_and_can_be_forced(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.delenv("TILELANG_TMP_DIR", raising=False)
    assert tilelang.env.TILELANG_CACHE_DIR == str(tmp_path / "a")
    assert tilelang.env.TILELANG_TMP_DIR == str(tmp_path / "a" / "tmp")
    try:
        tilelang.env.TILELANG_CACHE_DIR = str(tmp_path / "forced")
        assert default_cache_dir() == tmp_path / "forced" and KernelCache().root == tmp_path / "forced"
        assert tilelang.env.TILELANG_TMP_DIR == str(tmp_path / "forced" / "tmp")
    finally:
        tilelang.env.TILELANG_CACHE_DIR = None
    assert _descriptor("TILELANG_CACHE_DIR")._forced_value is None
    assert default_cache_dir() == tmp_path / "a"
    from tilelang.env import env  # upstream's spelling of the same object

    assert env is tilelang.env and env.TILELANG_CACHE_DIR == str(tmp_path / "a") and env.is_cache_enabled()
    assert tilelang.env.flag("TILELANG_NO_SUCH_FLAG") is False  # the module's own helpers remain


def test_disable_cache_enable_cache_and_clear_cache(monkeypatch) -> None:
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    func = elementwise_add(32, 8)
    first = tilelang.compile(func, out_idx=[-1], target="llvm")
    assert tilelang.is_cache_enabled() and not first.from_cache
    try:
        tilelang.disable_cache()
        assert not tilelang.is_cache_enabled() and not KernelCache().enabled
        assert not tilelang.compile(func, out_idx=[-1], target="llvm").from_cache
    finally:
        tilelang.enable_cache()
    assert tilelang.compile(func, out_idx=[-1], target="llvm").from_cache
    tilelang.cache.clear_cache()
    assert not tilelang.compile(func, out_idx=[-1], target="llvm").from_cache
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    assert not tilelang.is_cache_enabled()


# -- tilelang.testing: upstream's helpers -----------------------------------------------------------

def _skipif_conditions(func) -> list[bool]:
    return [mark.args[0] for mark in func.pytestmark if mark.name == "skipif"]


@pytest.mark.parametrize("mode, major, minor, skipped", [
    ("ge", 9, 0, False), ("ge", 10, 0, True), ("gt", 8, 9, False), ("gt", 9, 0, True),
    ("lt", 9, 0, True), ("lt", 10, 0, False), ("le", 9, 0, False), ("eq", 9, 0, False), ("eq", 8, 0, True),
])
def test_compute_version_requirements_compare_like_upstream(monkeypatch, mode, major, minor, skipped) -> None:
    # an imaginary sm_90 machine; the comparison is the first skipif, requires_cuda's follows
    monkeypatch.setattr(upstream, "cuda_compute_versions", lambda: ((9, 0),))
    named = getattr(tilelang.testing, f"requires_cuda_compute_version_{mode}")

    def test_dummy() -> None:
        pass

    for decorator in (upstream.requires_cuda_compute_version(major, minor, mode), named(major, minor)):
        conditions = [m.args[0] for m in decorator(test_dummy).pytestmark if m.name == "skipif"]
        assert conditions[-2] is skipped
    with pytest.raises(ValueError, match="mode 'ne' is not one of"):
        upstream.requires_cuda_compute_version(9, 0, "ne")


def test_requires_cuda_needs_a_gpu_and_the_cuda_backend(monkeypatch) -> None:
    monkeypatch.setattr(upstream, "cuda_compute_versions", lambda: ())
    assert "no CUDA GPU here" in upstream.Requirement("r", upstream._why_no_cuda).reason
    monkeypatch.setattr(upstream, "cuda_compute_versions", lambda: ((8, 0),))
    reason = upstream.Requirement("r", upstream._why_no_cuda).reason
    if "cuda" in registered_backends():
        assert reason is None
    else:
        assert "pip install 'tilelang[cuda]'" in reason


RUN_AS_SCRIPT = """
import tilelang
import tilelang.testing


@tilelang.testing.requires_llvm
def test_llvm():
    pass


@tilelang.testing.requires_package("tilelang_no_such_package")
def test_package():
    pass


@tilelang.testing.requires_cuda
def test_cuda():
    pass


@tilelang.testing.requires_rocm
def test_rocm():
    pass


if __name__ == "__main__":
    tilelang.testing.main()
"""


def test_main_runs_pytest_on_the_calling_file_with_the_requirements(tmp_path) -> None:
    script = tmp_path / "test_script.py"
    script.write_text(RUN_AS_SCRIPT)
    done = subprocess.run([sys.executable, str(script), "-q", "-rs", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, cwd=tmp_path)
    cuda = tilelang.testing.requires_cuda.reason is None
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{2 if cuda else 1} passed, {2 if cuda else 3} skipped" in done.stdout
    assert "needs package(s) ['tilelang_no_such_package'] (not installed)" in done.stdout
    assert "requires_rocm: no ROCm GPU here" in done.stdout


def test_testing_helpers_work_without_torch() -> None:
    # torch is optional: blocked here, the helpers still decide (requires_cuda from the driver)
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None
        import tilelang.testing as t
        print(bool(t.requires_llvm), isinstance(t.requires_cuda.reason, (str, type(None))))
        t.set_random_seed(3)
    """)
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_torch_assert_close_allows_a_ratio_of_mismatches() -> None:
    expected = torch.linspace(-1, 1, 1000, dtype=torch.float16)
    actual = expected.clone()
    actual[[3, 500, 998]] += 0.5
    assert tilelang.testing.torch_assert_close(actual, expected, rtol=1e-3, atol=1e-3, max_mismatched_ratio=0.005)
    with pytest.raises(AssertionError, match=r"3 of 1000 elements differ \(0.30%\), more than the 1 allowed"
                                             r".*first at \[3\]"):
        tilelang.testing.torch_assert_close(actual, expected, rtol=1e-3, atol=1e-3)
    with pytest.raises(AssertionError, match="dtype differs: LHS torch.float32, RHS torch.float16"):
        tilelang.testing.torch_assert_close(actual.float(), expected)
    assert tilelang.testing.torch_assert_close(actual.float(), expected, check_dtype=False, max_mismatched_ratio=0.01)


def test_set_random_seed_seeds_python_numpy_and_torch() -> None:
    import random

    draws = []
    for _ in range(2):
        tilelang.testing.set_random_seed(7)
        draws.append((random.random(), float(np.random.rand()), float(torch.rand(1))))
    assert draws[0] == draws[1]


def regression_fake_benchmark() -> None:
    upstream.process_func(lambda scale: 1.5 * scale, "fake", scale=2.0)


def test_regression_runs_the_callers_regression_functions(capsys) -> None:
    assert tilelang.testing.regression() == [("fake", 3.0)]
    assert capsys.readouterr().out == "fake: 3.0\n"
