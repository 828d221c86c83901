"""Upstream TileLang module names its examples import: tilelang.utils, tilelang.carver,
tilelang.tileop.base, tilelang.engine.callback, tilelang.language.fp8, tvm.tirx.PrimExpr /
Expr.dtype / tilelang.DataType, T.alloc_reducer / T.finalize_reducer, T.alloc_var as an
index, and the CUDA backend's tilelang.cuda.intrinsics layout helpers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang import BackendUnavailableError, LanguageError, TileLangError

HAS_CUDA_BACKEND = importlib.util.find_spec("tilelang.cuda") is not None
HAS_GPU = torch.cuda.is_available()
needs_cuda_backend = pytest.mark.skipif(not HAS_CUDA_BACKEND, reason="tilelang-cuda is not installed")
SM90 = {"kind": "cuda", "arch": "sm_90"}


def _cuda_source(func) -> str:
    return tilelang.lower(func, target=SM90).device_source


def test_tileop_base_is_where_amd_examples_import_the_warp_policy() -> None:
    from tilelang.tileop.base import GemmWarpPolicy

    assert GemmWarpPolicy is T.GemmWarpPolicy and GemmWarpPolicy.FullRow == 1


# -- tilelang.utils -----------------------------------------------------------------------------

def test_utils_tensor_reexports_the_testing_and_profiler_helpers() -> None:
    from tilelang.profiler import TensorSupplyType as profiler_supply
    from tilelang.testing import torch_assert_close as testing_close
    from tilelang.utils import is_float8_dtype
    from tilelang.utils.tensor import (
        TensorSupplyType,
        get_tensor_supply,
        torch_assert_close,
    )

    assert TensorSupplyType is profiler_supply and torch_assert_close is testing_close
    assert callable(get_tensor_supply(TensorSupplyType.Auto))
    assert is_float8_dtype(torch.float8_e4m3fn) and is_float8_dtype(torch.float8_e5m2)
    assert not is_float8_dtype(torch.float16) and not is_float8_dtype("float8_e4m3fn")
    with pytest.raises(AssertionError, match="shape differs"):
        torch_assert_close(torch.zeros(2), torch.zeros(3))


def test_the_compile_speed_benchmarks_imports_and_its_save_wrapper(tmp_path, monkeypatch) -> None:
    """upstream benchmark/compile_speed wraps KernelCache._save_kernel_to_disk in a lock
    for its baseline: every kernel save goes through it here too."""
    import os

    from tilelang.cache import KernelCache
    from tilelang.cache.kernel_cache import KernelCache as upstream_path
    from tilelang.utils.device import get_available_cpu_count

    assert upstream_path is KernelCache
    assert get_available_cpu_count() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    saved = []
    original = KernelCache._save_kernel_to_disk

    def wrapped(self, *args, **kwargs):
        saved.append(args[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(KernelCache, "_save_kernel_to_disk", wrapped)

    @T.prim_func
    def plus_one(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                A[i] = A[i] + 1.0

    kernel = tilelang.compile(plus_one, target="cpu")
    a = np.zeros(8, np.float32)
    kernel(a)
    np.testing.assert_array_equal(a, np.ones(8, np.float32))
    assert saved == [kernel.cache_key]


# -- TVM names upstream's fork has ---------------------------------------------------------------

def test_tirx_primexpr_answers_for_primitive_expressions_and_expr_has_dtype() -> None:
    from tilelang import tvm
    from tvm import tirx

    one = tirx.const(1, "int32")
    load = tirx.decl_buffer((4,), "uint8", name="B")[0]
    assert isinstance(one, tirx.PrimExpr) and isinstance(load, tirx.PrimExpr)
    assert not isinstance(1, tirx.PrimExpr) and not isinstance("x", tirx.PrimExpr)
    assert load.dtype == "uint8" and (one.astype("uint16")).dtype == "uint16"
    with pytest.raises(TypeError, match="abstract expression type"):
        tirx.PrimExpr()
    assert tilelang.DataType is tvm.DataType and tilelang.DataType("float16").bits == 16
    # upstream's fork keeps the call and string nodes in tirx; TVM 0.27 in tvm.ir
    assert isinstance(T.any_sync(1), tirx.Call) and not isinstance(one, tirx.Call)
    assert isinstance(tirx.call_extern("int32", "f").args[0], tirx.StringImm)
    # TVM's Var.dtype answers for tensor variables only; upstream reads it off any variable
    bx, buf = tirx.Var("bx", "int32"), tirx.decl_buffer((4,), "float16", name="buf")
    assert bx.dtype == "int32" and (bx < 3).a.dtype == "int32" and buf.dtype == "float16"
    handle = tvm.ir.Var("h", tvm.ir.PointerType(tvm.ir.PrimType("float32")))
    with pytest.raises(AttributeError, match="BufferType"):
        handle.dtype  # noqa: B018 -- neither primitive nor a tensor: TVM's own error


def test_tvm_arith_is_tvm_sym() -> None:
    """Upstream's tests and examples use TVM's former name for its arithmetic module
    (``tvm.arith.Analyzer()``, ``tvm.arith.detect_iter_map``): TVM 0.27's ``tvm.sym``."""
    import tvm.arith  # after `import tilelang` (module level): tilelang's name for it
    from tilelang import tvm
    from tvm.arith import Analyzer, detect_iter_map

    assert tvm.arith is tvm.sym and Analyzer is tvm.sym.Analyzer and detect_iter_map is tvm.sym.detect_iter_map
    i = tvm.tirx.Var("i", "int32")
    assert tvm.arith.Analyzer().can_prove_equal((i * 4 + 3) // 4, i)


def test_tirx_primexpr_is_there_when_an_upstream_script_imports_tvm_after_tilelang():
    """Upstream's dequantize examples annotate module-level helpers with ``tirx.PrimExpr``
    right after ``from tvm import tirx``, before any T.<name> has loaded the language."""
    script = ("import sys, tilelang, tilelang.language as T\n"
              "assert 'tvm' not in sys.modules, 'import tilelang imported TVM'\n"
              "from tvm import tirx\n"
              "def helper(val: tirx.PrimExpr, pos: tirx.PrimExpr): return val\n"
              "print(isinstance(tirx.const(1, 'int32'), tirx.PrimExpr))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


# -- T.alloc_var as an index ------------------------------------------------------------------

@T.prim_func
def _gather_row(A: T.Tensor((4, 8), "float32"), idx: T.Tensor((2,), "int32"), B: T.Tensor((2, 8), "float32")):
    with T.Kernel(2, threads=32) as bx:
        row = T.alloc_var(T.int32)
        row = 0
        for i in range(2):  # the upstream grouped-GEMM pattern: pick with if_then_else
            row = T.if_then_else(i == bx, idx[i], row)
        tile = T.alloc_shared((1, 8), "float32")
        T.copy(A[row, 0:8], tile)  # a slice indexed by the variable
        for j in T.Parallel(8):
            B[bx, j] = tile[0, j] + A[row, j]  # and an element


def test_alloc_var_indexes_buffers_and_slices() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 8), dtype=np.float32)
    idx = np.array([3, 1], dtype=np.int32)
    b = np.zeros((2, 8), np.float32)
    tilelang.compile(_gather_row, target="cpu")(a, idx, b)
    np.testing.assert_allclose(b, 2 * a[idx], rtol=0, atol=0)


