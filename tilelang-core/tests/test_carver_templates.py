"""tilelang.carver beyond the GEMM template: get_arch / auto_infer_current_arch through the
backends' device models, the CPU description, the analysis of block-written functions,
the default and tensor-core searches, and upstream's other templates (their equivalent
functions checked against numpy, their hints against the device's limits)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tilelang
import tvm
from tilelang import carver
from tilelang.carver.arch import (
    CPU,
    CUDA,
    auto_infer_current_arch,
    get_arch,
    is_tensorcore_supported_precision,
)
from tilelang.carver.roller import (
    Edge,
    IntrinInfo,
    OutputNode,
    PrimFuncNode,
    TensorCorePolicy,
)
from tilelang.carver.roller.node import analyze_prim_func
from tilelang.carver.utils import get_tensorized_func_and_tags
from tilelang.errors import LanguageError, ManifestError
from tvm import te

SM90 = {"kind": "cuda", "arch": "sm_90"}
HAS_GPU = bool(getattr(__import__("torch").cuda, "is_available", lambda: False)())


def _gemm(M: int, N: int, K: int, dtype: str = "float16", out: str = "float16") -> tvm.tirx.PrimFunc:
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((N, K), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype(out) * B[j, k].astype(out), axis=[k]), name="C")
    return te.create_prim_func([A, B, C])


def _run(func: tvm.tirx.PrimFunc, *arrays: np.ndarray) -> list[np.ndarray]:
    """Run a block-written function through TVM's own LLVM build; returns the arrays after."""
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    tvm.compile(func, target="llvm")(*tensors)
    return [t.numpy() for t in tensors]


# -- devices -------------------------------------------------------------------------------------

def test_get_arch_asks_the_target_backend() -> None:
    cpu = get_arch("cpu")
    assert isinstance(cpu, CPU) and cpu.warp_size == 1 and cpu.compute_max_core >= 1
    assert cpu.smem_cap >= 64 * 1024 and cpu.vector_bytes in (16, 32, 64)
    hopper = get_arch(SM90)
    assert isinstance(hopper, CUDA) and hopper.sm_version == 90 and hopper.smem_cap == 227 * 1024
    assert get_arch("llvm").platform == "CPU"


@pytest.mark.skipif(HAS_GPU, reason="checks the choice of a machine without a GPU")
def test_auto_infer_current_arch_is_the_cpu_without_a_gpu() -> None:
    assert isinstance(auto_infer_current_arch(), CPU)


def test_tensorcore_precisions_follow_the_compute_capability() -> None:
    volta, ampere, ada = (CUDA({"kind": "cuda", "arch": f"sm_{v}"}) for v in (70, 80, 89))
    assert is_tensorcore_supported_precision("float16", "float32", volta)
    assert not is_tensorcore_supported_precision("int8", "int32", volta)
    assert is_tensorcore_supported_precision("int8", "int32", ampere)
    assert not is_tensorcore_supported_precision("float8_e4m3fn", "float32", ampere)
    assert is_tensorcore_supported_precision("float8_e4m3fn", "float32", ada)
    assert not is_tensorcore_supported_precision("float16", "float32", get_arch("cpu"))


def test_a_manifest_device_model_must_be_callable_or_a_reference() -> None:
    from tilelang.plugin import BackendModule, ExecutionBackendSpec

    def manifest(**kw):
        return BackendModule(name="acme_dev", target_kinds=("llvm",), pipelines={"llvm": "tilelang.cpu.pipeline:X"},
                             device_codegens={"llvm": "tilelang.cpu.codegen:X"},
                             execution_backends=(ExecutionBackendSpec("tvm_ffi"),), **kw)

    with pytest.raises(ManifestError, match=r"BackendModule\('acme_dev'\): device_model must be callable"):
        manifest(device_model=3)
    with pytest.raises(ManifestError, match="module 'acme_missing' of reference"):
        manifest(device_model="acme_missing:Device")
    assert manifest().device("llvm") is None
    assert manifest(device_model=lambda target: ("described", target)).device("llvm") == ("described", "llvm")


