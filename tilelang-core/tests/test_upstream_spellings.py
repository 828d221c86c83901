"""Upstream TileLang spellings of loops, copies and hints that change no result here."""

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError


def _stepped_loops():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            T.disable_warp_group_reg_alloc()
            S = T.alloc_shared((64,), "float32")
            T.copy(A, S, disable_tma=True, coalesced_width=4, eviction_policy="evict_first")
            for i in T.Serial(0, 64, 2):
                B[i] = S[i] * 2
            for i in T.Unroll(1, 64, 2):
                B[i] = S[i] * 3
            for k in T.Pipelined(2, 4, num_stages=2):
                B[k] = B[k] + 1
            for i in T.Parallel(8, coalesced_width=4):
                B[i + 8] = B[i + 8] + 0

    return main


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_stepped_serial_unroll_and_ranged_pipelined_loops(target):
    backend = "cython" if target == "c" else "tvm_ffi"
    kernel = tilelang.compile(_stepped_loops(), out_idx=[1], target=target, execution_backend=backend)
    a = np.arange(64, dtype="float32")
    expected = np.where(np.arange(64) % 2 == 0, a * 2, a * 3)
    expected[2:4] += 1
    np.testing.assert_array_equal(kernel(a), expected)


def test_hints_lower_for_cuda_without_leaving_anything_behind():
    source = tilelang.lower(_stepped_loops(), target={"kind": "cuda", "arch": "sm_90"}).device_source
    assert "setmaxnreg" not in source and "__syncthreads" in source


def test_unknown_copy_instruction_is_refused():
    with pytest.raises(LanguageError, match=r"prefer_instruction='tmem' is not one of \('tma', 'cp_async', 'sync'\)"):

        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                T.copy(A, B, prefer_instruction="tmem")


def test_python_side_size_helpers():
    assert (tilelang.cdiv(7, 2), tilelang.cdiv(8, 2), tilelang.cdiv(0, 4)) == (4, 4, 0)
    assert [tilelang.next_power_of_2(x) for x in (0, 1, 2, 5, 64, 65)] == [1, 1, 2, 8, 64, 128]
    from tilelang.math import cdiv

    assert cdiv is tilelang.cdiv


def test_set_log_level_sets_every_tilelang_logger():
    import logging

    before = logging.getLogger("tilelang").level
    try:
        tilelang.set_log_level("warning")
        assert logging.getLogger("tilelang.jit").getEffectiveLevel() == logging.WARNING
        tilelang.set_log_level(logging.DEBUG)
        assert logging.getLogger("tilelang.autotuner").getEffectiveLevel() == logging.DEBUG
        with pytest.raises(tilelang.ArgumentError, match=r"set_log_level\('LOUD'\): not a log level; use DEBUG"):
            tilelang.set_log_level("LOUD")
    finally:
        logging.getLogger("tilelang").setLevel(before)


