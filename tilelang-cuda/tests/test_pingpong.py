"""Pingpong scheduling of two consumer warpgroups (transform/pingpong.py), checked without a
GPU: which kernels take it, and — by running the generated consumer code's named-barrier
operations through a model of bar.sync/bar.arrive — that the warpgroups' GEMM issues
alternate, nothing deadlocks and every barrier ends balanced. The GPU runs are the
256-thread flash-attention cases of test_gpu_tile.py."""

from __future__ import annotations

import re
import subprocess

import pytest
from test_tma import kernel_body
from test_tma import lower as lower_sm90
from tilelang.cuda import toolchain
from tilelang.testing.kernels import (
    flash_attention,
    flash_attention_persistent,
    tile_gemm,
)

WG = 128
# the loop as written: the intra-warpgroup overlap is on by default where it pays
NO_OVERLAP = {"tl.intra_warpgroup_overlap": False}


def lower(func, **configs):
    """Turns at the first GEMM unless ``configs`` say otherwise (the default: off for one
    tile per block), on the loop as written (test_first_gemm_turns_around_the_overlapped_loop has the overlap)."""
    return lower_sm90(func, **{"tl.warpgroup_pingpong": "first", **configs})
BARRIER_OP = re.compile(r"tl_named_barrier_(sync|arrive)\((.*), (\d+)\);$")


def consumers(source: str, threads: int) -> list[str]:
    body = kernel_body(source)
    start = body.index(f"if (((int)threadIdx.x) < {threads}) {{")
    end = body.index(f"if (((int)threadIdx.x) == {threads}) {{")
    return [line.strip() for line in body[start:end].splitlines()[1:]]


def _eval(expr: str, tid: int) -> int:
    return int(eval(expr.replace("(int)threadIdx.x", str(tid)).replace("&&", " and ")))


def trace(lines: list[str], tid: int, trips: int = 3) -> list[tuple]:
    """The barrier operations and GEMM issues thread ``tid`` performs, in order: every loop
    runs ``trips`` times; conditions on anything but threadIdx.x count as true."""
    ops: list[tuple] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        block_end = _matching_brace(lines, i) if line.endswith("{") else None
        if line == "} else {":  # the if before it counted as true: its else does not run
            try:
                i = _matching_brace(lines, i, opened=1) + 1
            except AssertionError:
                break  # the role split's else: the consumers' code ends here, the producer's follows
            continue
        if line.startswith("for ("):
            inner = trace(lines[i + 1:block_end], tid, trips)
            ops += inner * trips
            i = block_end + 1
            continue
        if line.startswith("if ("):
            cond = line[len("if "):-len(" {")]
            if "threadIdx" in cond and not _eval(cond, tid):
                i = block_end + 1
                continue
        elif (m := BARRIER_OP.search(line)):
            ops.append((m.group(1), _eval(m.group(2), tid), int(m.group(3))))
        elif line.startswith("tl_wgmma_fence()"):
            ops.append(("gemm", sum(x.startswith("tl_wgmma_fence()") for x in lines[:i])))  # which GEMM
        i += 1
    return ops


def _matching_brace(lines: list[str], at: int, opened: int = 0) -> int:
    depth = opened
    for j in range(at + opened, len(lines)):
        depth += lines[j].count("{") - lines[j].count("}")
        if depth == 0:
            return j
    raise AssertionError("unbalanced braces")


def run(traces: list[list[tuple]]) -> list[int]:
    """Runs the warpgroups' traces against named barriers (each warpgroup moves as one: 128
    arrivals), always advancing the lowest-numbered warpgroup that can move. Returns the
    (warpgroup, which GEMM of its loop) of each GEMM issue in order; fails on a deadlock or
    an unbalanced barrier."""
    pc, waiting, count, issues = [0] * len(traces), [None] * len(traces), {}, []
    while True:
        movable = [g for g in range(len(traces)) if waiting[g] is None and pc[g] < len(traces[g])]
        if not movable:
            break
        g = movable[0]
        op = traces[g][pc[g]]
        pc[g] += 1
        if op[0] == "gemm":
            issues.append((g, op[1]))
            continue
        kind, bar, expected = op
        count[bar] = count.get(bar, 0) + WG
        if kind == "sync":
            waiting[g] = bar
        if count[bar] == expected:
            count[bar] = 0
            waiting = [None if w == bar else w for w in waiting]
    assert all(pc[g] == len(traces[g]) for g in range(len(traces))), f"deadlock: {waiting} at {pc}"
    assert not any(count.values()), f"barriers left with arrivals: {count}"
    return issues


