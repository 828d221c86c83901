"""TMA stage rings (sm_90, transform/tma.py), checked without a GPU: which pipelines take
them, the boxes and barriers in the kernel, the tensor maps the host code encodes, and that
nvcc compiles the result. The GPU runs (correctness against torch, edge tiles) are in
test_gpu_tile.py, whose GEMMs take this path on the H200 through tvm_ffi."""

from __future__ import annotations

import dataclasses
import re

import pytest
import tilelang
from tilelang.backend.module import create_backend_context
from tilelang.backend.resolution import execution_specs
from tilelang.engine.lower import lower as lower_artifact
from tilelang.testing.kernels import tile_gemm

SM90 = {"kind": "cuda", "arch": "sm_90"}


def lower(func, host_code: bool = True, **configs):
    """The artifact for an execution backend that runs the kernel's host code (tvm_ffi's
    spec: it is what encodes tensor maps) or, ``host_code=False``, for one that launches
    the kernel itself (nvrtc's)."""
    context = create_backend_context(SM90, execution_backend=None)
    name = "tvm_ffi" if host_code else "nvrtc"
    spec = next(s for s in execution_specs(context.module) if s.name == name)
    context = dataclasses.replace(context, execution_spec=spec)
    return lower_artifact(func, context, out_idx=[-1], pass_configs=configs or None)


def kernel_body(source: str) -> str:
    return source[source.index('extern "C" __global__'):]


def boxes(body: str) -> list[tuple[str, str]]:
    """(shared offset, tensor map) of every box the kernel issues."""
    return re.findall(r"tl_tma_load_2d\(\(&\(\(\(half\*\)buf_dyn_shmem_ptr\)\[(.*?)\]\)\), "
                      r"\(\(unsigned long long\)\(&\((\w+)\)\)\)", body)


def test_canonical_gemm_loads_its_tiles_with_tma_boxes():
    artifact = lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3))
    body = kernel_body(artifact.device_source)
    assert "const __grid_constant__ CUtensorMap A_tensor_map" in body
    assert "const __grid_constant__ CUtensorMap B_tensor_map" in body
    assert "tl_cp_async" not in body and "tl_fence_proxy_async" not in body
    # prologue: stages 0 and 1; A (128 x 32 halves, one 64-byte block) is one box, B
    # (32 x 128, two 128-byte column blocks) two boxes 32 x 64 apart
    prologue = body[:body.index("for (int k")]
    assert boxes(prologue) == [("0", "A_tensor_map"), ("12288", "B_tensor_map"), ("14336", "B_tensor_map"),
                               ("4096", "A_tensor_map"), ("16384", "B_tensor_map"), ("18432", "B_tensor_map")]
    # 16 KiB per stage: A 128 x 32 + B 32 x 128 halves
    assert prologue.count("tl_mbarrier_expect_tx((&(tma_barrier_ptr[0])), 16384)") == 1
    loop = body[body.index("for (int k"):]
    # every thread waits for full[k % 3]; no block barrier inside the loop
    assert re.search(r"tl_mbarrier_wait\(\(&\(tma_barrier_ptr\[\(k % 3\)\]\)\), \(\(k % 6\) / 3\)\)", loop)
    assert "__syncthreads" not in loop[:loop.index("tl_wgmma_wait(0)")]
    # after the first GEMM's wait, the stage of iteration k - 1 is released (empty barriers
    # at 3 + stage) and thread 0 refills it two iterations ahead once all 128 threads have
    assert re.search(r"tl_wgmma_wait\(1\);.*?tl_mbarrier_arrive\(\(&\(tma_barrier_ptr\[\(\(\(k \+ 2\) % 3\) \+ 3\)\]",
                     loop, re.DOTALL)
    assert "tl_mbarrier_init((&(tma_barrier_ptr[3])), 128)" in body
    assert "((k * 32) + 64)" in loop  # the refill is for iteration k + 2
    assert "extern __shared__ __align__(1024) uchar buf_dyn_shmem_ptr[]" in artifact.device_source
    # the host code encodes both maps before the launch
    assert artifact.host_source.count("runtime.cuTensorMapEncodeTiled") >= 1
    assert "A_tensor_map" in artifact.host_source and "B_tensor_map" in artifact.host_source


def test_edge_tiles_need_no_predicates():
    # 1000 is no multiple of 128: the hardware zero-fills boxes outside the tensor
    body = kernel_body(lower(tile_gemm(1000, 1000, 1000, 128, 128, 32, stages=3)).device_source)
    assert "tl_tma_load_2d" in body and "tl_cp_async" not in body
    # four stages: three iterations ahead
    body = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=4)).device_source)
    assert "((k * 32) + 96)" in body


@pytest.mark.parametrize("why,kwargs,configs", [
    ("execution backend without host code", {"host_code": False}, {}),
    ("tl.disable_tma_lower", {}, {"tl.disable_tma_lower": True}),
    ("unswizzled tiles", {}, {"tl.disable_wgmma_swizzle": True}),
])
def test_cp_async_stays_where_tma_cannot_or_must_not_run(why, kwargs, configs):
    body = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3), **kwargs, **configs).device_source)
    assert "tl_cp_async_16" in body and "tl_tma_load" not in body and "CUtensorMap" not in body, why


def test_codegen_only_lowering_is_unchanged():
    # tilelang.lower has no execution backend and so no host code to encode tensor maps
    body = kernel_body(tilelang.lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3), target=SM90,
                                      out_idx=[-1]).device_source)
    assert "tl_cp_async_16" in body and "tl_tma_load" not in body

