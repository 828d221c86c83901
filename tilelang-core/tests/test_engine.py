"""Engine behaviour: semantic checks, pass sessions, artifacts, CPU parallelism."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
from tilelang import CompileError, LanguageError
from tilelang.engine import CompiledArtifact
from tilelang.testing.kernels import elementwise_add, row_softmax_sum


def test_pipeline_phases_appear_in_the_callers_instrument_session(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    seen = []

    @tvm.instrument.pass_instrument
    class Record:
        def run_before_pass(self, mod, info):
            seen.append(info.name)

    tilelang.compile(elementwise_add(8, 8), target="cpu", instruments=[Record()])
    assert "tl.cpu.lower" in seen and "tl.cpu.finalize_host" in seen
    assert seen.index("tl.cpu.LowerKernelLaunchToLoops") > seen.index("tl.cpu.lower")


def test_dump_ir_writes_the_ir_after_every_pass(monkeypatch, tmp_path):
    # upstream's TL_ENABLE_DUMP_IR / TL_DUMP_IR_DIR: accepted and ignored before
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    tilelang.compile(elementwise_add(8, 8), target="cpu", pass_configs={
        tilelang.PassConfigKey.TL_ENABLE_DUMP_IR: True, tilelang.PassConfigKey.TL_DUMP_IR_DIR: str(tmp_path / "ir")})
    files = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert len(files) > 10 and files[0].startswith("000_")
    lower_tile_ops = next(f for f in files if f.endswith("_tl.LowerTileOps.py"))
    assert "def main(" in (tmp_path / "ir" / lower_tile_ops).read_text()


def test_pass_profile_prints_each_pass_slowest_first(monkeypatch, capsys):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    tilelang.compile(elementwise_add(8, 8), target="cpu", pass_configs={"tl.pass_profile": True})
    lines = capsys.readouterr().err.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("tilelang pass profile, kernel 'main': "))
    rows = [line for line in lines[head + 1:] if line.startswith("  ")]
    times = [float(row.split()[0]) for row in rows]
    assert len(rows) > 10 and times == sorted(times, reverse=True)
    assert any(row.endswith(" tl.LowerTileOps") for row in rows)
    tilelang.compile(elementwise_add(8, 8), target="cpu",
                     pass_configs={"tl.pass_profile": True, "tl.pass_profile_threshold_ms": 1e9})
    err = capsys.readouterr().err
    assert "under 1e+09 ms not shown" in err and "\n  " not in err.split("tilelang pass profile")[1]
    with pytest.raises(CompileError, match=r"tl.pass_profile_threshold_ms must be a number of milliseconds "
                                           r"\(0 or more\), got 'soon'"):
        tilelang.compile(elementwise_add(8, 8), target="cpu",
                         pass_configs={"tl.pass_profile": True, "tl.pass_profile_threshold_ms": "soon"})


def test_blocks_run_on_the_thread_pool_with_llvm():
    kernel = tilelang.compile(elementwise_add(256, 16), out_idx=[-1], target="llvm")
    assert "closure_loop_parallel" in kernel.get_host_source()


def test_single_block_kernel_parallelizes_its_outermost_parallel_loop():
    @T.prim_func
    def one_block(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i, j in T.Parallel(64, 64):
                B[i, j] = A[i, j] * 2.0

    kernel = tilelang.compile(one_block, out_idx=[-1], target="llvm")
    assert "closure_loop_parallel" in kernel.get_host_source()
    a = np.random.rand(64, 64).astype("float32")
    np.testing.assert_allclose(kernel(a), 2 * a, rtol=1e-6)


def test_disable_parallel_pass_config_runs_blocks_serially():
    kernel = tilelang.compile(elementwise_add(256, 16), out_idx=[-1], target="llvm",
                              pass_configs={"tl.disable_parallel": True})
    assert "closure_loop_parallel" not in kernel.get_host_source()


def test_unknown_pass_config_lists_the_valid_ones():
    with pytest.raises(CompileError, match=r"unknown pass config\(s\) \['tl.nope'\]; valid: tl.bounds_check, tl.disable_parallel"):
        tilelang.compile(elementwise_add(8, 8), target="cpu", pass_configs={"tl.nope": 1})


def test_artifact_round_trips_through_json():
    kernel = tilelang.compile(row_softmax_sum(8), out_idx=[-1], target="cpu")
    again = CompiledArtifact.from_json(kernel.artifact.to_json())
    assert again.params == kernel.artifact.params
    assert again.symbols == ("M",)
    assert again.out_idx == (2,) and again.target_backend == "cpu" and again.execution_backend == "tvm_ffi"


def test_nested_kernels_are_rejected():
    @T.prim_func
    def nested(A: T.Tensor((8,), "float32")):
        with T.Kernel(2) as bx, T.Kernel(2) as by:
            A[bx * 2 + by] = 1.0

    with pytest.raises(LanguageError, match="T.Kernel frames are nested"):
        tilelang.compile(nested, target="cpu")


def test_out_idx_must_name_a_tensor():
    with pytest.raises(LanguageError, match="out_idx 1 is not the index of a tensor parameter"):
        tilelang.compile(row_softmax_sum(8), out_idx=[1], target="cpu")


def test_not_a_prim_func():
    with pytest.raises(LanguageError, match="expected a T.prim_func, got function"):
        tilelang.compile(lambda: None, target="cpu")


def test_kernel_keyword_typo_is_named():
    with pytest.raises(Exception, match=r"unsupported keyword\(s\) \['thread'\]"):
        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            with T.Kernel(2, thread=4) as bx:
                A[bx] = 1.0


def test_op_no_backend_lowered_is_reported_before_codegen():
    from tvm.script import tirx as tvm_T  # raw TVMScript: skips TileLang's frontend

    @tvm_T.prim_func
    def raw(A: tvm_T.Buffer((8,), "float32")):
        for i in tvm_T.grid(tvm_T.call_intrin("int32", "tl.parallel_extent", 8)):
            A[i] = 1.0

    with pytest.raises(LanguageError, match=r"target backend 'cpu' did not lower \['tl.parallel_extent'\]"):
        tilelang.compile(raw, target="cpu")


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_cpu_backend_passes_the_conformance_kit(target):
    from tilelang.testing import run_conformance

    assert set(run_conformance(target=target).values()) == {"ok"}
