"""On a GPU (marked `gpu`; `python -m pytest -m gpu tilelang-cutedsl/tests`): mixed routing
in one process, every result against torch. With TILELANG_ROUTE=cutedsl a plain kernel runs
on cutedsl, an extension kernel runs on cutedsl, a kernel cutedsl does not lower (an atomic)
runs on cuda; each keeps its own cache entry and says where it ran."""

from __future__ import annotations

import pytest
import tilelang
from cute_kernels import (
    atomic_sum,
    row_max_exp,
    row_sum,
    swizzled_transpose,
    tile_copy_scale,
)
from tilelang.testing.kernels import elementwise_add

torch = pytest.importorskip("torch")
# a GPU host without CuTe DSL runs none of these (the cuda backend's GPU tests still run there)
pytest.importorskip("cutlass", reason="NVIDIA CuTe DSL is not installed: pip install 'tilelang-cutedsl[dsl]'")
pytestmark = pytest.mark.gpu


@pytest.fixture
def routed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_ROUTE", "cutedsl")


def compile_cuda(func, out_idx=-1, **configs):
    return tilelang.compile(func, out_idx=[out_idx], target="cuda", pass_configs=configs or None)


def test_mixed_routing_in_one_process(routed: None) -> None:
    plain = compile_cuda(tile_copy_scale(256, 256))
    extension = compile_cuda(swizzled_transpose(256))
    unsupported = compile_cuda(atomic_sum(1024))
    assert plain.context.module.name == "cutedsl" and plain.execution_backend == "cutedsl"
    assert extension.context.module.name == "cutedsl"
    assert unsupported.context.module.name == "cuda"
    assert unsupported.artifact.route == "stays on 'cuda' (router 'cutedsl': cutedsl does not lower atomics)"
    assert len({plain.cache_key, extension.cache_key, unsupported.cache_key}) == 3

    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(plain(a), (a.float() + 1).half(), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(extension(a), a.t().contiguous(), rtol=0, atol=0)
    x = torch.randn(1024, device="cuda")
    # the kernel only adds into B: an output the launcher allocates starts as whatever the
    # memory held, so the test passes a zeroed one (the H200 once showed 3.9 left over)
    in_place = tilelang.compile(atomic_sum(1024), target="cuda")  # B passed in, not allocated
    assert in_place.context.module.name == "cuda"
    total = torch.zeros(1, device="cuda")
    in_place(x, total)
    torch.testing.assert_close(total, x.sum().reshape(1), rtol=1e-4, atol=1e-3)


def test_native_and_routed_runs_of_one_kernel_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    native = compile_cuda(tile_copy_scale(256, 256))
    monkeypatch.setenv("TILELANG_ROUTE", "cutedsl")
    routed = compile_cuda(tile_copy_scale(256, 256))
    assert (native.context.module.name, routed.context.module.name) == ("cuda", "cutedsl")
    assert native.cache_key != routed.cache_key
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(routed(a), native(a), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_elementwise(routed: None, dtype: str) -> None:
    kernel = compile_cuda(elementwise_add(1024, 256, dtype=dtype))
    a = torch.randn(1024, 256, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(1024, 256, device="cuda").to(getattr(torch, dtype))
    torch.testing.assert_close(kernel(a, b), a + b, rtol=1e-3, atol=1e-3)


def test_reductions(routed: None) -> None:
    a = torch.randn(512, 128, device="cuda")
    torch.testing.assert_close(compile_cuda(row_sum(512, 128))(a), a.sum(1), rtol=1e-4, atol=1e-4)
    b = torch.randn(512, 64, device="cuda")
    want = torch.exp(b - b.max(1, keepdim=True).values)
    torch.testing.assert_close(compile_cuda(row_max_exp(512, 64))(b), want, rtol=1e-5, atol=1e-5)


def test_the_callers_stream_and_the_cache(routed: None) -> None:
    kernel = compile_cuda(elementwise_add(1024, 256))
    a, b = torch.randn(1024, 256, device="cuda"), torch.randn(1024, 256, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = kernel(a, b)
    stream.synchronize()
    torch.testing.assert_close(out, a + b)
    out = kernel(a, b, stream=stream)
    stream.synchronize()
    torch.testing.assert_close(out, a + b)
    again = compile_cuda(elementwise_add(1024, 256))
    assert again.from_cache and again.context.module.name == "cutedsl"
    torch.testing.assert_close(again(a, b), a + b)


# (M, N, K, block_M, block_N, block_K, trans_A, trans_B): whole tiles (cp.async copies),
# edge tiles in every dimension (guarded copies, bounded stores), transposed operands
GEMMS = [(1024, 1024, 1024, 128, 128, 32, False, False), (256, 256, 128, 64, 64, 32, False, False),
         (200, 136, 72, 64, 64, 32, False, False), (512, 384, 256, 128, 128, 64, True, True),
         (1000, 520, 264, 128, 64, 32, False, True)]


@pytest.mark.parametrize("wgmma", [True, False], ids=["wgmma", "mma_sync"])
@pytest.mark.parametrize("shape", GEMMS, ids=lambda s: "x".join(map(str, s[:3])) + "".join("T" if t else "N" for t in s[6:]))
def test_gemm_on_cute_mma_atoms(routed: None, shape, wgmma: bool) -> None:
    """fp16 in, fp32 accumulated: against torch's fp32 product of the same fp16 values; the
    tolerance covers fp32 summation order over K (<= 1024 terms of magnitude ~1). On the
    H200, whole tiles take warpgroup MMA (edge shapes mma.sync); tl.disable_wgmma forces
    mma.sync everywhere."""
    from tilelang.testing.kernels import tile_gemm

    m, n, k, bm, bn, bk, ta, tb = shape
    configs = {} if wgmma else {"tl.disable_wgmma": True}
    kernel = compile_cuda(tile_gemm(m, n, k, bm, bn, bk, trans_a=ta, trans_b=tb, stages=3), **configs)
    assert kernel.context.module.name == "cutedsl"
    source = kernel.get_kernel_source()
    assert "cute.gemm(" in source
    whole = m % bm == 0 and n % bn == 0 and k % bk == 0
    assert ("warpgroup" in source) == (wgmma and whole and torch.cuda.get_device_capability() == (9, 0))
    a = torch.randn(*((k, m) if ta else (m, k)), device="cuda", dtype=torch.float16)
    b = torch.randn(*((n, k) if tb else (k, n)), device="cuda", dtype=torch.float16)
    want = (a.t() if ta else a).float() @ (b.t() if tb else b).float()
    torch.testing.assert_close(kernel(a, b), want, rtol=1e-3, atol=1e-2)


def test_bf16_gemm(routed: None) -> None:
    from tilelang.testing.kernels import tile_gemm

    kernel = compile_cuda(tile_gemm(512, 512, 256, 128, 128, 32, dtype="bfloat16"))
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-3, atol=1e-2)


def test_explicit_target_simt_gemm_and_flash_attention() -> None:
    """A float32 GEMM runs SIMT loops on cutedsl when asked for; flash-attention's GEMMs run
    on MMA atoms through shared memory (staged.py)."""
    from tilelang.testing.kernels import flash_attention, tile_gemm

    gemm = tilelang.compile(tile_gemm(256, 256, 128, dtype="float32"), out_idx=[-1], target="cutedsl")
    a, b = torch.randn(256, 128, device="cuda"), torch.randn(128, 256, device="cuda")
    torch.testing.assert_close(gemm(a, b), a @ b, rtol=1e-3, atol=1e-3)
    # a relu epilogue on the accumulator: CuTe MMA atoms, the epilogue on their registers
    relu = tilelang.compile(tile_gemm(256, 256, 128, 128, 128, 32, stages=3, relu=True), out_idx=[-1],
                            target="cutedsl")
    assert "Cl_coord" in relu.get_kernel_source()
    a, b = (torch.randn(*s, device="cuda", dtype=torch.float16) for s in ((256, 128), (128, 256)))
    torch.testing.assert_close(relu(a, b), torch.relu(a.float() @ b.float()), rtol=1e-3, atol=1e-2)
    attention = tilelang.compile(flash_attention(1, 2, 256, 64), out_idx=[-1], target="cutedsl")
    assert "tl_cute" not in attention.get_kernel_source() and "acc_s_stage" in attention.get_kernel_source()
    q, k, v = (torch.randn(1, 256, 2, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                            v.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(attention(q, k, v), want, rtol=2e-2, atol=2e-2)


def test_scalar_parameter_and_atomics_on_explicit_cutedsl() -> None:
    """A scalar passed by value (routed too), and float32 atomics (explicit target only: the
    router keeps atomics on cuda until this test has passed on the H200)."""
    from tilelang.testing.kernels import saxpy

    kernel = tilelang.compile(saxpy(1000), target="cutedsl")
    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    want = 2.5 * x + y
    kernel(x, y, 2.5)
    torch.testing.assert_close(y, want)
    total = tilelang.compile(atomic_sum(1024), target="cutedsl")
    a = torch.randn(1024, device="cuda")
    out = torch.zeros(1, device="cuda")  # the kernel adds into it: start from zero
    total(a, out)
    torch.testing.assert_close(out, a.sum().reshape(1), rtol=1e-4, atol=1e-3)


EXAMPLES = [("elementwise_add", {"M": 1000, "N": 256}), ("softmax", {"N": 128}), ("rmsnorm", {"M": 100, "N": 256}),
            ("gemm", {"M": 96, "N": 80, "K": 40, "bM": 32, "bN": 32, "bK": 16}), ("gemm", {}),
            ("flash_attention", {"batch": 1, "heads": 2, "seq_len": 128, "dim": 64})]


@pytest.mark.parametrize(("name", "kwargs"), EXAMPLES, ids=[f"{n}{i}" for i, (n, _) in enumerate(EXAMPLES)])
def test_examples_run_on_cutedsl(routed: None, name: str, kwargs: dict) -> None:
    """Every example of examples/ with routing on (each checks its own result against numpy):
    routed here, except flash attention, whose GEMMs would go through shared memory every key
    block (router.slow_gemm_reason) and which stays on cuda."""
    import importlib
    import sys
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "examples"
    sys.path.insert(0, str(folder))
    try:
        described = importlib.import_module(name).run(**kwargs)
    finally:
        sys.path.remove(str(folder))
    if name == "flash_attention":
        assert "stays on 'cuda' (router 'cutedsl': cutedsl does not lower T.gemm into 'acc_s' in a loop" in described
    else:
        assert "routed 'cuda' -> 'cutedsl'" in described, described


def test_gemm_with_a_shared_epilogue(routed: None) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_cutedsl_gemm import staged_epilogue_gemm

    kernel = compile_cuda(staged_epilogue_gemm(512, 384, 256))
    assert kernel.context.module.name == "cutedsl"
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-2)
