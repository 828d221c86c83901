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

ON = {"tl.intra_warpgroup_overlap": True}  # forced; the schedule alone (pingpong is off by default)
NO = {"tl.intra_warpgroup_overlap": False}


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
    loop, after = loop_lines(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **ON).device_source)
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
    body = kernel_body(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **ON).device_source)
    assert "__launch_bounds__(384)" in body  # two consumer warpgroups and a producer warpgroup
    assert "if (((int)threadIdx.x) < 256) {\n    tl_setmaxnreg_inc(240);" in body
    # every producer thread gives its registers back; one of them still issues every box
    assert "  } else {\n    tl_setmaxnreg_dec(24);\n    if (((int)threadIdx.x) == 256) {" in body
    plain = kernel_body(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **NO).device_source)
    assert "__launch_bounds__(288)" in plain and "tl_setmaxnreg" not in plain


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_the_overlapped_loop_assembles_without_spills(tmp_path):
    """ptxas -v: with the producer warp (168 registers a thread) P of the previous iteration
    spilled 128 bytes; with the consumers' 240 nothing spills."""
    src = tmp_path / "fa.cu"
    src.write_text(lower(flash_attention(8, 16, 4096, 128, 128, 128, 256, 2), **ON).device_source)
    out = subprocess.run([toolchain.nvcc_path(), "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                          str(tmp_path / "fa.cubin")], check=True, capture_output=True, text=True)
    assert " 0 bytes spill stores, 0 bytes spill loads" in out.stderr


def test_switched_off_the_loop_stays_as_written():
    loop, _ = loop_lines(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **NO).device_source)
    assert [x for x in loop if x.startswith("tl_wgmma_wait(")] == ["tl_wgmma_wait(0);"] * 2


def same_source(func, **configs) -> tuple[bool, bool]:
    """(the default lowering is the forced-on one's, it is the switched-off one's)."""
    default = lower(func).device_source
    return default == lower(func, **ON, **configs).device_source, default == lower(func, **NO, **configs).device_source


@pytest.mark.parametrize("stages", [2, 3])
def test_by_default_flash_attention_gets_the_overlap(stages):
    """Upstream's plain kernel: K and V have barriers of their own, so even 2 stages pay."""
    assert same_source(flash_attention(1, 2, 1024, 128, 128, 128, 256, stages)) == (True, False)


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
    source = lower(attention_reading_o_in_the_loop(), **ON).device_source
    loop, _ = loop_lines(source)
    assert sum(x == "tl_wgmma_fence();" for x in loop) == 2  # warp-specialized, two GEMMs per iteration
    assert "tl_wgmma_wait(1);" not in loop and not any(x.startswith("if (0 < k_1)") for x in loop)


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_nvcc_compiles_the_overlapped_loop():
    source = lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **ON).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", "overlap")[:4] == b"\x7fELF"


def attention_with_fixed_values(seq_len=1024, dim=128, block=128, stages=2):
    """O = sum over key blocks of exp2(Q K_k^T - rowmax) W: the second GEMM reads a tile
    copied once before the loop, so the ring stages K alone and cannot give the second GEMM
    barriers of its own."""
    shape = [1, seq_len, 2, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), W: T.Tensor([block, dim], "float16"),
             Output: T.Tensor(shape, "float16")):
        with T.Kernel(seq_len // block, 2, 1, threads=256) as (bx, by, bz):
            Q_shared = T.alloc_shared([block, dim], "float16")
            K_shared = T.alloc_shared([block, dim], "float16")
            W_shared = T.alloc_shared([block, dim], "float16")
            acc_s = T.alloc_fragment([block, block], "float32")
            acc_s_cast = T.alloc_fragment([block, block], "float16")
            acc_o = T.alloc_fragment([block, dim], "float32")
            peak = T.alloc_fragment([block], "float32")
            T.copy(Q[bz, bx * block:(bx + 1) * block, by, :], Q_shared)
            T.copy(W, W_shared)
            T.fill(acc_o, 0)
            for k in T.Pipelined(seq_len // block, num_stages=stages):
                T.copy(K[bz, k * block:(k + 1) * block, by, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.reduce_max(acc_s, peak, dim=1)  # a row family: P stays in registers for wgmma
                for i, j in T.Parallel(block, block):
                    acc_s[i, j] = T.exp2((acc_s[i, j] - peak[i]) * 0.01)
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, W_shared, acc_o)
            T.copy(acc_o, Output[bz, bx * block:(bx + 1) * block, by, :])

    return main


def test_by_default_a_ring_of_one_barrier_pair_gets_the_overlap_from_three_stages():
    """Its stage is free only after the overlapped P V, in the middle of the next
    iteration: with 2 stages the producer would wait (0.64x SDPA on the H200), so the
    default keeps the loop as written there; with 3 the overlap is kept."""
    assert same_source(attention_with_fixed_values(stages=2)) == (False, True)
    assert same_source(attention_with_fixed_values(stages=3)) == (True, False)
    forced = consumers(lower(attention_with_fixed_values(stages=2), **ON).device_source, 256)
    assert "tl_wgmma_wait(1);" in forced  # the forced overlap does apply: the default declined it


def test_by_default_a_loop_the_overlap_cannot_move_keeps_one_barrier_pair():
    """The trial gave K and V barriers of their own but could not rotate the loop: the
    kernel is lowered again as with the overlap switched off (no split, no producer
    warpgroup), not left with barriers that cost the 9-warp block its registers."""
    assert same_source(attention_reading_o_in_the_loop()) == (False, True)
    assert "tl_setmaxnreg_dec" not in kernel_body(lower(attention_reading_o_in_the_loop()).device_source)


def test_by_default_a_gemm_is_lowered_once(monkeypatch):
    """One GEMM per iteration: the trial changes nothing, so nothing runs twice."""
    from tilelang.cuda.transform import overlap_policy
    from tilelang.testing.kernels import tile_gemm

    trials = []
    real = overlap_policy.OverlapTrial
    monkeypatch.setattr(overlap_policy, "OverlapTrial", lambda: trials.append(real()) or trials[-1])
    func = tile_gemm(1024, 1024, 1024, 128, 256, 64, threads=256, stages=3)
    assert same_source(func) == (True, True)
    assert len(trials) == 1 and trials[0].rings == [(3, False)] and not trials[0].changed()


def test_the_trial_keeps_the_overlap_only_where_it_pays():
    from tilelang.cuda.transform.overlap_policy import OverlapTrial

    assert OverlapTrial([(2, True)], rotated=1).pays()
    assert OverlapTrial([(3, False)], rotated=1).pays()
    assert not OverlapTrial([(2, False)], rotated=1).pays()
    assert not OverlapTrial([(2, True), (2, False)], rotated=1).pays()
    assert not OverlapTrial([], rotated=1).pays()  # the user's own warp specialization: no ring of ours
    assert not OverlapTrial([(2, True)], rotated=0).pays() and OverlapTrial([(2, True)]).changed()
