"""Tensor-core GEMMs and row reductions lowered by the CUDA pipeline, then run as lowered.

test_mma_layout_emulation.py drives PTX models with the layout functions the pass is
built from, so glue the pass adds around them (the accumulator pointer of each mma, the
offset of each wgmma's registers, the lanes and masks of the row shuffles) is never looked
at there. Here kernels go through ``tilelang.lower`` for sm_80 (ldmatrix + mma.sync) and
sm_90 (wgmma), and the device IR handed to codegen is interpreted in numpy
(lowered_emulator.py), its instructions emulated from the PTX ISA (lowered_instructions.py):
every pointer, offset, descriptor, shuffle mask, lane offset and width comes from the IR.
Results are compared with numpy: exactly where the inputs are small integers (every
product and sum is exact in fp32), to fp16 rounding for flash attention.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
import tvm_ffi
from lowered_emulator import EmulationError
from lowered_instructions import lowered_kernel
from tilelang.testing.kernels import (
    flash_attention,
    flash_attention_persistent,
    tile_gemm,
)
from tvm import tirx

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90"}


def lower(func, target, **configs):
    return tilelang.lower(func, target=target, out_idx=[-1], pass_configs=configs or None).device_mod


def run(device_mod, *arrays) -> dict[str, int]:
    """Runs the kernel on ``arrays`` (outputs included, written in place); returns how often
    each extern call ran (which instructions the lowered kernel actually used)."""
    kernel = lowered_kernel(device_mod)
    kernel(*arrays)
    return kernel.calls


def small_ints(rng, shape, dtype="float16") -> tuple[np.ndarray, np.ndarray]:
    """(the kernel's argument, its values in float64): integers in [-4, 4], so that every
    product and sum of the GEMMs here is exact in fp32. bfloat16 is passed as its bits."""
    values = rng.integers(-4, 5, shape).astype(np.float64)
    if dtype == "bfloat16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16), values
    return values.astype(dtype), values


GEMMS_SM80 = [  # M, N, K, block M, N, K, transpose A, B, stages, threads, dtype
    (128, 128, 64, 64, 64, 32, False, False, 2, 128, "float16"),  # 2 x 2 blocks, 2 x 4 pieces per warp
    (64, 64, 64, 64, 64, 32, True, False, 3, 128, "float16"),
    (64, 64, 32, 64, 64, 32, False, True, 1, 128, "float16"),  # no pipeline: synchronous copies
    (64, 128, 32, 64, 128, 32, True, True, 2, 256, "float16"),  # 8 warps
    (32, 64, 48, 32, 64, 16, False, False, 2, 64, "bfloat16"),  # 2 warps, 3 k tiles
]


@pytest.mark.parametrize("m,n,k,bm,bn,bk,trans_a,trans_b,stages,threads,dtype", GEMMS_SM80)
def test_mma_sync_gemm_as_lowered_equals_numpy(m, n, k, bm, bn, bk, trans_a, trans_b, stages, threads, dtype):
    rng = np.random.default_rng(m + n + k + threads)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k), dtype)
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n), dtype)
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, bm, bn, bk, trans_a, trans_b, dtype=dtype, stages=stages, threads=threads)
    calls = run(lower(func, SM80), a, b, c)
    assert calls[f"tl_mma_m16n8k16_{'f16' if dtype == 'float16' else 'bf16'}_f32"] > 0
    expected = (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values)
    np.testing.assert_array_equal(c, expected)


GEMMS_SM90 = [  # M, N, K, block M, N, K, transpose A, B, stages, threads, pass configs
    (128, 64, 64, 128, 64, 32, False, False, 2, 128, {}),  # two 64-row wgmmas per warpgroup
    (64, 128, 64, 64, 128, 64, False, True, 3, 128, {}),  # one group left in flight
    (128, 128, 64, 128, 128, 32, True, False, 3, 256, {}),  # two warpgroups over M
    (64, 256, 64, 64, 256, 32, False, False, 2, 256, {}),  # two warpgroups over N
    (128, 64, 64, 128, 64, 32, True, True, 2, 128, {"tl.disable_wgmma_swizzle": True}),  # core matrices
]


@pytest.mark.parametrize("m,n,k,bm,bn,bk,trans_a,trans_b,stages,threads,configs", GEMMS_SM90)
def test_wgmma_gemm_as_lowered_equals_numpy(m, n, k, bm, bn, bk, trans_a, trans_b, stages, threads, configs):
    rng = np.random.default_rng(m * n + k + threads)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k))
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n))
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, bm, bn, bk, trans_a, trans_b, stages=stages, threads=threads)
    calls = run(lower(func, SM90, **configs), a, b, c)
    assert any(name.startswith("tl_wgmma_m64n") for name in calls) and "tl_mma_m16n8k16_f16_f32" not in calls
    expected = (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values)
    np.testing.assert_array_equal(c, expected)


def gemm_a_in_registers(M, N, K, tiles):
    """A loaded once into a fragment (C's layout: its registers are mma's A operands),
    B streamed through a pipeline: C = A @ (B_0 + B_1 + ...)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((tiles * K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            Af = T.alloc_fragment((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            Cl = T.alloc_fragment((M, N), "float32")
            T.copy(A, Af)
            T.clear(Cl)
            for k in T.Pipelined(tiles, num_stages=3):
                T.copy(B[k * K, 0], Bs)
                T.gemm(Af, Bs, Cl)
            T.copy(Cl, C)

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_mma_with_a_from_registers_as_lowered_equals_numpy(target):
    m, n, k, tiles = 64, 64, 64, 3
    rng = np.random.default_rng(5)
    (a, a_values), (b, b_values) = small_ints(rng, (m, k)), small_ints(rng, (tiles * k, n))
    c = np.full((m, n), np.nan, np.float32)
    calls = run(lower(gemm_a_in_registers(m, n, k, tiles), target), a, b, c)
    assert calls["tl_mma_m16n8k16_f16_f32"] > 0  # sm_90 too: wgmma takes register A in row families only
    np.testing.assert_array_equal(c, a_values @ b_values.reshape(tiles, k, n).sum(0))


def gemm_row_stats(M, N, K, threads=128, start=0.5):
    """S = A @ B on tensor cores, then its row max and (onto ``start``) row sum: a row
    family, reduced by quad shuffles. Row vectors leave through an (M, 16) fragment:
    columns 0-7 the max, 8-15 the sum."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), O: T.Tensor((M, 16), "float32")):
        with T.Kernel(1, threads=threads) as _:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            S = T.alloc_fragment((M, N), "float32")
            R = T.alloc_fragment((M, 16), "float32")
            row_max = T.alloc_fragment((M,), "float32")
            row_sum = T.alloc_fragment((M,), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(S)
            T.gemm(As, Bs, S)
            T.fill(row_sum, start)
            T.reduce_max(S, row_max, dim=1)
            T.reduce_sum(S, row_sum, dim=1, clear=False)
            for i, j in T.Parallel(M, 16):
                R[i, j] = T.if_then_else(j < 8, row_max[i], row_sum[i])
            T.copy(R, O)

    return main


def row_stats(device_mod, m, n, k) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(emulated output, numpy's, calls) of gemm_row_stats."""
    rng = np.random.default_rng(m + n + k)
    a, a_values = small_ints(rng, (m, k))
    b, b_values = small_ints(rng, (k, n))
    out = np.full((m, 16), np.nan, np.float32)
    calls = run(device_mod, a, b, out)
    s = a_values @ b_values
    return out, np.concatenate([np.repeat(s.max(1)[:, None], 8, 1), np.repeat(s.sum(1)[:, None] + 0.5, 8, 1)], 1), calls


@pytest.mark.parametrize("target,m,n,k,threads", [(SM80, 64, 32, 16, 128), (SM80, 128, 64, 32, 128),
                                                  (SM80, 64, 48, 32, 64), (SM90, 64, 32, 16, 128),
                                                  (SM90, 128, 64, 32, 256)])
def test_row_reductions_as_lowered_equal_numpy(target, m, n, k, threads):
    out, expected, calls = row_stats(lower(gemm_row_stats(m, n, k, threads), target), m, n, k)
    assert calls["__shfl_xor_sync"] > 0
    assert any(name.startswith(("tl_mma_m16n8k16", "tl_wgmma_m64n")) for name in calls)
    np.testing.assert_array_equal(out, expected)


def refilled_gemm(fill: float | None, clear_accum: bool = False):
    """C over 4 pipelined 32-deep k tiles, refilled before each tile's GEMM (``fill``:
    T.fill(C, fill) right before it; ``clear_accum``: the GEMM's own flag): C ends as the
    last tile's product plus ``fill`` (or that alone)."""

    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.clear(Cl)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 32], As)
                T.copy(B[k * 32, 0], Bs)
                if fill is not None:
                    T.fill(Cl, fill)
                T.gemm(As, Bs, Cl, clear_accum=clear_accum)
            T.copy(Cl, C)

    return main


@pytest.mark.parametrize("fill,clear_accum,zero_form", [(0.0, False, True), (None, True, True), (1.0, False, False)])
def test_a_clear_before_a_wgmma_is_its_first_k_step(fill, clear_accum, zero_form):
    """T.clear(C) right before T.gemm(.., C), or clear_accum: the first k step's wgmma writes
    C (the "z" form, scale-d off) and no store zeroes C in the loop; a fill with another
    value stays a fill. Exact against numpy (small integers)."""
    rng = np.random.default_rng(3)
    a, a_values = small_ints(rng, (64, 128))
    b, b_values = small_ints(rng, (128, 64))
    out = np.full((64, 64), np.nan, np.float32)
    calls = run(lower(refilled_gemm(fill, clear_accum), SM90), a, b, out)
    assert ("tl_wgmma_m64n64k16_f16_01z" in calls) == zero_form
    expected = a_values[:, 96:] @ b_values[96:, :] + (fill or 0.0)
    np.testing.assert_array_equal(out, expected)


FLASH_KERNELS = {
    "tile": (1, lambda b, h, s, d: flash_attention(b, h, s, d)),
    # 8 tiles over 3 blocks: three waves, the last one partial
    "persistent": (2, lambda b, h, s, d: flash_attention_persistent(b, h, s, d, 64, 64, 128, 2, sm_num=3)),
}


@pytest.mark.parametrize("seq", [128, 96], ids=["whole", "partial"])
@pytest.mark.parametrize("kernel", sorted(FLASH_KERNELS))
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_flash_attention_as_lowered_matches_numpy(target, kernel, seq):
    """The testing kit's flash attention (online softmax over two key blocks, P from the
    accumulator's registers), one block per tile or persistent: fp16 in and out, compared
    within 2e-3 (outputs are O(0.1), fp16 keeps 11 bits). With 96 tokens the second key
    block holds 32 keys: its other scores must be masked (-inf), not the zeros TMA and the
    guarded loads give (they would add exp(-max) to each row's sum: errors of 0.14)."""
    batch, build = FLASH_KERNELS[kernel]
    heads, dim = batch, 64
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((batch, seq, heads, dim)).astype(np.float16) for _ in range(3))
    out = np.full((batch, seq, heads, dim), np.nan, np.float16)
    calls = run(lower(build(batch, heads, seq, dim), target), q, k, v, out)
    assert calls["__shfl_xor_sync"] > 0
    qf, kf, vf = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    scores = qf @ kf.transpose(0, 1, 3, 2) / np.sqrt(dim)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    expected = ((p / p.sum(-1, keepdims=True)) @ vf).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=2e-3, rtol=0)


# -- the emulator reads what the IR says --------------------------------------------------
def mutated(device_mod, name: str, change) -> object:
    """``device_mod`` with every ``call_extern(name, ...)`` replaced by ``change(call)``."""

    def on_call(call):
        if str(call.op.name) == "tirx.call_extern" and str(call.args[0].value) == name:
            return change(call)
        return call

    (gv, func), = device_mod.functions.items()
    mod = device_mod.clone()
    mod.update_func(gv, func.with_body(tvm_ffi.structural_map(func.body, (tvm.ir.Call, on_call), order="post")))
    return mod


def with_args(call, **replace):
    args = list(call.args)
    for index, value in replace.items():
        args[int(index[1:])] = value
    return tirx.call_extern(call.dtype, *args)


def test_the_emulator_reads_the_accumulator_pointers_of_the_ir():
    """Each mma.sync's C pointer moved to the next 16x8 piece (what a wrong offset in the
    pass would emit): the product lands in the wrong columns."""
    m = n = 64
    mod = lower(tile_gemm(m, n, 32, 64, 64, 32, stages=1), SM80)
    rng = np.random.default_rng(1)
    (a, a_values), (b, b_values) = small_ints(rng, (m, 32)), small_ints(rng, (32, n))

    def next_piece(call):
        load = call.args[1].args[0]
        index = tirx.floormod(load.indices[0] + 4, int(load.source.shape[0]))
        return with_args(call, a1=tirx.address_of(tirx.BufferLoad(load.source, [index])))

    for device_mod, equal in ((mod, True), (mutated(mod, "tl_mma_m16n8k16_f16_f32", next_piece), False)):
        c = np.full((m, n), np.nan, np.float32)
        run(device_mod, a, b, c)
        assert np.array_equal(c, a_values @ b_values) == equal

    def past_the_end(call):
        load = call.args[1].args[0]
        return with_args(call, a1=tirx.address_of(tirx.BufferLoad(load.source, [load.indices[0] + 32])))

    with pytest.raises(EmulationError, match=r"accesses bytes \d+\.\.\d+ of Cl \(128 bytes\)"):
        run(mutated(mod, "tl_mma_m16n8k16_f16_f32", past_the_end), a, b, np.zeros((m, n), np.float32))


def test_the_emulator_reads_the_shuffle_operands_of_the_ir():
    """The row reductions' shuffles with other lane offsets or a narrower width give other
    rows' values; a member mask without all the lanes that shuffle is an error."""
    mod = lower(gemm_row_stats(64, 32, 16), SM80)
    out, expected, _ = row_stats(mod, 64, 32, 16)
    np.testing.assert_array_equal(out, expected)
    for device_mod in (mutated(mod, "__shfl_xor_sync", lambda call: with_args(call, a3=call.args[3] * 2)),
                       mutated(mod, "__shfl_xor_sync", lambda call: with_args(call, a4=tirx.const(2, "int32")))):
        out, expected, _ = row_stats(device_mod, 64, 32, 16)
        assert not np.array_equal(out, expected)
    half = mutated(mod, "__shfl_xor_sync", lambda call: with_args(call, a1=tirx.const(0xFFFF, "uint32")))
    with pytest.raises(EmulationError, match="runs the shuffle outside its member mask"):
        row_stats(half, 64, 32, 16)


@pytest.mark.parametrize("op", ["clear", "copy"])
def test_a_local_buffer_is_filled_and_copied_whole_by_every_thread(op):
    """T.alloc_local is each thread's own: T.clear / T.fill / T.copy of one run over all of
    it in every thread (they were dealt out over the block's threads like a shared tile's,
    so each thread cleared one element of its own 8 and summed onto garbage)."""

    @T.prim_func
    def per_thread(A: T.Tensor((128, 8), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            acc = T.alloc_local((8,), "float32")
            init = T.alloc_local((8,), "float32")
            if op == "clear":
                T.clear(acc)
            else:
                for i in T.serial(8):
                    init[i] = 0.5
                T.copy(init, acc)
            for i in T.serial(8):
                acc[i] += A[tx, i]
            total = T.alloc_var("float32")
            total = 0.0
            for i in T.serial(8):
                total += acc[i]
            B[tx] = total

    a = np.random.default_rng(0).integers(-4, 5, (128, 8)).astype(np.float32)
    b = np.zeros(128, np.float32)
    run(lower(per_thread, SM80), a, b)
    np.testing.assert_array_equal(b, a.sum(axis=1) + (4.0 if op == "copy" else 0.0))


def warp_split_kernel():
    """upstream's mHC pre kernel, in small: warp 0 normalizes a row in shared memory while
    warps 1-2 stream a tile through shared memory and a fragment of their own."""

    @T.prim_func
    def split(A: T.Tensor((4, 4), "float32"), X: T.Tensor((4, 256), "float32"), W: T.Tensor((4,), "float32"),
              R: T.Tensor((4, 4), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=96):
            if T.get_thread_binding() < 32:
                m = T.alloc_shared((4, 4), "float32")
                total = T.alloc_shared((4,), "float32")
                T.copy(A, m)
                for j, k in T.Parallel(4, 4):
                    m[j, k] = m[j, k] * m[j, k]
                T.reduce_sum(m, total, dim=1)
                for j, k in T.Parallel(4, 4):
                    R[j, k] = m[j, k] / total[j]
            else:
                w = T.alloc_shared((4,), "float32")
                for j in T.Parallel(4):
                    w[j] = W[j] * 2.0
                acc = T.alloc_fragment((128,), "float32")
                for h in T.Pipelined(2, num_stages=2):
                    xs = T.alloc_shared((4, 128), "float32")
                    T.copy(X[0, h * 128], xs)
                    T.clear(acc)
                    for r in T.serial(4):
                        for c in T.Parallel(128):
                            acc[c] += w[r] * xs[r, c]
                    T.copy(acc, Y[h * 128])

    return split


def test_a_warp_split_kernel_gets_named_barriers_and_each_branch_its_threads():
    """Each branch's T.Parallel nests and fragments are dealt to the threads that take it
    (32 and 64 here, not the block's 96), and the barriers each branch needs among its own
    threads are named barriers over them (a __syncthreads() there would wait forever)."""
    artifact = tilelang.lower(warp_split_kernel(), target=SM80)
    source = artifact.device_source
    assert "tl_named_barrier_sync(8, 32)" in source and "tl_named_barrier_sync(9, 64)" in source
    rng = np.random.default_rng(0)
    a = rng.integers(1, 4, (4, 4)).astype(np.float32)
    x = rng.integers(-3, 4, (4, 256)).astype(np.float32)
    w = rng.integers(-2, 3, (4,)).astype(np.float32)
    r, y = np.zeros((4, 4), np.float32), np.zeros(256, np.float32)
    run(artifact.device_mod, a, x, w, r, y)
    np.testing.assert_allclose(r, a * a / (a * a).sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(y, (2 * w) @ x)


def three_way_split_kernel():
    """FlashMLA's role chain ``if tx < 128: ... elif tx < 256: ... else: ...`` in small: the
    elif branch is reached by threads 32..127 only and keeps 32..63."""

    @T.prim_func
    def chain(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32"), P: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx < 32:
                Y[tx] = X[tx]
            elif tx < 64:
                s = T.alloc_shared((32,), "float32")
                s[tx - 32] = X[tx - 32] * 2.0
                Y[tx - 32] = Y[tx - 32] + s[63 - tx]
            else:
                P[tx - 64] = T.cast(tx, "float32")

    return chain


def test_a_branch_of_an_else_chain_names_barriers_over_its_own_threads():
    """Its barrier counted 64 threads (``tx < 64`` read alone) where 32 arrive: on the
    H200, FlashMLA's second consumer waited forever."""
    source = tilelang.lower(three_way_split_kernel(), target=SM80).device_source
    assert re.findall(r"tl_named_barrier_sync\(\d+, (\d+)\)", source) == ["32"]


@pytest.mark.gpu
def test_a_warp_split_kernel_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(warp_split_kernel())
    rng = np.random.default_rng(1)
    a = torch.from_numpy(rng.integers(1, 4, (4, 4)).astype(np.float32)).cuda()
    x = torch.from_numpy(rng.integers(-3, 4, (4, 256)).astype(np.float32)).cuda()
    w = torch.from_numpy(rng.integers(-2, 3, (4,)).astype(np.float32)).cuda()
    for _ in range(20):  # the branches run at once on different warps: races would show
        r, y = torch.zeros((4, 4), device="cuda"), torch.zeros(256, device="cuda")
        kernel(a, x, w, r, y)
        torch.testing.assert_close(r, a * a / (a * a).sum(dim=1, keepdim=True))
        torch.testing.assert_close(y, (2 * w) @ x, rtol=0, atol=0)


def test_an_else_over_two_ranges_of_threads_is_refused_where_it_deals_a_tile():
    @T.prim_func
    def middle(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=96):
            tx = T.get_thread_binding()
            if tx >= 32 and tx < 64:
                B[tx - 32] = A[tx - 32]
            else:
                for i in T.Parallel(64):
                    B[i] = A[i] * 2.0

    with pytest.raises(tilelang.errors.CompileError, match=r"the else branch of `if .*` runs on threads 0..31 and "
                                                           r"64..95, two ranges, which a T.Parallel in it cannot be dealt"):
        tilelang.lower(middle, target=SM80)


def consumer_fragment_kernel():
    """upstream's minference kernel in small: the accumulator is allocated for the whole
    block, but only the consumers (threads 0..63 of 96) touch it, and their GEMM reads a
    stage of a 3-d shared buffer; the other warp writes an output of its own."""

    @T.prim_func
    def roles(Q: T.Tensor((16, 16), "float32"), K: T.Tensor((2, 16, 16), "float32"), O: T.Tensor((16, 16), "float32"),
              P: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=96):
            q_s = T.alloc_shared((16, 16), "float32")
            k_s = T.alloc_shared((2, 16, 16), "float32")
            acc = T.alloc_fragment((16, 16), "float32")
            T.copy(Q, q_s)
            T.copy(K, k_s)
            tx = T.get_thread_binding()
            if tx >= 64:
                P[tx - 64] = T.cast(tx, "float32")
            else:
                T.clear(acc)
                for stage in T.serial(2):
                    T.gemm(q_s, k_s[stage, :, :], acc, transpose_B=True)
                for i, j in T.Parallel(16, 16):
                    acc[i, j] = acc[i, j] * 0.5
                T.copy(acc, O)

    return roles


def test_a_fragment_only_one_branch_touches_is_dealt_to_its_threads():
    """Dealt over the whole block, the consumers' nests would leave the points of threads
    64..95 unset (refused before: 'a T.Parallel over a register fragment inside a
    condition'); the fragment is sized and dealt over the 64 threads that use it."""
    artifact = tilelang.lower(consumer_fragment_kernel(), target=SM80)
    assert "float acc_ptr[4]" in artifact.device_source  # 256 points over 64 threads
    rng = np.random.default_rng(0)
    q = rng.integers(-3, 4, (16, 16)).astype(np.float32)
    k = rng.integers(-3, 4, (2, 16, 16)).astype(np.float32)
    o, p = np.zeros((16, 16), np.float32), np.zeros(32, np.float32)
    run(artifact.device_mod, q, k, o, p)
    np.testing.assert_array_equal(o, (q @ k[0].T + q @ k[1].T) * 0.5)
    np.testing.assert_array_equal(p, np.arange(64, 96, dtype=np.float32))


@pytest.mark.gpu
def test_a_consumer_fragment_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(consumer_fragment_kernel())
    q = torch.randint(-3, 4, (16, 16), device="cuda").float()
    k = torch.randint(-3, 4, (2, 16, 16), device="cuda").float()
    for _ in range(20):
        o, p = torch.zeros(16, 16, device="cuda"), torch.zeros(32, device="cuda")
        kernel(q, k, o, p)
        torch.testing.assert_close(o, (q @ k[0].T + q @ k[1].T) * 0.5, rtol=0, atol=0)
        torch.testing.assert_close(p, torch.arange(64, 96, device="cuda", dtype=torch.float32))


def branch_gemm_kernel():
    """A tensor-core-shaped GEMM that only threads 0..127 of 256 run (upstream's consumer
    branch without T.ws)."""

    @T.prim_func
    def branch_gemm(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
                    C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            a_s = T.alloc_shared((64, 32), "float16")
            b_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            if T.get_thread_binding() < 128:
                T.clear(acc)
                T.gemm(a_s, b_s, acc)
                T.copy(acc, C)

    return branch_gemm


@pytest.mark.parametrize("target", [SM80, SM90])
def test_a_gemm_that_part_of_the_block_runs_computes_all_of_c(target):
    """Laid out on tensor cores over the block's 8 warps while 4 run it, half of C was never
    computed (zeros on the H200). The branch is a warp role: C spreads over its 4 warps, on
    mma.sync."""
    artifact = tilelang.lower(branch_gemm_kernel(), target=target)
    assert "tl_mma_m16n8k16_f16_f32(" in artifact.device_source
    rng = np.random.default_rng(0)
    a, a64 = small_ints(rng, (64, 32))
    b, b64 = small_ints(rng, (32, 64))
    c = np.zeros((64, 64), np.float32)
    run(artifact.device_mod, a, b, c)
    np.testing.assert_array_equal(c, a64 @ b64)


def two_role_gemm_kernel(second_lo: int = 128):
    """Upstream's FlashMLA-style roles without T.ws: two consumer branches, each computing
    its half of the output columns from shared tiles, and a branch of other threads."""

    @T.prim_func
    def two_roles(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 128), "float16"),
                  C: T.Tensor((64, 128), "float32"), P: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=384):
            a_s = T.alloc_shared((64, 32), "float16")
            b_l = T.alloc_shared((32, 64), "float16")
            b_r = T.alloc_shared((32, 64), "float16")
            acc_l = T.alloc_fragment((64, 64), "float32")
            acc_r = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a_s)
            T.copy(B[:, 0:64], b_l)
            T.copy(B[:, 64:128], b_r)
            tx = T.get_thread_binding()
            if tx < 128:
                T.clear(acc_l)
                T.gemm(a_s, b_l, acc_l)
                T.copy(acc_l, C[:, 0:64])
            elif tx >= second_lo and tx < second_lo + 128:
                T.clear(acc_r)
                T.gemm(a_s, b_r, acc_r)
                for i, j in T.Parallel(64, 64):
                    acc_r[i, j] = acc_r[i, j] * 2.0
                T.copy(acc_r, C[:, 64:128])
            elif tx >= 256:
                P[tx - 256] = T.cast(tx, "float32")

    return two_roles


@pytest.mark.parametrize("target", [SM80, SM90])
def test_gemms_in_two_warp_roles_written_as_ifs_run_on_tensor_cores(target):
    """Each consumer branch is a role of 4 warps; the else-chain's ranges ([128, 256), then
    [256, 384)) come from the conditions before it."""
    artifact = tilelang.lower(two_role_gemm_kernel(), target=target)
    assert artifact.device_source.count("tl_mma_m16n8k16_f16_f32(") >= 2
    # the tiles every thread copied are read by each role: a barrier of the whole block
    # first (a role's named barrier orders only its own threads; half of C was wrong on the
    # H200 once in two runs without it)
    source = artifact.device_source
    split = source.index("if (((int)threadIdx.x) < 128) {")
    assert source.rfind("__syncthreads();", 0, split) > source.index('extern "C" __global__')
    rng = np.random.default_rng(1)
    a, a64 = small_ints(rng, (64, 32))
    b, b64 = small_ints(rng, (32, 128))
    c, p = np.zeros((64, 128), np.float32), np.zeros(128, np.float32)
    run(artifact.device_mod, a, b, c, p)
    want = a64 @ b64
    want[:, 64:] *= 2
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(p, np.arange(256, 384, dtype=np.float32))


def test_gemms_in_branches_that_are_not_roles_of_one_size_stay_correct():
    """A second branch of [96, 224) does not start at a multiple of its 128 threads: no
    warp-role layout fits, so the GEMMs take the shared SIMT lowering, still correct."""
    artifact = tilelang.lower(two_role_gemm_kernel(second_lo=96), target=SM80)
    assert "tl_mma_m16n8k16_f16_f32(" not in artifact.device_source
    rng = np.random.default_rng(2)
    a, a64 = small_ints(rng, (64, 32))
    b, b64 = small_ints(rng, (32, 128))
    c, p = np.zeros((64, 128), np.float32), np.zeros(128, np.float32)
    run(artifact.device_mod, a, b, c, p)
    want = a64 @ b64
    want[:, 64:] *= 2
    np.testing.assert_array_equal(c, want)


@pytest.mark.gpu
def test_gemms_in_warp_roles_written_as_ifs_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(two_role_gemm_kernel())
    a = torch.randint(-3, 4, (64, 32), device="cuda").half()
    b = torch.randint(-3, 4, (32, 128), device="cuda").half()
    want = a.float() @ b.float()
    want[:, 64:] *= 2
    for _ in range(20):
        c, p = torch.zeros(64, 128, device="cuda"), torch.zeros(128, device="cuda")
        kernel(a, b, c, p)
        torch.testing.assert_close(c, want, rtol=0, atol=0)
        torch.testing.assert_close(p, torch.arange(256, 384, device="cuda", dtype=torch.float32))


def sliced_operands_kernel():
    """FlashMLA's operands: column slices of a shared Q, slices of one stage of a 3-d
    shared KV ring (K of S = Q K^T, N of O = S V), and a ring the kernel fills through
    T.access_ptr addresses (T.ptx_cp_async), so its layout must stay as declared."""

    @T.prim_func
    def sliced(Q: T.Tensor((64, 96), "float16"), KV: T.Tensor((2, 32, 96), "float16"),
               S: T.Tensor((64, 32), "float32"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((64, 96), "float16")
            kv_s = T.alloc_shared((2, 32, 96), "float16")
            p_s = T.alloc_shared((64, 32), "float16")
            acc_s = T.alloc_fragment((64, 32), "float32")
            acc_o = T.alloc_fragment((64, 64), "float32")
            tx = T.get_thread_binding()
            T.copy(Q, q_s)
            for stage in T.serial(2):
                for r in T.serial(3):
                    T.ptx_cp_async(T.access_ptr(kv_s[stage, tx // 4, r * 32 + tx % 4 * 8], "w", 8),
                                   T.access_ptr(KV[stage, tx // 4, r * 32 + tx % 4 * 8], "r", 8), 8)
            T.clear(acc_o)
            for stage in T.serial(2):
                T.clear(acc_s)
                T.gemm(q_s[:, 0:64], kv_s[stage, :, 0:64], acc_s, transpose_B=True)
                T.gemm(q_s[:, 64:96], kv_s[stage, :, 64:96], acc_s, transpose_B=True)
                T.copy(acc_s, S)
                T.copy(acc_s, p_s)
                T.gemm(p_s, kv_s[stage, :, 32:96], acc_o)
            T.copy(acc_o, O)

    return sliced


@pytest.mark.parametrize("target", [SM80, SM90])
def test_gemm_operands_that_are_slices_of_shared_tiles_run_on_tensor_cores(target):
    artifact = tilelang.lower(sliced_operands_kernel(), target=target)
    assert artifact.device_source.count("tl_mma_m16n8k16_f16_f32(") >= 3
    rng = np.random.default_rng(3)
    q, q64 = small_ints(rng, (64, 96))
    kv, kv64 = small_ints(rng, (2, 32, 96))
    s, o = np.zeros((64, 32), np.float32), np.zeros((64, 64), np.float32)
    run(artifact.device_mod, q, kv, s, o)
    scores = [q64 @ kv64[i].T for i in range(2)]
    np.testing.assert_array_equal(s, scores[1])
    want = sum(scores[i].astype(np.float16).astype(np.float64) @ kv64[i][:, 32:96] for i in range(2))
    np.testing.assert_allclose(o, want, rtol=1e-6)


@pytest.mark.gpu
def test_gemm_operands_that_are_slices_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(sliced_operands_kernel())
    q = torch.randint(-3, 4, (64, 96), device="cuda").half()
    kv = torch.randint(-3, 4, (2, 32, 96), device="cuda").half()
    scores = [q.float() @ kv[i].float().T for i in range(2)]
    want = sum(scores[i].half().float() @ kv[i][:, 32:96].float() for i in range(2))
    for _ in range(10):
        s, o = torch.zeros(64, 32, device="cuda"), torch.zeros(64, 64, device="cuda")
        kernel(q, kv, s, o)
        torch.testing.assert_close(s, scores[1], rtol=0, atol=0)
        torch.testing.assert_close(o, want, rtol=1e-6, atol=0)


def row_vectors_to_shared_kernel():
    """FlashMLA's consumers hand their row statistics to the other warpgroup through shared
    memory: ``T.copy(alpha_local, alpha_shared)`` and ``sum_shared[i] = sumexp[i]``."""

    @T.prim_func
    def rows_out(Q: T.Tensor((64, 32), "float16"), K: T.Tensor((32, 32), "float16"),
                 S: T.Tensor((64, 32), "float32"), M: T.Tensor((64,), "float32"), D: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((64, 32), "float16")
            k_s = T.alloc_shared((32, 32), "float16")
            m_shared = T.alloc_shared((64,), "float32")
            d_shared = T.alloc_shared((64,), "float32")
            acc_s = T.alloc_fragment((64, 32), "float32")
            m_i = T.alloc_fragment((64,), "float32")
            T.copy(Q, q_s)
            T.copy(K, k_s)
            T.clear(acc_s)
            T.gemm(q_s, k_s, acc_s, transpose_B=True)
            T.reduce_max(acc_s, m_i, dim=1)
            for i, j in T.Parallel(64, 32):
                acc_s[i, j] = acc_s[i, j] - m_i[i]
            T.copy(m_i, m_shared)
            for i in T.Parallel(64):
                d_shared[i] = m_i[i] * 2.0
            T.copy(acc_s, S)
            T.copy(m_shared, M)
            T.copy(d_shared, D)

    return rows_out


def test_row_vectors_copied_to_shared_memory_keep_the_row_family():
    """Such copies used to take the family off tensor cores, and its fragments (FlashMLA's
    S, 16 KiB) to shared memory, over the block's limit."""
    artifact = tilelang.lower(row_vectors_to_shared_kernel(), target=SM80)
    assert "tl_mma_m16n8k16_f16_f32(" in artifact.device_source
    assert "float acc_s_ptr[16]" in artifact.device_source  # 64 x 32 over 128 threads, in registers
    rng = np.random.default_rng(4)
    q, q64 = small_ints(rng, (64, 32))
    k, k64 = small_ints(rng, (32, 32))
    s, m, d = np.zeros((64, 32), np.float32), np.zeros(64, np.float32), np.zeros(64, np.float32)
    run(artifact.device_mod, q, k, s, m, d)
    scores = q64 @ k64.T
    np.testing.assert_array_equal(m, scores.max(axis=1))
    np.testing.assert_array_equal(d, 2 * scores.max(axis=1))
    np.testing.assert_array_equal(s, scores - scores.max(axis=1, keepdims=True))


def scalar_fragment_kernel():
    """upstream's mHC pre kernel's norm: a one-element fragment every thread updates in
    the block's scalar code (``rms[0] = T.rsqrt(rms[0] / n + eps)``)."""

    @T.prim_func
    def rms_scale(S: T.Tensor((4,), "float32"), X: T.Tensor((4, 96), "float32"), Y: T.Tensor((4, 96), "float32")):
        with T.Kernel(4, threads=96) as bx:
            rms = T.alloc_fragment(1, "float32")
            rms[0] = 0.0
            for i in T.serial(2):
                rms[0] += S[bx] * 0.5
            rms[0] = T.rsqrt(rms[0] / 96.0 + 1e-6)
            for j in T.Parallel(96):
                Y[bx, j] = X[bx, j] * rms[0]

    return rms_scale


def test_a_fragment_every_thread_updates_in_scalar_code_is_each_threads_own():
    """In shared memory the read-modify-write of one element by 96 threads raced: a warp
    could read rms[0] after another warp had stored its rsqrt (wrong values in some rows,
    different from run to run). Upstream keeps such a fragment as every thread's registers."""
    artifact = tilelang.lower(scalar_fragment_kernel(), target=SM80)
    assert "float rms_ptr[1]" in artifact.device_source  # a register array of each thread
    rng = np.random.default_rng(0)
    s = rng.uniform(1, 4, 4).astype(np.float32)
    x = rng.standard_normal((4, 96)).astype(np.float32)
    y = np.zeros((4, 96), np.float32)
    run(artifact.device_mod, s, x, y)
    np.testing.assert_allclose(y, x / np.sqrt(s / 96.0 + 1e-6)[:, None], rtol=1e-5)


@pytest.mark.gpu
def test_a_scalar_fragment_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(scalar_fragment_kernel())
    s = torch.rand(4, device="cuda") * 3 + 1
    x = torch.randn(4, 96, device="cuda")
    for _ in range(50):
        y = torch.zeros(4, 96, device="cuda")
        kernel(s, x, y)
        torch.testing.assert_close(y, x / torch.sqrt(s / 96.0 + 1e-6)[:, None])