def test_upstream_dtype_module_names() -> None:
    from tilelang.language import dtypes as T

    assert T.float16 == "float16" and T.int == "int32" and T.bfloat16 == "bfloat16"
    with pytest.raises(AttributeError, match="has no attribute 'float17'"):
        T.float17  # noqa: B018
    assert T.as_dtype_str(3.0.__class__) == "float32"  # Python's float still means float here


def test_intrin_info_and_the_shared_sm_parser() -> None:
    from tilelang.carver import matmul_analysis
    from tilelang.carver.arch import cuda

    text = repr(IntrinInfo(in_dtype="int8", out_dtype="int32", trans_b=True, weight_transform_kind=2))
    assert "in_dtype=int8" in text and "weight_transform_kind=2" in text
    assert matmul_analysis.check_sm_version is cuda.check_sm_version
    assert [cuda.check_sm_version(a) for a in ("sm_90a", "sm_120f", "sm_sm_90", "gfx942")] == [90, 120, -1, -1]


# -- analysis and the searches -----------------------------------------------------------------------

def test_analysis_reads_axes_and_accesses_off_the_blocks() -> None:
    problem = analyze_prim_func(_gemm(128, 96, 64))
    assert (problem.spatial, problem.reduce) == ((128, 96), (64,))
    assert [(a.name, a.dims) for a in problem.reads] == [("A", ((0,), (2,))), ("B", ((1,), (2,)))]
    assert problem.reads[0].footprint([16, 8, 32]) == 16 * 32

    @tilelang.language.prim_func
    def loops(A: tilelang.language.Tensor((4,), "float32")):
        for i in tilelang.language.serial(4):
            A[i] = 0.0

    with pytest.raises(LanguageError, match="has no compute block to tile; describe the computation with tvm.te"):
        analyze_prim_func(loops, "loops")


def test_gemm_tags_and_tensorization_per_device() -> None:
    _, tags = get_tensorized_func_and_tags(_gemm(128, 96, 64), SM90)
    assert tags["gemm"] == (128, 96, 64) and tags["intrin_info"].trans_b
    assert get_tensorized_func_and_tags(_gemm(128, 96, 64), "cpu")[1] is None
    assert get_tensorized_func_and_tags(_gemm(64, 64, 64, "int8", "int32"), {"kind": "cuda", "arch": "sm_70"})[1] is None
    # an elementwise function is no GEMM
    X = te.placeholder((64, 64), name="X", dtype="float16")
    assert get_tensorized_func_and_tags(te.create_prim_func([X, te.compute((64, 64), lambda i, j: X[i, j] * 2)]),
                                        SM90)[1] is None


def test_tensor_core_policy_from_a_function_and_from_a_graph() -> None:
    arch = get_arch(SM90)
    func, tags = get_tensorized_func_and_tags(_gemm(512, 256, 128), SM90)
    hints = TensorCorePolicy.from_prim_func(func=func, arch=arch, tags=tags, name="m").emit_config(topk=6)
    assert len(hints) == 6 and all(h.use_tc and h.intrin_info is tags["intrin_info"] for h in hints)
    assert [h.cost for h in hints] == sorted(h.cost for h in hints)
    first, second = PrimFuncNode(func, name="m0"), PrimFuncNode(func, name="m1")
    edge = Edge(first, second, 0, 0)
    first._out_edges.append(edge)
    second.set_inputs(0, edge)
    assert second.inputs == [edge] and first.outputs == [edge]
    graph = TensorCorePolicy.from_output_nodes([OutputNode(second)], arch=arch, tags=tags).emit_config(topk=6)
    assert [h.to_dict() for h in graph] == [h.to_dict() for h in hints]


def _check_default_hint(hint, arch, problem) -> None:
    threads = math.prod(hint.thread) * math.prod(hint.reduce_thread or [1])
    assert threads <= 1024 and (arch.warp_size == 1 or threads % 32 == 0)
    assert hint.smem_bytes <= arch.smem_cap
    for extent, tile, t in zip(problem.spatial, hint.block, hint.thread):
        assert tile <= max(extent, 1) * 2 and tile % t == 0
    assert hint.block[-1] % (hint.thread[-1] * hint.step[-1]) == 0
    if hint.reduce_thread:
        assert hint.rstep[-1] % hint.reduce_thread[0] == 0 and hint.block_reduction_depth == hint.reduce_thread[0]