@pytest.mark.parametrize("mode,turns", [("every", 2), ("first", 1), (True, 1)])
def test_flash_attention_warpgroups_take_turns_issuing_gemms(mode, turns):
    configs = {"tl.warpgroup_pingpong": mode, **NO_OVERLAP}
    source = lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **configs).device_source
    lines = consumers(source, 256)
    loop = lines[lines.index(next(x for x in lines if x.startswith("for (int k_1"))):]
    assert sum("tl_named_barrier_sync(((((int)threadIdx.x) >> 7) + 2), 256);" == x for x in loop) == turns
    assert sum("tl_named_barrier_arrive((3 - (((int)threadIdx.x) >> 7)), 256);" == x for x in loop) == turns
    # the turn comes right before an issue's wgmma.fence
    assert loop[loop.index("tl_named_barrier_sync(((((int)threadIdx.x) >> 7) + 2), 256);") + 1] == "tl_wgmma_fence();"
    issues = run([trace(lines, 0), trace(lines, WG)])
    assert len(issues) == 12  # 3 trips x 2 GEMMs x 2 warpgroups
    if turns == 2:
        assert [g for g, _ in issues] == [0, 1] * 6  # every issue alternates
    else:  # the first GEMMs alternate; the second ones as the warpgroups run on
        assert [g for g, gemm in issues if gemm == 0] == [0, 1] * 3


def test_first_gemm_turns_around_the_overlapped_loop():
    """With OverlapSecondGemm the second GEMM (of the previous iteration) is issued under a
    condition; the first GEMMs still take turns, and nothing deadlocks."""
    lines = consumers(lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2),
                            **{"tl.intra_warpgroup_overlap": True}).device_source, 256)
    issues = run([trace(lines, 0), trace(lines, WG)])
    assert [g for g, gemm in issues if gemm == 0] == [0, 1] * 3
    assert len(issues) == 2 * (3 * 2 + 1)  # per warpgroup: 3 trips x 2 issues, and the drain's


def test_pair_turns_cover_both_gemm_issues_of_the_overlapped_loop():
    """"pair" (FlashAttention-3's order): a warpgroup's turn runs from S_k's issue to the
    issue of the overlapped P_{k-1} V_{k-1}, so the issues go in pairs; the hand-over sits in
    both branches of the second GEMM's condition, joined with its wait."""
    source = lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 3),
                   **{"tl.intra_warpgroup_overlap": True, "tl.warpgroup_pingpong": "pair"}).device_source
    lines = consumers(source, 256)
    loop = lines[lines.index(next(x for x in lines if x.startswith("for (int k_1"))):]
    arrive = "tl_named_barrier_arrive((3 - (((int)threadIdx.x) >> 7)), 256);"
    assert loop[loop.index(arrive) + 1] == "tl_wgmma_wait(1);"
    assert loop[loop.index(arrive, loop.index(arrive) + 1) - 1] == "} else {"
    issues = run([trace(lines, 0), trace(lines, WG)])
    assert [g for g, _ in issues[:12]] == [0, 0, 1, 1] * 3  # S_k and P_{k-1} V_{k-1} in one turn
    assert len(issues) == 2 * (3 * 2 + 1)