@pytest.mark.parametrize("order", ["value_first", "dtype_first"])
def test_reinterpret_takes_either_argument_order(order):
    @T.prim_func
    def bits(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.uint32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                if order == "value_first":
                    B[i] = T.reinterpret(A[i], T.uint32)
                else:
                    B[i] = T.reinterpret(T.uint32, A[i])

    kernel = tilelang.compile(bits, out_idx=[1], target="cpu")
    a = np.linspace(-2, 2, 8, dtype="float32")
    np.testing.assert_array_equal(kernel(a), a.view(np.uint32))


def test_jit_takes_upstreams_verbose_and_compile_flags(capsys):
    @tilelang.jit(verbose=True, compile_flags=["-O3"], target="cpu")
    def doubled(n):
        @T.prim_func
        def double(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    B[i] = A[i] * 2.0

        return double

    kernel = doubled(8)
    assert re.search(r"tilelang: double: .*: (compiled|from the kernel cache)", capsys.readouterr().err)
    a = np.arange(8, dtype="float32")
    out = np.zeros_like(a)
    kernel(a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_a_chained_assignment_stores_one_value_to_each_target_in_order():
    """``A[i] = B[i] = C[i] = 1`` (upstream's chain_equal test); with a value that reads a
    target, Python's meaning: the value is computed once, before any store."""
    @T.prim_func
    def chained(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            for lane in T.Parallel(64):
                idx = bx * 64 + lane
                A[idx] = B[idx] = C[idx] = 1
                C[idx] = A[idx] = C[idx] + A[idx] * 2

    a, b, c = (np.zeros(128, "float32") for _ in range(3))
    tilelang.compile(chained, target="cpu")(a, b, c)
    np.testing.assert_array_equal(a, 3.0)
    np.testing.assert_array_equal(b, 1.0)
    np.testing.assert_array_equal(c, 3.0)


def test_a_tuple_assignment_to_elements_reads_every_value_before_the_first_store():
    """``S[0], S[1] = S[1], S[0]`` (upstream's gemm_sp compressor swaps two indices so):
    Python's meaning, a swap; TVMScript refused it ("Invalid type in assign statement")."""
    @T.prim_func
    def swap(A: T.Tensor((64, 4), "int32")):
        with T.Kernel(1, threads=64) as _:
            for row in T.Parallel(64):
                S = T.alloc_local((4,), "int32")
                for j in T.serial(4):
                    S[j] = A[row, j]
                S[0], S[1] = S[1], S[0]
                S[2], S[3], S[0] = S[0] + S[3], 7, S[2]
                for j in T.serial(4):
                    A[row, j] = S[j]

    a = np.arange(256, dtype="int32").reshape(64, 4)
    expected = a.copy()
    expected[:, 0], expected[:, 1] = a[:, 1], a[:, 0]
    expected[:, 2], expected[:, 3], expected[:, 0] = expected[:, 0] + a[:, 3], 7, a[:, 2]
    tilelang.compile(swap, target="cpu")(a)
    np.testing.assert_array_equal(a, expected)


def test_a_tuple_assignment_swaps_variables():
    """``a, b = b, a`` of two ``T.alloc_var`` variables (upstream's ``test_swap_logic``), then a
    rotation of three: TVMScript refused it ("Variable a already defined in current scope")."""
    @T.prim_func
    def swap(A: T.Tensor((3,), "float32")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_var(T.float32, A[0])
            b = T.alloc_var(T.float32, A[1])
            c = T.alloc_var(T.float32, A[2])
            a, b = b, a
            a, b, c = c, a, b + 10.0
            A[0], A[1], A[2] = a, b, c

    a = np.array([1.0, 2.0, 3.0], np.float32)
    tilelang.compile(swap, target="cpu")(a)
    np.testing.assert_array_equal(a, [3.0, 2.0, 11.0])


def _bound_by_hand():
    @T.prim_func
    def main(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (16, 16), dtype=T.float32, align=16)
        for b in T.thread_binding(2, thread="blockIdx.x"):
            for t in T.thread_binding(8, thread="threadIdx.x"):
                for i in T.unroll(0, 16, step=2):
                    A[b * 8 + t, i] = T.float32(b * 100 + t)

    return main


@pytest.mark.parametrize("backend", [("cpu", "tvm_ffi"), ("c", "cython")])
def test_a_kernel_of_thread_binding_loops_launches_like_t_kernel(backend):
    """TVMScript's own kernel style, without T.Kernel (upstream's unroll tests): "cannot
    handle for type launch_thread" in the host code generator before."""
    a = np.full((16, 16), -1, "float32")
    tilelang.compile(_bound_by_hand(), target=backend[0], execution_backend=backend[1])(a)
    expected = np.full((16, 16), -1, "float32")
    rows = np.array([b * 100 + t for b in range(2) for t in range(8)], "float32")
    expected[:, 0::2] = rows[:, None]
    np.testing.assert_array_equal(a, expected)


def test_unroll_over_a_run_time_extent():
    """``T.unroll(n % 32)``: TVM's UnrollLoop refused it ("Cannot unroll non-constant loop");
    the loop runs as written and the device compiler gets the unroll hint."""
    @T.prim_func
    def ramp(out: T.Tensor((64,), "float32"), n: T.int32):
        with T.Kernel(1, threads=1):
            for i in T.unroll(n % 32):
                out[i] = T.cast(i, "float32")

    out = np.full(64, -1, "float32")
    tilelang.compile(ramp, target="cpu")(out, 37)
    np.testing.assert_array_equal(out[:5], np.arange(5))
    np.testing.assert_array_equal(out[5:], -1)
    source = tilelang.lower(ramp, target={"kind": "cuda", "arch": "sm_90"}).device_source
    assert "#pragma unroll\n  for (int i = 0; i < (n & 31); ++i) {" in source


def _branching(flag, scale):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                if flag:
                    B[i] = A[i] * 2
                else:
                    B[i] = A[i] + 1
                if scale is not None and scale:  # `is not None` is a bool; `scale` a float
                    B[i] = B[i] * scale

    return main


@pytest.mark.parametrize("flag,scale,expect", [
    (1, None, lambda a: a * 2), (0, None, lambda a: a + 1), ([], 3.0, lambda a: (a + 1) * 3),
    ("x", 0.0, lambda a: a * 2), (np.bool_(False), np.float32(2), lambda a: (a + 1) * 2),
    (np.int64(3), None, lambda a: a * 2)])
def test_an_if_on_a_plain_python_value_is_decided_while_parsing(flag, scale, expect):
    """``if flag:`` with ``flag = 0`` (an int, a list, a string): Python's truth, decided at
    parse time as upstream's parser does; TVMScript took only True/False ("If condition must
    be a boolean expression, but got 0")."""
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    tilelang.compile(_branching(flag, scale), target="cpu")(a, b)
    np.testing.assert_array_equal(b, expect(a))


def test_an_uncaught_parse_error_prints_its_message_and_line(tmp_path):
    """``import tvm`` installs an excepthook that prints only "note: run with
    `TVM_BACKTRACE=1`" for an uncaught DiagnosticError: a script whose kernel did not
    parse said nothing of why. The error is now a LanguageError (still a DiagnosticError)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "bad_kernel.py"
    script.write_text(
        "import tilelang.language as T\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((8,), 'float32')):\n"
        "    with T.Kernel(1, threads=8):\n"
        "        A[0] = undefined_name\n")
    run = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True,
                         timeout=300, env={k: v for k, v in os.environ.items() if k != "TVM_BACKTRACE"})
    assert run.returncode == 1
    assert "LanguageDiagnostic: error: Undefined variable: undefined_name" in run.stderr
    assert f"--> {script}:5:9" in run.stderr


def test_a_parse_error_is_a_language_error_and_still_a_tvm_diagnostic():
    from tvm.error import DiagnosticError

    with pytest.raises(LanguageError, match=r"Undefined variable: undefined_name\n --> .*test_upstream_spellings.py") \
            as caught:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=8):
                A[0] = undefined_name  # noqa: F821

    assert isinstance(caught.value, DiagnosticError)


def test_a_parse_error_in_an_eager_kernel_is_a_language_error_with_its_line():
    """Upstream's eager style (parameters declared in the body) parses at the first call:
    its TVMScript diagnostics reached the user as TVM's bare note too."""
    @tilelang.jit(target="cpu")
    def eager(A, n: int = 64):
        A: T.Tensor((n,), "float32")
        with T.Kernel(1, threads=64):
            for i in T.Parallel(n):
                A[i] = undefined_thing  # noqa: F821

    with pytest.raises(LanguageError, match=r"Undefined variable: undefined_thing\n --> .*test_upstream_spellings.py"):
        eager(np.zeros(64, "float32"))


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_a_narrow_float_compares_with_a_python_literal(dtype):
    """``A[i] != 0`` with A bfloat16 or fp8 (upstream's sparse compressor): TVMScript left
    the literal a Python int for these types ("'int' object has no attribute 'expr_ty'")."""
    torch = pytest.importorskip("torch")

    @T.prim_func
    def nonzero(A: T.Tensor((64,), dtype), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding(0)
            B[tx] = T.if_then_else(A[tx] != 0, 1, 0) + T.if_then_else(A[tx] > 1, 2, 0)

    a = torch.tensor([0.0, 1.5, -2.0, 0.5] * 16).to(getattr(torch, dtype))
    b = torch.zeros(64, dtype=torch.int32)
    tilelang.compile(nonzero, target="cpu")(a, b)
    af = a.float()
    torch.testing.assert_close(b, (af != 0).int() + 2 * (af > 1).int())