@pytest.mark.parametrize("arch_spec", [SM90, "cpu"])
def test_default_templates_fit_the_device_and_are_ranked(arch_spec) -> None:
    arch = get_arch(arch_spec)
    templates = [carver.ElementwiseTemplate(shape=[4096, 4096], dtype="float16"),
                 carver.GeneralReductionTemplate(structure="SSR", shape=[64, 64, 1024], dtype="float32"),
                 carver.GEMVTemplate(N=1024, K=4096, in_dtype="float16", out_dtype="float16", accum_dtype="float32")]
    for template in templates:
        hints = template.with_arch(arch).recommend_hints(topk=8)
        assert len(hints) == 8, template
        assert [h.cost for h in hints] == sorted(h.cost for h in hints)
        problem = analyze_prim_func(template.equivalent_function())
        for hint in hints:
            _check_default_hint(hint, arch, problem)
            if arch.warp_size == 1:
                assert set(hint.thread) == {1} and not hint.reduce_thread


def test_default_search_choices_on_a_gpu() -> None:
    arch = get_arch(SM90)
    # a GEMV of few outputs splits its long reduction over threads
    gemv = carver.GEMVTemplate(N=1024, K=4096).with_arch(arch).recommend_hints(topk=1)[0]
    assert gemv.reduce_thread and gemv.block[0] * 32 <= 1024
    # a large elementwise tile takes 16-byte accesses (8 float16 lanes) per thread
    ew = carver.ElementwiseTemplate(shape=[4096, 4096]).with_arch(arch).recommend_hints(topk=1)[0]
    assert ew.step[-1] == 8 and ew.vectorize["C"] == 8 and math.prod(ew.block) >= 1024


def test_flash_attention_and_conv_hints() -> None:
    arch = get_arch(SM90)
    fa = carver.FlashAttentionTemplate(batch_size=4, num_heads=32, seq_length=512, seq_kv_length=512,
                                       head_dim=128).with_arch(arch).recommend_hints(topk=5)
    assert fa and all(h.use_tc and h.block[1] == 128 and h.smem_bytes <= arch.smem_cap for h in fa)
    assert all(h.threads in (128, 256) for h in fa)
    conv = carver.ConvTemplate(N=8, C=64, H=56, W=56, F=64, K=3, S=1, D=1, P=1).with_arch(arch)
    assert conv.output_hw == (56, 56)
    hints = conv.recommend_hints(topk=4)
    assert all(h.use_tc and h.block[1] <= 64 for h in hints)  # F = 64 filters
    cpu = get_arch("cpu")
    assert carver.ConvTemplate(N=1, C=8, H=8, W=8, F=8, K=3).with_arch(cpu).recommend_hints(topk=2)
    assert carver.MatmulTemplate(M=256, N=256, K=256).with_arch(cpu).recommend_hints(topk=2)
    with pytest.raises(LanguageError, match=r"GEMVTemplate.recommend_hints: no device; call .with_arch"):
        carver.GEMVTemplate(N=4, K=4).recommend_hints()
    with pytest.raises(LanguageError, match="structure is one letter per axis of shape"):
        carver.GeneralReductionTemplate(structure="SX", shape=[4, 4])
    with pytest.raises(LanguageError, match="ConvTemplate: P must be an int >= 0, got -1"):
        carver.ConvTemplate(N=1, C=1, H=4, W=4, F=1, K=3, P=-1)


# -- the templates' equivalent functions compute what they say -----------------------------------------

