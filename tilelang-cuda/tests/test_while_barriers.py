"""Barriers inside ``while`` loops (core's transform/gpu/while_sync.py), on the CUDA backend.

A kernel that walks its tiles with a ``while`` loop over a block-uniform counter (upstream's
AMD flash attention spells its persistent loop so) and stages each tile through shared
memory needs a barrier between the tile's copy and its reads, and one between an
iteration's reads and the next iteration's copy. TVM's ThreadSync refused every barrier in
a while loop ("Cannot insert syncs inside condition"); shown the loop as a counted one, it
places both, as in the same kernel written with a ``for`` loop. Without a GPU: the barriers'
places in the source, the rule that keeps a per-thread condition a while loop, and nvcc
assembling a pipelined GEMM in such a loop; on the GPU (marked ``gpu``): both kernels
against torch (fp32 sums: rtol 1e-5; fp16 GEMM with fp32 accumulation: rtol 1e-2, atol
5e-2, as the other GEMM tests).
"""

from __future__ import annotations

import re
import subprocess

import pytest
import tilelang
import tilelang.language as T
import tvm_ffi
from test_tma import lower
from tilelang.cuda import toolchain
from tilelang.testing.kernels import row_sums
from tilelang.transform.gpu.while_sync import WHILE_CONDITION, WhileAsLoop
from tvm import IRModule, tirx

SM90 = {"kind": "cuda", "arch": "sm_90"}


def gemm_tiles_while(M=1024, N=768, K=512, blocks=16, bM=128, bN=128, bK=32):
    """C = A @ B, each block taking the tiles ``b, b + blocks, ...`` in a while loop."""
    n_cols = N // bN
    tiles = (M // bM) * n_cols

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(blocks, threads=128) as (b,):
            As = T.alloc_shared((bM, bK), "float16")
            Bs = T.alloc_shared((bK, bN), "float16")
            Cl = T.alloc_fragment((bM, bN), "float32")
            t = T.alloc_var(T.int32)
            t = b
            while t < tiles:
                by = t // n_cols
                bx = t % n_cols
                T.clear(Cl)
                for k in T.Pipelined(K // bK, num_stages=3):
                    T.copy(A[by * bM, k * bK], As)
                    T.copy(B[k * bK, bx * bN], Bs)
                    T.gemm(As, Bs, Cl)
                T.copy(Cl, C[by * bM, bx * bN])
                t = t + blocks

    return main


def loop_body(source: str, head: str) -> str:
    """The kernel's code from the loop ``head`` on."""
    body = source[source.index('extern "C" __global__'):]
    return body[body.index(head):]


def test_the_while_loop_gets_the_barriers_the_for_loop_gets():
    while_body = loop_body(lower(row_sums(loop="while"), host_code=False).device_source, "while (1)")
    for_body = loop_body(lower(row_sums(loop="for"), host_code=False).device_source, "for (int w = 0;")
    # one barrier before the copy (the previous iteration's reads of the tile), one after it
    for body in (while_body, for_body):
        assert body.count("__syncthreads();") == 2
        copy, reads = body.index("tile_ptr + ((k * 512)"), body.index("acc3_ptr[0] + tile_ptr[")
        first, second = (m.start() for m in re.finditer(r"__syncthreads\(\);", body))
        assert first < copy < second < reads
    assert re.match(r"while \(1\) \{\n +if \(!\(+bx_ptr\[0\] < 32\)+\) \{ break; \}", while_body)  # the user's loop


def test_a_condition_that_differs_between_threads_stays_a_while_loop():
    @T.prim_func
    def per_thread(A: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=128) as (b,):
            i = T.alloc_var(T.int32)
            i = T.get_thread_binding() + b
            while i < 1024:
                A[i] = 1.0
                i = i + 128

    @T.prim_func
    def per_block(A: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as (b,):
            i = T.alloc_var(T.int32)
            i = b
            while i < 1024:
                A[i] = 1.0
                i = i + 8

    def shown_as_loops(func):
        loops = []
        mod = WhileAsLoop()(IRModule({"main": func}))
        tvm_ffi.structural_walk(mod["main"].body, (tirx.For, loops.append))
        return sum(WHILE_CONDITION in (loop.annotations or {}) for loop in loops)

    assert shown_as_loops(per_thread) == 0  # a barrier in it could deadlock: ThreadSync still refuses one
    assert shown_as_loops(per_block) == 1


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_nvcc_assembles_a_pipelined_gemm_in_a_while_loop(tmp_path):
    source = lower(gemm_tiles_while()).device_source
    assert "while (1)" in source and "tl_tma_load_2d" in source
    path = tmp_path / "k.cu"
    path.write_text(source)
    result = subprocess.run([toolchain.nvcc_path(), "-cubin", "-arch=sm_90a", str(path), "-o",
                             str(tmp_path / "k.cubin")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_while_loop_kernels_match_torch():
    torch = pytest.importorskip("torch")
    a = torch.randn(1024, 256, device="cuda")
    kernel = tilelang.compile(row_sums(), out_idx=[-1], target="cuda")
    torch.testing.assert_close(kernel(a), a.sum(1), rtol=1e-5, atol=1e-4)
    a = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 768, device="cuda", dtype=torch.float16)
    kernel = tilelang.compile(gemm_tiles_while(), out_idx=[-1], target="cuda")
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_a_barrier_under_a_per_thread_condition_is_refused_with_advice():
    @T.prim_func
    def reversed_copy(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as (b,):
            tile = T.alloc_shared((128,), "float32")
            i = T.alloc_var(T.int32)
            i = T.get_thread_binding() + b
            while i < 256:
                tile[i % 128] = A[i]
                B[i] = tile[127 - i % 128]  # another thread's element: a barrier between
                i = i + 128

    with pytest.raises(tilelang.errors.CompileError) as caught:
        lower(reversed_copy, host_code=False)
    message = str(caught.value)
    assert "Cannot insert syncs inside condition" in message
    assert "A barrier (__syncthreads) is needed inside a loop or branch whose condition may differ" in message
    assert "Make the condition the same in every thread" in message
