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
from tilelang.engine.lower import lower_with_context as lower_artifact
from tilelang.errors import BackendNotFoundError
from tilelang.testing.kernels import tile_gemm

SM90 = {"kind": "cuda", "arch": "sm_90"}


def lower(func, host_code: bool = True, **configs):
    """The artifact for an execution backend that runs the kernel's host code (tvm_ffi's
    spec: that code encodes the tensor maps) or, ``host_code=False``, for one that launches
    the kernel itself and encodes no tensor maps (cython's; nvrtc's encodes them from the
    launch metadata, tilelang-exec-nvrtc's tests)."""
    context = create_backend_context(SM90, execution_backend=None)
    name = "tvm_ffi" if host_code else "cython"
    spec = next(s for s in execution_specs(context.module) if s.name == name)
    context = dataclasses.replace(context, execution_spec=spec)
    # the rings as the kernels write them: short K steps unmerged (test_merge_k_steps.py), C
    # stored straight from the accumulators (test_shared_epilogue.py)
    configs = {"tl.disable_k_step_merge": True, "tl.disable_shared_epilogue": True, **configs}
    return lower_artifact(func, context, out_idx=[-1], pass_configs=configs)


def kernel_body(source: str) -> str:
    return source[source.index('extern "C" __global__'):]


def boxes(body: str) -> list[tuple[str, str]]:
    """(shared offset, tensor map) of every box the kernel issues."""
    return re.findall(r"tl_tma_load_2d\(\(&\(\(\(half\*\)buf_dyn_shmem_ptr\)\[(.*?)\]\)\), "
                      r"\(\(unsigned long long\)\(&\((\w+)\)\)\)", body)


def test_canonical_gemm_loads_its_tiles_with_tma_boxes_from_a_producer_warp():
    artifact = lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3))
    body = kernel_body(artifact.device_source)
    assert "const __grid_constant__ CUtensorMap A_tensor_map" in body
    assert "const __grid_constant__ CUtensorMap B_tensor_map" in body
    assert "tl_cp_async" not in body and "tl_fence_proxy_async" not in body
    # one more warp than the kernel declares; barriers initialized before the roles split
    assert "__launch_bounds__(160" in body
    head, consumers = body.split("if (((int)threadIdx.x) < 128) {", 1)
    assert "tl_mbarrier_init((&(tma_barrier_ptr[3])), 128)" in head and "__syncthreads();" in head
    consumers, producer = consumers.split("if (((int)threadIdx.x) == 128) {", 1)
    # consumers: wait for full[k % 3], GEMM, release the previous iteration's stage (empty
    # barriers at 3 + stage); no box, and named barriers instead of __syncthreads
    assert re.search(r"tl_mbarrier_wait\(\(&\(tma_barrier_ptr\[\(k % 3\)\]\)\), \(\(k % 6\) / 3\)\)", consumers)
    assert re.search(r"tl_wgmma_wait\(1\);\s+if \(\(0 < k\)\) \{\s+tl_mbarrier_arrive\("
                     r"\(&\(tma_barrier_ptr\[\(\(\(k \+ 2\) % 3\) \+ 3\)\]", consumers)
    assert "tl_tma_load" not in consumers and "__syncthreads" not in consumers
    assert "tl_named_barrier_sync(1, 128);" in consumers
    # the producer: every iteration's boxes, each stage once its consumers released it
    assert re.search(r"if \(\(3 <= k_1\)\) \{\s+tl_mbarrier_wait\(\(&\(tma_barrier_ptr\[\(\(k_1 % 3\) \+ 3\)\]\)\), "
                     r"\(\(\(k_1 / 3\) \+ 1\) & 1\)\)", producer)
    assert "tl_mbarrier_expect_tx((&(tma_barrier_ptr[(k_1 % 3)])), 16384)" in producer  # A + B halves
    # A (128 x 32 halves, one 64-byte block) is one box, B (32 x 128, two 128-byte column
    # blocks) two boxes 32 x 64 halves apart
    assert [offset for offset, _ in boxes(producer)] == ["((k_1 % 3) * 4096)", "(((k_1 % 3) * 4096) + 12288)",
                                                          "(((k_1 % 3) * 4096) + 14336)"]
    assert [tmap for _, tmap in boxes(producer)] == ["A_tensor_map", "B_tensor_map", "B_tensor_map"]
    assert "extern __shared__ __align__(1024) uchar buf_dyn_shmem_ptr[]" in artifact.device_source
    # the host code encodes both maps before the launch
    assert artifact.host_source.count("runtime.cuTensorMapEncodeTiled") >= 1
    assert "A_tensor_map" in artifact.host_source and "B_tensor_map" in artifact.host_source


def test_single_issuer_ring_without_warp_specialization():
    body = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3),
                             **{"tl.disable_warp_specialized": True}).device_source)
    assert "__launch_bounds__(128" in body and "tl_named_barrier" not in body
    prologue = body[:body.index("for (int k")]
    assert [offset for offset, _ in boxes(prologue)] == ["0", "12288", "14336", "4096", "16384", "18432"]
    loop = body[body.index("for (int k"):]
    assert "__syncthreads" not in loop[:loop.index("tl_wgmma_wait(0)")]
    # after the first GEMM's wait the previous stage is released, and thread 0 refills it
    # for iteration k + 2 once all 128 threads have
    assert re.search(r"tl_wgmma_wait\(1\);.*?tl_mbarrier_arrive\(\(&\(tma_barrier_ptr\[\(\(\(k \+ 2\) % 3\) \+ 3\)\]",
                     loop, re.DOTALL)
    assert "((k * 32) + 64)" in loop