def test_equivalent_functions_against_numpy() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 6), np.float32), rng.random((4, 6), np.float32)
    out = _run(carver.ElementwiseTemplate(shape=[4, 6], dtype="float32").equivalent_function(), a, b,
               np.zeros((4, 6), np.float32))[2]
    np.testing.assert_allclose(out, a + b, rtol=1e-6)

    x = rng.random((3, 5, 7), np.float32)
    out = _run(carver.GeneralReductionTemplate(structure="SRS", shape=[3, 5, 7], dtype="float32").equivalent_function(),
               x, np.zeros((3, 7), np.float32))[1]
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5)

    v, w = rng.random(32, np.float32), rng.random((16, 32), np.float32)
    gemv = carver.GEMVTemplate(N=16, K=32, in_dtype="float32", out_dtype="float32", accum_dtype="float32")
    np.testing.assert_allclose(_run(gemv.equivalent_function(), v, w, np.zeros(16, np.float32))[2], w @ v, rtol=1e-5)

    q, k, vv = (rng.standard_normal((1, 2, 8, 16)).astype(np.float32) for _ in range(3))
    fa = carver.FlashAttentionTemplate(batch_size=1, num_heads=2, seq_length=8, seq_kv_length=8, head_dim=16,
                                       in_dtype="float32", accum_dtype="float32", out_dtype="float32")
    got = _run(fa.equivalent_function(), q, k, vv, np.zeros((1, 2, 8, 16), np.float32))[3]
    s = q @ k.transpose(0, 1, 3, 2) / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(got, (p / p.sum(-1, keepdims=True)) @ vv, rtol=1e-4, atol=1e-5)

    data, weight = rng.random((1, 6, 6, 3), np.float32), rng.random((3, 3, 3, 4), np.float32)
    conv = carver.ConvTemplate(N=1, C=3, H=6, W=6, F=4, K=3, S=2, D=1, P=1, in_dtype="float32",
                               out_dtype="float32", accum_dtype="float32")
    oh, ow = conv.output_hw
    got = _run(conv.equivalent_function(), data, weight, np.zeros((1, oh, ow, 4), np.float32))[2]
    padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((1, oh, ow, 4), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = padded[0, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            want[0, i, j] = np.tensordot(patch, weight, axes=3)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_hints_become_upstream_benchmark_configs() -> None:
    """benchmark/matmul/benchmark_matmul.py --with_roller reads hints this way."""
    import tilelang.language as T

    arch = get_arch(SM90)
    for hint in carver.MatmulTemplate(M=4096, N=4096, K=4096, in_dtype="float16", out_dtype="float16",
                                      accum_dtype="float32").with_arch(arch).recommend_hints(topk=10):
        rows, cols = hint.block[0] // hint.warp[0], hint.block[1] // hint.warp[1]
        assert rows * cols * arch.warp_size == hint.threads
        policy = T.GemmWarpPolicy.from_warp_partition(rows, cols)
        assert policy is (T.GemmWarpPolicy.FullRow if cols == 1 and rows > 1 else
                          T.GemmWarpPolicy.FullCol if rows == 1 and cols > 1 else T.GemmWarpPolicy.Square)
    assert T.GemmWarpPolicy.from_warp_partition(4, 1) is T.GemmWarpPolicy.FullRow
    assert T.GemmWarpPolicy.from_warp_partition(1, 4) is T.GemmWarpPolicy.FullCol
    assert T.GemmWarpPolicy.from_warp_partition(2, 2) is T.GemmWarpPolicy.Square


def test_the_gemm_search_asks_the_device_for_its_matrix_units_and_rates() -> None:
    """float32 into float32 is TF32 on sm_80 and newer (the CUDA backend's T.gemm); a device
    that lists no matrix-unit precisions gets SIMT tiles ranked by its own FMA rate."""
    from tilelang.carver.template import MatmulTemplate

    sm90 = get_arch(SM90)
    tf32 = MatmulTemplate(M=4096, N=4096, K=4096, in_dtype="float32", out_dtype="float32",
                          accum_dtype="float32").with_arch(sm90).recommend_hints(topk=4)
    assert tf32 and all(h.use_tc for h in tf32)

    class NoMatrixUnits(CUDA):
        def tensorcore_precisions(self):
            return frozenset()

    device = NoMatrixUnits.__new__(NoMatrixUnits)
    device.__dict__.update(sm90.__dict__)
    simt = MatmulTemplate(M=4096, N=4096, K=4096).with_arch(device).recommend_hints(topk=4)
    assert simt and not any(h.use_tc for h in simt)
    device.fma_per_clock = sm90.fma_per_clock * 4  # four times the FMAs: compute-bound tiles cost less
    assert MatmulTemplate(M=4096, N=4096, K=4096).with_arch(device).recommend_hints(topk=4)[0].cost < simt[0].cost
