"""The benchmark families (benchmarks/families, issue 14 item 2) without a GPU: every variant
of every case lowers for sm_90 (the H200 run compiles exactly these), each family's kernels
compute what torch computes on the CPU backend at small sizes, and a failing variant or
family is reported, not raised. The nvcc half of the dry run (``python
benchmarks/families.py --dry-run``) takes minutes and is left to that command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tilelang.cuda import toolchain

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if not (BENCHMARKS / "families" / "__init__.py").is_file():
    # wheel_tests copies the tests out of the source tree; the benchmarks stay behind
    pytest.skip("benchmarks/families is not beside this test (a copy outside the source tree)",
                allow_module_level=True)

pytest.importorskip("torch")

FAMILIES = ("matmul", "bmm", "linear_bias_act", "fmha", "mla_decoding", "rope", "elementwise", "softmax", "rmsnorm",
            "matmul_fp8")


@pytest.fixture(scope="module")
def families():
    """The package, imported with benchmarks/ on sys.path; sys.path is restored afterwards
    (benchmarks/matmul.py puts examples/ first when it is loaded)."""
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    import families as package
    from families import common

    yield package, common
    sys.path[:] = saved


def test_the_issue_families_are_all_there(families):
    package, _ = families
    assert package.FAMILIES == FAMILIES
    with pytest.raises(ValueError, match=r"unknown benchmark family 'mla'; the families are: matmul, bmm"):
        package.family_module("mla")


@pytest.mark.parametrize("name", FAMILIES)
def test_every_variant_lowers_for_sm90(families, name):
    package, common = families
    cases = package.family_module(name).cases(quick=False)
    assert cases, name
    for case in cases:
        record = common.dry_run_case(case, "sm_90", nvcc=False)
        assert record["status"] == "lowered", (case.name, record["error"])
        assert len(record["variants"]) == len(case.variants) >= 1
        assert record["metric"] in ("TFLOP/s", "GB/s") and case.work > 0


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", FAMILIES)
def test_quick_variants_compile_for_sm90_as_the_gpu_runs_them(families, name):
    """The --quick cases, lowered as tvm_ffi (the GPU run's default) gets them and compiled
    by nvcc: a producer warp referring to a local only the consumers hold compiled nowhere
    but on the GPU before (mla_decoding, H200, 2026-12-01)."""
    package, common = families
    for case in package.family_module(name).cases(quick=True):
        record = common.dry_run_case(case, "sm_90", nvcc=True)
        assert record["status"] == "compiled", (case.name, record["error"])


@pytest.mark.parametrize("name", FAMILIES)
def test_kernels_match_torch_on_the_cpu(families, name):
    package, common = families
    cases = package.family_module(name).small_cases()
    if not cases:
        pytest.skip(f"{name}: no CPU case (its module says why)")
    for case in cases:
        record = common.check_on_cpu(case)
        assert record["correct"] is True, (case.name, record["max_err"], case.atol, case.rtol)
        assert record["max_err"] <= case.atol + 1e-2  # a near-miss is visible, not just a bool


def test_compare_flags_a_wrong_output_and_a_nan(families):
    import torch

    _, common = families
    want = torch.ones(4, 4)
    assert common.compare(want + 1e-3, want, atol=1e-2, rtol=0.0) == (True, pytest.approx(1e-3, rel=1e-4))
    correct, err = common.compare(want + 0.5, want, atol=1e-2, rtol=1e-2)
    assert (correct, err) == (False, pytest.approx(0.5))
    broken = want.clone()
    broken[1, 2] = float("nan")
    correct, err = common.compare(broken, want, atol=1e-2, rtol=1e-2)
    assert not correct and err == float("inf")


def test_a_failing_variant_is_reported_and_the_others_still_lower(families):
    package, common = families
    case = package.family_module("softmax").make_case((64, 256), ((1, 128),), device="cpu")

    def broken() -> list:
        raise RuntimeError("this variant's builder fails")

    case.variants.insert(0, common.Variant("broken", broken))
    record = common.dry_run_case(case, "sm_90", nvcc=False)
    assert record["status"] == "failed"
    assert record["error"] == "broken: build: RuntimeError: this variant's builder fails"
    assert [v["status"] for v in record["variants"]] == ["failed", "lowered"]


def test_markdown_marks_errors_and_wrong_results(families):
    from families.report import markdown

    records = [
        {"name": "softmax", "case": "64x256", "shape": {"M": 64}, "metric": "GB/s", "tl_ms": 0.5, "ref_ms": 1.0,
         "ratio": 2.0, "correct": False, "max_err": 0.3, "atol": 1e-3, "rtol": 1e-2, "error": None},
        {"name": "fmha", "case": "*", "error": "the family's process ended without results (exit status -11)"},
    ]
    table = markdown(records).splitlines()
    assert len(table) == 4
    assert "| softmax | 64x256 | M=64 |" in table[2] and "| 2.0 | NO | 0.3 (0.001, 0.01) |" in table[2]
    assert table[3].startswith("| fmha | * |") and "| ERROR |" in table[3] and "exit status -11" in table[3]


def _plot_main():
    import importlib.util

    spec = importlib.util.spec_from_file_location("plot_families", BENCHMARKS / "plot_families.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_plot_refuses_a_json_that_is_not_a_families_run(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"n": 4096}')
    with pytest.raises(SystemExit, match=r"bad.json: not a families run .* benchmarks/families.py --json"):
        _plot_main()([str(bad), str(tmp_path / "out.png")])
    with pytest.raises(SystemExit, match=r"missing.json: cannot read the results JSON"):
        _plot_main()([str(tmp_path / "missing.json"), str(tmp_path / "out.png")])


def test_plot_writes_a_png_of_the_ratios(tmp_path):
    pytest.importorskip("matplotlib")  # tilelang-core[bench]
    import json

    records = [{"name": "matmul", "case": "4096^3", "ratio": 0.93, "correct": True},
               {"name": "fmha", "case": "d128 causal", "ratio": 1.1, "correct": False},
               {"name": "rope", "case": "*", "error": "exit status -11"}]
    (tmp_path / "r.json").write_text(json.dumps(records))
    assert _plot_main()([str(tmp_path / "r.json"), str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_case_record_on_the_cpu_backend(families):
    """run_case's bookkeeping (the GPU path's, with the CPU backend and a wall-clock timer):
    the fastest correct variant is the record, a failing variant is listed with its error."""
    import time

    package, common = families

    def timer(fn, repeat, inner):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - start) * 1e3 / inner

    case = package.family_module("softmax").make_case((64, 256), ((1, 128), (2, 128)), device="cpu")
    case.variants.append(common.Variant("broken", lambda: [common.KernelSpec("not a kernel")]))
    record = common.run_case(case, repeat=1, inner=2, target="cpu", timer=timer)
    assert record["error"] is None and record["correct"] is True
    assert record["config"] in ("rows1/t128", "rows2/t128")
    assert record["ratio"] == pytest.approx(record["ref_ms"] / record["tl_ms"], rel=1e-2)
    assert record["tl_value"] == pytest.approx(case.work / record["tl_ms"] / 1e6, rel=1e-2)
    broken = record["variants"][-1]
    assert broken["config"] == "broken" and broken["error"].startswith("compile: ")
