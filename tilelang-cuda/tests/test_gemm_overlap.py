"""The second GEMM of a consumer loop overlapped with the next iteration's register work
(transform/gemm_overlap.py, FlashAttention-3's intra-warpgroup overlap), without a GPU:
the schedule in the generated source, what keeps a loop as written, and that nvcc
compiles it. The GPU runs against SDPA are test_gpu_tile.py's and test_pingpong.py's
256-thread flash-attention cases (head dim 128: the warp-specialized ones)."""

from __future__ import annotations

import subprocess

import pytest
import tilelang.language as T
from test_pingpong import consumers
from test_tma import kernel_body, lower
from tilelang.cuda import toolchain
from tilelang.testing.kernels import flash_attention

OFF = {"tl.intra_warpgroup_overlap": True}  # opt-in; the schedule alone (pingpong is off by default)


def loop_lines(source: str) -> tuple[list[str], list[str]]:
    """(the consumer loop's lines, the lines after it)."""
    lines = consumers(source, 256)
    start = lines.index(next(x for x in lines if x.startswith("for (int k_1")))
    depth, end = 0, start
    for end in range(start, len(lines)):
        depth += lines[end].count("{") - lines[end].count("}")
        if depth == 0:
            break
    return lines[start:end + 1], lines[end + 1:]


def test_the_second_gemm_of_the_previous_iteration_is_issued_after_the_first():
    loop, after = loop_lines(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **OFF).device_source)
    fences = [i for i, x in enumerate(loop) if x == "tl_wgmma_fence();"]
    assert len(fences) == 2
    # S_k, then (from the second iteration) P_{k-1} V_{k-1} from the previous stage of the ring,
    # right after the wait for that stage's V (K and V have barriers of their own)
    assert loop[fences[1] - 2] == "if (0 < k_1) {"
    assert loop[fences[1] - 1].startswith("tl_mbarrier_wait((&(tma_barrier_ptr[(((k_1 + 1) & 1) + 2)])")
    shifted = loop[fences[1]:loop.index("tl_wgmma_commit();", fences[1])]
    assert all("((k_1 + 1) & 1) * 16384" in x for x in shifted if x.startswith("tl_wgmma_m64"))
    # wait for S_k alone (one group may stay in flight), the softmax, then the second GEMM
    waits = [x for x in loop if x.startswith("tl_wgmma_wait(")]
    assert waits == ["tl_wgmma_wait(1);", "tl_wgmma_wait(0);", "tl_wgmma_wait(0);"]
    last_wait = max(i for i, x in enumerate(loop) if x == "tl_wgmma_wait(0);")
    early, late = loop[loop.index("tl_wgmma_wait(1);"):last_wait], loop[last_wait:]
    # S_k is done: its K stage is free at once (V's waits for P V below)
    release = next(i for i, x in enumerate(early) if x.startswith("tl_mbarrier_arrive("))
    assert early[release].startswith("tl_mbarrier_arrive((&(tma_barrier_ptr[((k_1 & 1) + 4)")
    assert release < min(i for i, x in enumerate(early) if "exp2f" in x)
    assert any("exp2f" in x for x in early) and any("acc_s_ptr" in x for x in early)
    assert not any("acc_o_ptr" in x or "acc_s_cast_ptr" in x for x in early)
    # then the accumulator fence, the release of stage k - 1, the rescale and P's fp16 copy
    assert late[1] == "tl_wgmma_fence_f32((&(acc_o_ptr[0])), 64);"
    assert late[2] == "if ((0 < k_1)) {" and late[3].startswith("tl_mbarrier_arrive(")
    assert any("acc_o_ptr" in x for x in late) and any("acc_s_cast_ptr" in x for x in late)
    # the last iteration's second GEMM after the loop, after the wait for its V
    assert after[0].startswith("tl_mbarrier_wait(") and after[1] == "tl_wgmma_fence();"
    assert "tl_wgmma_wait(0);" in after[:12]


def test_the_producer_becomes_a_warpgroup_that_gives_its_registers_to_the_consumers():
    body = kernel_body(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **OFF).device_source)
    assert "__launch_bounds__(384)" in body  # two consumer warpgroups and a producer warpgroup
    assert "if (((int)threadIdx.x) < 256) {\n    tl_setmaxnreg_inc(240);" in body
    # every producer thread gives its registers back; one of them still issues every box
    assert "  } else {\n    tl_setmaxnreg_dec(24);\n    if (((int)threadIdx.x) == 256) {" in body
    plain = kernel_body(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2)).device_source)
    assert "__launch_bounds__(288)" in plain and "tl_setmaxnreg" not in plain


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_the_overlapped_loop_assembles_without_spills(tmp_path):
    """ptxas -v: with the producer warp (168 registers a thread) P of the previous iteration
    spilled 128 bytes; with the consumers' 240 nothing spills."""
    src = tmp_path / "fa.cu"
    src.write_text(lower(flash_attention(8, 16, 4096, 128, 128, 128, 256, 2), **OFF).device_source)
    out = subprocess.run([toolchain.nvcc_path(), "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                          str(tmp_path / "fa.cubin")], check=True, capture_output=True, text=True)
    assert " 0 bytes spill stores, 0 bytes spill loads" in out.stderr


def test_by_default_the_loop_stays_as_written():
    loop, _ = loop_lines(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2)).device_source)  # the default
    assert [x for x in loop if x.startswith("tl_wgmma_wait(")] == ["tl_wgmma_wait(0);"] * 2


def attention_reading_o_in_the_loop(seq_len=1024, dim=128, block=128):
    """The examples' flash attention plus a statement after P V that reads O: that
    statement would run before its GEMM if the GEMM moved to the next iteration."""
    shape = [1, seq_len, 2, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
             Output: T.Tensor(shape, "float16")):
        with T.Kernel(seq_len // block, 2, 1, threads=256) as (bx, by, bz):
            Q_shared = T.alloc_shared([block, dim], "float16")
            K_shared = T.alloc_shared([block, dim], "float16")
            V_shared = T.alloc_shared([block, dim], "float16")
            acc_s = T.alloc_fragment([block, block], "float32")
            acc_s_cast = T.alloc_fragment([block, block], "float16")
            acc_o = T.alloc_fragment([block, dim], "float32")
            peak = T.alloc_fragment([block], "float32")
            T.copy(Q[bz, bx * block:(bx + 1) * block, by, :], Q_shared)
            T.fill(acc_o, 0)
            for k in T.Pipelined(seq_len // block, num_stages=2):
                T.copy(K[bz, k * block:(k + 1) * block, by, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                for i, j in T.Parallel(block, block):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * 0.01)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[bz, k * block:(k + 1) * block, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
                T.reduce_max(acc_o, peak, dim=1)  # reads O right after its GEMM
                for i, j in T.Parallel(block, dim):
                    acc_o[i, j] = acc_o[i, j] / T.max(peak[i], 1.0)
            T.copy(acc_o, Output[bz, bx * block:(bx + 1) * block, by, :])

    return main


def test_a_loop_that_reads_the_second_gemms_result_stays_as_written():
    source = lower(attention_reading_o_in_the_loop(), **OFF).device_source
    loop, _ = loop_lines(source)
    assert sum(x == "tl_wgmma_fence();" for x in loop) == 2  # warp-specialized, two GEMMs per iteration
    assert "tl_wgmma_wait(1);" not in loop and not any(x.startswith("if (0 < k_1)") for x in loop)


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_nvcc_compiles_the_overlapped_loop():
    source = lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **OFF).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", "overlap")[:4] == b"\x7fELF"