# -- tilelang.engine.callback -------------------------------------------------------------------

@pytest.fixture
def no_cuda_postproc():
    from tilelang.engine import callback

    callback.unregister_source_postproc("cuda")
    yield callback
    callback.unregister_source_postproc("cuda")


def test_postproc_registry_forms_and_errors(no_cuda_postproc) -> None:
    callback = no_cuda_postproc

    @callback.register_cuda_postproc_callback
    def first(code, target):
        return code + "// first"

    assert callback.source_postproc("cuda") is first
    with pytest.raises(TileLangError, match="already registered .*first.*override=True"):
        callback.register_cuda_postproc_callback(override=False)(lambda code, target: code)

    @callback.register_cuda_postproc_callback(True)
    def second(code, target):
        return 42

    assert callback.source_postproc("cuda") is second
    with pytest.raises(TileLangError, match="returned int, not the source string"):
        callback.apply_source_postproc("cuda", "code")
    with pytest.raises(TileLangError, match="not with 'yes'"):
        callback.register_cuda_postproc_callback("yes")
    assert callback.apply_source_postproc("hip", "unchanged") == "unchanged"


@needs_cuda_backend
def test_cuda_codegen_applies_the_registered_postproc(no_cuda_postproc) -> None:
    @T.prim_func
    def add_one(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                A[i] = A[i] + 1.0

    no_cuda_postproc.register_cuda_postproc(lambda code, target: f"// for {target.kind.name}\n" + code)
    assert _cuda_source(add_one).startswith("// for cuda\n")


# -- tilelang.language.fp8 ----------------------------------------------------------------------

def test_determine_fp8_type() -> None:
    from tilelang.language.fp8 import determine_fp8_type, determine_torch_fp8_type

    rocm = torch.version.hip is not None
    assert determine_fp8_type() == ("float8_e4m3fnuz" if rocm and not HAS_GPU else "float8_e4m3fn") or rocm
    if not rocm:
        assert determine_fp8_type("e5m2") == T.float8_e5m2
        assert determine_torch_fp8_type("e4m3") is torch.float8_e4m3fn
    with pytest.raises(LanguageError, match="unknown FP8 format 'e3m4'; use 'e4m3' or 'e5m2'"):
        determine_fp8_type("e3m4")


# -- tilelang.carver ----------------------------------------------------------------------------

@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU errors")
def test_carver_driver_and_arch_without_a_gpu() -> None:
    from tilelang.carver.arch import CUDA, driver

    with pytest.raises(BackendUnavailableError, match="no CUDA or ROCm GPU is visible to torch"):
        driver.get_num_sms()
    with pytest.raises(BackendUnavailableError, match="no CUDA GPU to describe; name the compute capability"):
        CUDA("cuda")
    arch = CUDA(SM90)
    assert (arch.sm_version, arch.smem_cap, arch.compute_max_core) == (90, 227 * 1024, None)
    assert CUDA("cuda -arch=sm_86").smem_cap == 99 * 1024
    with pytest.raises(BackendUnavailableError, match="'gfx942' is not an SM arch"):
        CUDA({"kind": "cuda", "arch": "gfx942"})


@pytest.mark.skipif(not HAS_GPU or torch.version.hip is not None, reason="needs a CUDA GPU")
def test_carver_driver_on_the_gpu() -> None:
    from tilelang.carver.arch import CUDA, driver

    props = torch.cuda.get_device_properties(0)
    assert driver.get_num_sms() == props.multi_processor_count
    assert driver.get_registers_per_block() >= 32768
    assert CUDA("cuda").compute_max_core == props.multi_processor_count


def test_matmul_template_hints_fit_the_device_and_are_ranked() -> None:
    from tilelang.carver.arch import CUDA
    from tilelang.carver.roller.rasterization import NoRasterization
    from tilelang.carver.template import MatmulTemplate

    arch = CUDA({"kind": "cuda", "arch": "sm_80"})
    template = MatmulTemplate(M=4096, N=4096, K=4096, in_dtype=T.float16, out_dtype=T.float16,
                              accum_dtype=T.float32).with_arch(arch)
    hints = template.recommend_hints(topk=8)
    assert len(hints) == 8
    assert [h.cost for h in hints] == sorted(h.cost for h in hints)
    for hint in hints:
        (bm, bn), (wm, wn), (bk,) = hint.block, hint.warp, hint.rstep
        assert bm % wm == 0 and bn % wn == 0 and wm % 16 == 0 and wn % 16 == 0 and hint.use_tc
        assert hint.smem_bytes == hint.pipeline_stage * (bm + bn) * bk * 2 <= arch.smem_cap
        assert hint.threads in (128, 256)
        assert hint.rasterization_plan != NoRasterization()  # a 4096^2 grid is large
    # a tiny problem gets tiles no larger than it needs
    small = MatmulTemplate(M=16, N=48, K=32).with_arch(arch).recommend_hints(topk=4)
    assert all(h.block[0] <= 32 and h.block[1] <= 64 and h.rstep == [32] for h in small)
    with pytest.raises(LanguageError, match=r"no device; call .with_arch"):
        MatmulTemplate(M=16, N=16, K=16).recommend_hints()
    with pytest.raises(LanguageError, match="K must be a positive int, got 0"):
        MatmulTemplate(M=16, N=16, K=0)


def test_matmul_template_equivalent_function_computes_the_gemm() -> None:
    from tilelang.carver.template import MatmulTemplate

    func = MatmulTemplate(M=8, N=12, K=16, in_dtype="float32", out_dtype="float32",
                          accum_dtype="float32").equivalent_function()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((8, 16), dtype=np.float32), rng.standard_normal((12, 16), dtype=np.float32)
    c = np.zeros((8, 12), np.float32)
    tilelang.compile(func, target="cpu")(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


# -- T.alloc_reducer / T.finalize_reducer -------------------------------------------------------

def _reducer_gemv(op: str):
    @T.prim_func
    def gemv(A: T.Tensor((64, 96), "float32"), x: T.Tensor((96,), "float32"), o: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            r = T.alloc_reducer(32, "float32", op=op, replication="all")
            if op == "sum":
                T.clear(r)
            else:
                T.fill(r, -1e30)
            for k in T.serial(3):
                for i, j in T.Parallel(32, 32):
                    if op == "sum":
                        r[i] += A[bx * 32 + i, k * 32 + j] * x[k * 32 + j]
                    else:
                        r[i] = T.max(r[i], A[bx * 32 + i, k * 32 + j] * x[k * 32 + j])
            T.finalize_reducer(r)
            T.copy(r, o[bx * 32])

    return gemv


@pytest.mark.parametrize("op", ["sum", "max"])
def test_alloc_reducer_on_the_cpu(op: str) -> None:
    rng = np.random.default_rng(2)
    a, x = rng.standard_normal((64, 96), dtype=np.float32), rng.standard_normal(96, dtype=np.float32)
    o = np.zeros(64, np.float32)
    tilelang.compile(_reducer_gemv(op), target="cpu")(a, x, o)
    expected = a @ x if op == "sum" else (a * x).max(axis=1)
    np.testing.assert_allclose(o, expected, rtol=1e-5, atol=1e-5)


@needs_cuda_backend
def test_alloc_reducer_cuda_source_uses_shared_atomics_between_barriers() -> None:
    source = _cuda_source(_reducer_gemv("sum"))
    body = source[source.index("r_ptr[]"):]
    clear, atomic = body.index("r_ptr[((int)threadIdx.x)] = 0"), body.index("atomicAdd((&(r_ptr[")
    final, store = body.rindex("__syncthreads()"), body.index("o_ptr[")
    assert clear < body.index("__syncthreads()") < atomic < final < store


def test_alloc_reducer_errors() -> None:
    with pytest.raises(LanguageError, match=r"op must be one of \['sum', 'max', 'min', 'bitand', 'bitor', "
                                            r"'bitxor'\], got 'prod'"):
        @T.prim_func
        def bad_op(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.alloc_reducer(32, "float32", op="prod")

    with pytest.raises(LanguageError, match=r"a reducer is only updated as `r\[i\] \+= v`"):
        @T.prim_func
        def bad_store(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                r = T.alloc_reducer(32, "float32")
                T.clear(r)
                for i in T.Parallel(32):
                    r[i] = A[i]
                T.finalize_reducer(r)
                T.copy(r, A)


# -- tilelang.cuda.intrinsics --------------------------------------------------------------------

@needs_cuda_backend
def test_swizzle_layout_matches_the_xor_model() -> None:
    from tilelang.cuda.intrinsics import get_swizzle_layout

    # 64 fp16 per row = 128 bytes = 8 chunks of 16 bytes: chunk c of row r goes to c ^ (r % 8)
    for row in range(16):
        cols = [get_swizzle_layout(row, col, 64, "float16")[2] for col in range(64)]
        assert sorted(cols) == list(range(64))  # a permutation within the row
        for col in range(0, 64, 8):
            assert cols[col] == ((col // 8) ^ (row % 8)) * 8
    # 32 fp16 per row = 64 bytes: 4 chunks, rows paired
    assert [get_swizzle_layout(r, 8, 32, "float16")[2] for r in range(8)] == [8, 8, 0, 0, 24, 24, 16, 16]
    with pytest.raises(LanguageError, match="swizzling needs a multiple of 32 bytes"):
        get_swizzle_layout(0, 0, 4, "float16")


@needs_cuda_backend
def test_make_mma_swizzle_layout() -> None:
    from tilelang.cuda.intrinsics import make_mma_swizzle_layout
    from tilelang.layout import Layout, SwizzledLayout
    from tvm import tirx

    wide, narrow = tirx.decl_buffer((64, 64), "float16"), tirx.decl_buffer((64, 16), "float16")
    assert isinstance(make_mma_swizzle_layout(wide), SwizzledLayout)
    for layout in (make_mma_swizzle_layout(narrow), make_mma_swizzle_layout(wide, is_smooth=True)):
        assert isinstance(layout, Layout) and layout.is_identity_for(layout.shape)


# -- macros annotated with T.SharedBuffer, upstream's hand-grouped asynchronous copies ------------

def test_macro_buffer_annotations_and_copy_groups_run_as_synchronous_copies() -> None:
    """Upstream's minference kernel: T.macro parameters annotated T.SharedBuffer /
    T.FragmentBuffer, prefetches in T.Parallel(prefer_async=True) closed by
    T.ptx_commit_group() and awaited with T.ptx_wait_group(n). Copies are synchronous here."""

    @T.macro
    def prefetch(A: T.Tensor((4, 16), "float32"), tile: T.SharedBuffer([2, 16], "float32"), stage: T.int32,
                 row: T.int32):
        for j in T.Parallel(16, prefer_async=True):
            tile[stage, j] = A[row, j]
        T.ptx_commit_group()

    @T.macro
    def accumulate(acc: T.FragmentBuffer([16], "float32"), tile: T.SharedBuffer([2, 16], "float32"),
                   stage: T.int32):
        T.ptx_wait_group(1)
        for j in T.Parallel(16):
            acc[j] += tile[stage, j]

    @T.prim_func
    def rows_sum(A: T.Tensor((4, 16), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16):
            tile = T.alloc_shared((2, 16), "float32")
            acc = T.alloc_fragment((16,), "float32")
            T.clear(acc)
            prefetch(A, tile, 0, 0)
            for r in T.serial(4):
                if r + 1 < 4:
                    prefetch(A, tile, (r + 1) % 2, r + 1)
                accumulate(acc, tile, r % 2)
            T.copy(acc, B)

    a = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    b = np.zeros(16, np.float32)
    tilelang.compile(rows_sum, target="cpu")(a, b)
    np.testing.assert_allclose(b, a.sum(axis=0), rtol=1e-6)
    assert tilelang.lower(rows_sum, target={"kind": "cuda", "arch": "sm_90"}).device_source  # and for CUDA


# -- FlashMLA's hand-scheduled copies and GEMMs: T.ptx_cp_async, T.wgmma_gemm, T.wait_wgmma -----------

def cp_async_rows_kernel(zero_odd_rows: bool = False):
    """Upstream's FlashMLA producer: each of 128 threads copies 4 elements (8 bytes) of a row
    of each stage tile through T.access_ptr addresses; after the barrier the tile is read as
    a whole (on the CPU the threads run in phases between barriers: barrier_phases.py)."""

    @T.prim_func
    def staged(A: T.Tensor((2, 16, 32), "float16"), B: T.Tensor((2, 16, 32), "float16")):
        with T.Kernel(1, threads=128):
            ring = T.alloc_shared((2, 16, 32), "float16")
            tx = T.get_thread_binding()
            for stage in T.serial(2):
                row = tx // 8
                col = tx % 8 * 4
                if zero_odd_rows:
                    T.ptx_cp_async(T.access_ptr(ring[stage, row, col], "w", 4),
                                   T.access_ptr(A[stage, row, col], "r", 4), 4, predicate=row % 2 == 0)
                else:
                    T.ptx_cp_async(T.access_ptr(ring[stage, row, col], "w", 4),
                                   T.access_ptr(A[stage, row, col], "r", 4), 4)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()  # every thread's pieces have landed
            T.copy(ring, B)

    return staged


@pytest.mark.parametrize("zero_odd_rows", [False, True])
def test_ptx_cp_async_copies_between_access_ptr_addresses(zero_odd_rows: bool) -> None:
    """A synchronous copy here (T.ptx_commit_group's note): the elements have landed when the
    thread goes on. A false predicate writes zeros, as cp.async with a source size of 0."""
    a = np.random.default_rng(0).standard_normal((2, 16, 32)).astype(np.float16)
    b = np.zeros_like(a)
    tilelang.compile(cp_async_rows_kernel(zero_odd_rows), target="cpu")(a, b)
    want = a.copy()
    if zero_odd_rows:
        want[:, 1::2, :] = 0
    np.testing.assert_array_equal(b, want)


def test_ptx_cp_async_refuses_what_cp_async_cannot_copy() -> None:
    with pytest.raises(LanguageError, match=r"T.ptx_cp_async: num_elems=3 float16 elements is not 4, 8 or 16 bytes"):
        @T.prim_func
        def three(A: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=1):
                s = T.alloc_shared((8,), "float16")
                T.ptx_cp_async(T.access_ptr(s[0], "w", 3), T.access_ptr(A[0], "r", 3), 3)
    with pytest.raises(LanguageError, match=r"T.ptx_cp_async: expected an address written T.access_ptr"):
        @T.prim_func
        def element(A: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=1):
                s = T.alloc_shared((8,), "float16")
                T.ptx_cp_async(s[0], A[0], 8)
    with pytest.raises(LanguageError, match=r"the destination holds float16 and the source float32"):
        @T.prim_func
        def mixed(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                s = T.alloc_shared((8,), "float16")
                T.ptx_cp_async(T.access_ptr(s[0], "w", 4), T.access_ptr(A[0], "r", 4), 4)


def test_wgmma_gemm_with_its_waits_computes_what_gemm_does() -> None:
    """T.wgmma_gemm is T.gemm here (its product is done at the next statement), so every
    T.wait_wgmma(n) after it is satisfied: FlashMLA's S = Q K^T in three K pieces."""

    @T.prim_func
    def scores(Q: T.Tensor((16, 48), "float16"), K: T.Tensor((16, 48), "float16"), S: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=64):
            q_s = T.alloc_shared((16, 48), "float16")
            k_s = T.alloc_shared((16, 48), "float16")
            acc = T.alloc_fragment((16, 16), "float32")
            T.copy(Q, q_s)
            T.copy(K, k_s)
            T.clear(acc)
            T.wgmma_gemm(q_s[:, 0:16], k_s[:, 0:16], acc, transpose_B=True)
            T.wgmma_gemm(q_s[:, 16:32], k_s[:, 16:32], acc, transpose_B=True)
            T.wait_wgmma(1)
            T.wgmma_gemm(q_s[:, 32:48], k_s[:, 32:48], acc, transpose_B=True)
            T.wait_wgmma(0)
            T.copy(acc, S)

    rng = np.random.default_rng(1)
    q = rng.integers(-3, 4, (16, 48)).astype(np.float16)
    k = rng.integers(-3, 4, (16, 48)).astype(np.float16)
    s = np.zeros((16, 16), np.float32)
    tilelang.compile(scores, target="cpu")(q, k, s)
    np.testing.assert_array_equal(s, q.astype(np.float32) @ k.astype(np.float32).T)


def test_register_reallocation_requests_are_accepted_and_checked() -> None:
    """Upstream's warp-specialized kernels ask for setmaxnreg around their roles
    (minference); the registers stay as allocated here, the kernel runs as written."""

    @T.prim_func
    def copy_rows(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            T.annotate_producer_reg_dealloc()
            T.annotate_consumer_reg_alloc(232)
            for i in T.Parallel(32):
                B[i] = A[i] + 1.0

    a, b = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    tilelang.compile(copy_rows, target="cpu")(a, b)
    np.testing.assert_array_equal(b, a + 1)
    with pytest.raises(LanguageError, match=r"T.annotate_consumer_reg_alloc\(300\): the register count must be a "
                                            "multiple of 8 from 24 to 256"):
        T.annotate_consumer_reg_alloc(300)


def test_a_pointer_table_picked_by_a_variable_addresses_its_tensors() -> None:
    """Upstream's ptr-grouped GEMM: ``T.Tensor([n], T.ptr)`` tables of tensor addresses
    (torch's data_ptr() in an int64 tensor), the entry chosen by a T.alloc_var."""

    @T.prim_func
    def gather(ptrs: T.Tensor([3], T.ptr), starts: T.Tensor([3], "int32"), out: T.Tensor([3, 8], "float32")):
        with T.Kernel(3, threads=8) as bx:
            pick = T.alloc_var(T.int32)
            pick = 0
            for i in range(3):
                pick = T.if_then_else(bx >= starts[i], i, pick)
            src = T.make_tensor(ptrs[pick], (8,), "float32")
            for j in T.Parallel(8):
                out[bx, j] = src[j] * 2.0

    tensors = [np.full(8, float(k + 1), np.float32) for k in range(3)]
    table = np.array([t.ctypes.data for t in tensors], np.int64)
    out = np.zeros((3, 8), np.float32)
    tilelang.compile(gather, target="cpu")(table, np.array([0, 1, 2], np.int32), out)
    np.testing.assert_array_equal(out, np.array([[2.0] * 8, [4.0] * 8, [6.0] * 8], np.float32))
    assert tilelang.lower(gather, target={"kind": "cuda", "arch": "sm_90"}).device_source  # and for CUDA

    @T.prim_func
    def tiles(ptrs: T.Tensor([2], T.ptr), starts: T.Tensor([2], "int32"), B: T.Tensor([32, 32], "float16"),
              out: T.Tensor([64, 32], "float32")):
        with T.Kernel(2, threads=128) as bx:
            a_tile = T.alloc_shared((32, 32), "float16")
            b_tile = T.alloc_shared((32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            pick = T.alloc_var(T.int32)
            pick = 0
            for i in range(2):
                pick = T.if_then_else(bx >= starts[i], i, pick)
            src = T.make_tensor(ptrs[pick], (32, 32), "float16")
            T.clear(acc)
            for k in T.Pipelined(1, num_stages=1):
                T.copy(src[0, k * 32], a_tile)
                T.copy(B[k * 32, 0], b_tile)
                T.gemm(a_tile, b_tile, acc)
            T.copy(acc, out[bx * 32, 0])

    # the binding of the address loads `pick` in its own scope: TVM's shared-memory planner
    # stopped there ("Load memory in places other than store") until it was scoped one in
    assert tilelang.lower(tiles, target={"kind": "cuda", "arch": "sm_90"}).device_source