def test_edge_tiles_need_no_predicates():
    # 1000 is no multiple of 128: the hardware zero-fills boxes outside the tensor
    body = kernel_body(lower(tile_gemm(1000, 1000, 1000, 128, 128, 32, stages=3)).device_source)
    assert "tl_tma_load_2d" in body and "tl_cp_async" not in body
    # without a producer warp: four stages, three iterations ahead
    body = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=4),
                             **{"tl.disable_warp_specialized": True}).device_source)
    assert "((k * 32) + 96)" in body


def test_a_ring_inside_another_loop_runs_on_across_its_iterations():
    import tilelang.language as T

    @T.prim_func
    def batched(A: T.Tensor((2, 256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
                C: T.Tensor((2, 256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            for b in T.serial(2):
                T.clear(Cl)
                for k in T.Pipelined(8, num_stages=3):
                    T.copy(A[b, by * 128, k * 32], As)
                    T.copy(B[k * 32, bx * 128], Bs)
                    T.gemm(As, Bs, Cl)
                T.copy(Cl, C[b, by * 128, bx * 128])

    body = kernel_body(lower(batched).device_source)
    # the producer warp replays the outer loop (test_persistent_ring.py has the protocol)
    assert "tl_tma_load_3d" in body and "__launch_bounds__(160" in body
    assert "tma_consumed_ptr[0] = (consumed + 8);" in body and "tma_produced_ptr[0] = (produced + 8);" in body


@pytest.mark.parametrize("host_code,copy", [(True, "tl_tma_load_2d"), (False, "tl_cp_async_16")])
def test_a_name_assigned_in_the_pipelined_loop_keeps_the_pipeline(host_code, copy):
    import tilelang.language as T

    # upstream's examples name the tile's offset inside the loop (a one-element local)
    @T.prim_func
    def named(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
              C: T.Tensor((1024, 1024), "float32")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            for k in T.Pipelined(32, num_stages=3):
                start = k * 32
                T.copy(A[by * 128, start], As)
                T.copy(B[start, bx * 128], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * 128, bx * 128])

    body = kernel_body(lower(named, host_code=host_code).device_source)
    assert copy in body and "tl_wgmma_m64n128k16" in body and "tl_mma_m16n8k16" not in body


@pytest.mark.parametrize("host_code,copy", [(True, "tl_tma_load_2d"), (False, "tl_cp_async_16")])
def test_a_name_built_from_names_assigned_before_the_loop_keeps_the_pipeline(host_code, copy):
    import tilelang.language as T

    # upstream's varlen attention: actual_k = k + start, where start was named before the
    # loop. Issued a stage ahead, the copy reads start, never actual_k before its assignment
    @T.prim_func
    def named(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
              Starts: T.Tensor((8,), "int32"), C: T.Tensor((1024, 1024), "float32")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            start = Starts[by]
            T.clear(Cl)
            for k in T.Pipelined(24, num_stages=3):
                actual_k = k + start
                T.copy(A[by * 128, actual_k * 32], As)
                T.copy(B[actual_k * 32, bx * 128], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * 128, bx * 128])

    body = kernel_body(lower(named, host_code=host_code).device_source)
    assert copy in body and "tl_wgmma_m64n128k16" in body


def test_a_copy_at_a_name_the_iteration_loads_is_not_issued_ahead():
    import tilelang.language as T

    # the tile's corner comes from memory the loop itself writes: no copy may run ahead
    @T.prim_func
    def chased(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
               C: T.Tensor((1024, 1024), "float32")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            nxt = T.alloc_local((1,), "int32")
            nxt[0] = 0
            T.clear(Cl)
            for k in T.Pipelined(24, num_stages=3):
                at = nxt[0]
                T.copy(A[by * 128, at * 32], As)
                T.copy(B[at * 32, bx * 128], Bs)
                T.gemm(As, Bs, Cl)
                nxt[0] = at + 1
            T.copy(Cl, C[by * 128, bx * 128])

    body = kernel_body(lower(chased, host_code=False).device_source)
    assert "tl_cp_async_16" not in body and "tl_tma_load" not in body


@pytest.mark.parametrize("why,kwargs,configs", [
    ("execution backend without host code or tensor-map operands", {"host_code": False}, {}),
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



def test_lower_takes_the_execution_backend_whose_code_it_shows():
    """tilelang.lower(..., execution_backend=name): the kernel as that backend gets it, with
    no need to run it here (the benchmark families' dry run compiles what the GPU runs)."""
    gemm = tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3)
    for name, tma in (("tvm_ffi", True), ("cython", False)):
        body = kernel_body(tilelang.lower(gemm, target=SM90, out_idx=[-1], execution_backend=name).device_source)
        assert ("tl_tma_load_2d" in body and "CUtensorMap" in body) == tma, name
        assert ("tl_cp_async_16" in body) == (not tma), name
    with pytest.raises(BackendNotFoundError, match=r"target backend 'cuda' cannot use execution backend 'ctypes'; "
                                                   r"it declares: tvm_ffi, nvrtc, cython"):
        tilelang.lower(gemm, target=SM90, out_idx=[-1], execution_backend="ctypes")