@pytest.mark.parametrize("stages", [2, 3])
def test_by_default_only_a_persistent_kernels_overlapped_loop_takes_pair_turns(stages):
    """Unset, the config means "pair" where the overlapped loop runs inside the consumers'
    outer loop (T.Persistent's tiles; +3-5% on the H200) and "off" for one tile per block."""
    persistent = flash_attention_persistent(1, 2, 1024, 128, 128, 128, 256, stages, sm_num=4)
    default = lower_sm90(persistent).device_source
    assert default == lower_sm90(persistent, **{"tl.warpgroup_pingpong": "pair"}).device_source
    assert default != lower_sm90(persistent, **{"tl.warpgroup_pingpong": "off"}).device_source
    lines = consumers(default, 256)
    issues = run([trace(lines, 0), trace(lines, WG)])  # 3 tiles of 3 trips, and each tile's drain
    assert len(issues) == 2 * 3 * (3 * 2 + 1)
    assert [g for g, _ in issues[:12]] == [0, 0, 1, 1] * 3
    plain = flash_attention(1, 2, 1024, 128, 128, 128, 256, stages)
    assert "tl_named_barrier_arrive" not in kernel_body(lower_sm90(plain).device_source)
    # switched off, or with the overlap off (nothing overlapped to take turns at), no turns
    for configs in ({"tl.warpgroup_pingpong": "off"}, NO_OVERLAP):
        assert "tl_named_barrier_arrive" not in kernel_body(lower_sm90(persistent, **configs).device_source)


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("mode", ["off", "first", "pair"])
def test_ptxas_keeps_the_overlapped_wgmmas_asynchronous(tmp_path, mode):
    """ptxas serializes every wgmma of a kernel when it sees a non-wgmma instruction touch
    an in-flight accumulator (C7514) or has to insert a wait (C7517), and says so only in a
    remark: a hand-over between the overlapped GEMM's if and its wait's if made the compiler
    copy the accumulators at the join, and the kernel ran at 0.62x SDPA."""
    source = lower(flash_attention(8, 16, 4096, 128, 128, 128, 256, 3),
                   **{"tl.intra_warpgroup_overlap": True, "tl.warpgroup_pingpong": mode}).device_source
    (tmp_path / "fa.cu").write_text(source)
    out = subprocess.run([toolchain.nvcc_path(), "-cubin", "-arch=sm_90a", *toolchain.OPTIONS, "-Xptxas", "-v",
                          str(tmp_path / "fa.cu"), "-o", str(tmp_path / "fa.cubin")],
                         check=True, capture_output=True, text=True)
    assert "C7514" not in out.stderr and "C7517" not in out.stderr and "serialized" not in out.stderr, out.stderr


def test_an_unknown_pingpong_mode_is_refused():
    with pytest.raises(Exception, match=r"'tl.warpgroup_pingpong' is 'both'; expected one of 'first', 'every', 'pair', 'off'"):
        lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **{"tl.warpgroup_pingpong": "both"})


def test_the_model_catches_a_missing_first_turn():
    source = lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **{"tl.warpgroup_pingpong": "every"}, **NO_OVERLAP).device_source
    lines = [x for x in consumers(source, 256) if x != "tl_named_barrier_arrive(2, 256);"]
    with pytest.raises(AssertionError, match="deadlock"):
        run([trace(lines, 0), trace(lines, WG)])


def test_without_pingpong_the_warpgroups_issue_together():
    source = lower_sm90(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2), **NO_OVERLAP).device_source  # off by default
    lines = consumers(source, 256)
    assert "tl_named_barrier_arrive" not in kernel_body(source)
    assert [g for g, _ in run([trace(lines, 0), trace(lines, WG)])] == [0] * 6 + [1] * 6


@pytest.mark.parametrize("kernel,threads", [
    (lambda: flash_attention(1, 2, 1024, 64, 64, 64, 128, 2), 128),  # one consumer warpgroup
    (lambda: tile_gemm(1024, 1024, 1024, 128, 256, 64, threads=256, stages=3), 256),  # one GEMM per iteration
])
def test_kernels_with_nothing_to_overlap_are_left_alone(kernel, threads):
    assert "tl_named_barrier_arrive" not in kernel_body(lower(kernel()).device_source)


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_nvcc_compiles_the_pingpong_kernel():
    source = lower(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2)).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", "pingpong")[:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.parametrize("configs", [{"tl.warpgroup_pingpong": "first", **NO_OVERLAP},
                                     {"tl.warpgroup_pingpong": "every", **NO_OVERLAP}, NO_OVERLAP, {},
                                     {"tl.intra_warpgroup_overlap": True},
                                     {"tl.intra_warpgroup_overlap": True, "tl.warpgroup_pingpong": "first"},
                                     {"tl.intra_warpgroup_overlap": True, "tl.warpgroup_pingpong": "pair"}],
                         ids=["first", "every", "off", "default", "overlap", "overlap-first", "overlap-pair"])
@pytest.mark.parametrize("dim", [64, 128])
def test_pingpong_flash_attention_matches_sdpa(configs, dim):
    """Each schedule against SDPA (head dim 128 runs warp-specialized; 64 does not, and the
    schedules leave it as it is)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import tilelang

    batch, heads, seq_len = 2, 4, 512
    kernel = tilelang.compile(flash_attention(batch, heads, seq_len, dim, 128, 128, 256, 2), out_idx=[3],
                              target="cuda", pass_configs=configs or None)
    q, k, v = (torch.randn(batch, seq_len, heads, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(kernel(q, k, v), ref, rtol=2e-2, atol=2e-2)
