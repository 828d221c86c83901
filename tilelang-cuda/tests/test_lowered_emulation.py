"""Tensor-core GEMMs and row reductions lowered by the CUDA pipeline, then run as lowered.

test_mma_layout_emulation.py drives PTX models with the layout functions the pass is
built from, so glue the pass adds around them (the accumulator pointer of each mma, the
offset of each wgmma's registers, the lanes and masks of the row shuffles) is never looked
at there. Here kernels go through ``tilelang.lower`` for sm_80 (ldmatrix + mma.sync) and
sm_90 (wgmma), and the device IR handed to codegen is interpreted in numpy
(lowered_emulator.py), its instructions emulated from the PTX ISA (lowered_instructions.py):
every pointer, offset, descriptor, shuffle mask, lane offset and width comes from the IR.
Results are compared with numpy: exactly where the inputs are small integers (every
product and sum is exact in fp32). Attention-shaped kernels: test_lowered_attention.py;
8-bit operands, a second accumulator, run-time sizes and views of C: test_lowered_gemm_forms.py;
fragments only plain per-thread code touches: test_fragment_placement.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
import tvm_ffi
from lowered_emulator import EmulationError
from lowered_instructions import lowered_kernel
from tilelang.testing.kernels import (
    tile_gemm,
    tiled_matmul,
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


def gemm_part_out(M, N, K, rows, cols):
    """C = A @ B on tensor cores, of which only C[rows, cols] goes to memory."""
    (r0, r1), (c0, c1) = rows, cols

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), O: T.Tensor((r1 - r0, c1 - c0), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            C = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, C, clear_accum=True)
            T.copy(C[r0:r1, c0:c1], O)

    return main


@pytest.mark.parametrize("rows,cols", [((0, 4), (0, 64)), ((16, 48), (8, 40))], ids=["first-rows", "inner-box"])
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_a_copy_of_part_of_c_stays_on_tensor_cores(target, rows, cols):
    """T.copy(C[r0:r1, c0:c1], out): each thread writes the elements of the box it holds
    (a nest over C guarded to the box); before, the GEMM left tensor cores for it."""
    m = n = k = 64
    rng = np.random.default_rng(11)
    (a, a_values), (b, b_values) = small_ints(rng, (m, k)), small_ints(rng, (k, n))
    out = np.full((rows[1] - rows[0], cols[1] - cols[0]), np.nan, np.float32)
    calls = run(lower(gemm_part_out(m, n, k, rows, cols), target), a, b, out)
    assert calls["tl_mma_m16n8k16_f16_f32"] > 0  # one GEMM outside a pipeline: mma.sync on sm_90 too
    np.testing.assert_array_equal(out, (a_values @ b_values)[rows[0]:rows[1], cols[0]:cols[1]])


def gemm_cast_through_a_fragment(stages=2):
    """A pipelined GEMM whose C is cast into an fp16 fragment, which then goes to memory: a
    row family without row vectors."""

    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 32), "float16")
            b_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            acc16 = T.alloc_fragment((64, 64), "float16")
            T.clear(acc)
            for ko in T.Pipelined(4, num_stages=stages):
                T.copy(A[:, ko * 32:(ko + 1) * 32], a_s)
                T.copy(B[ko * 32:(ko + 1) * 32, :], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, acc16)
            T.copy(acc16, C)

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_c_cast_through_a_fragment_on_wgmma(target):
    """On wgmma the fp16 fragment takes C's layout too (it kept the mma.sync one, and the
    cast's stores stayed unmapped: TVM refused the kernel, "Buffer acc16 is used before its
    definition")."""
    rng = np.random.default_rng(9)
    (a, a64), (b, b64) = small_ints(rng, (64, 128)), small_ints(rng, (128, 64))
    c = np.full((64, 64), np.nan, np.float16)
    calls = run(lower(gemm_cast_through_a_fragment(), target), a, b, c)
    assert any(name.startswith("tl_wgmma" if target is SM90 else "tl_mma_m16n8k16") for name in calls)
    np.testing.assert_array_equal(c.astype(np.float64), a64 @ b64)


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


def gemm_row_max_over_columns(M, N, K, cols):
    """The row max of S = A @ B (a row family), then a nest over (M, cols) that reads only
    the row vector, into shared memory, as upstream's GQA decoding writes its per-block
    maxima (``S_shared[h, k] = f(scores_max[h], ...)``)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), O: T.Tensor((M, cols), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            Os = T.alloc_shared((M, cols), "float32")
            S = T.alloc_fragment((M, N), "float32")
            row_max = T.alloc_fragment((M,), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(S)
            T.gemm(As, Bs, S)
            T.reduce_max(S, row_max, dim=1)
            for i, j in T.Parallel(M, cols):
                Os[i, j] = row_max[i] * (j + 1)
            T.copy(Os, O)

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_a_nest_over_rows_and_columns_of_a_row_vector_keeps_its_columns(target):
    """Each column of the nest is written (the column loop was dropped before, leaving its
    variable unbound: upstream's example_gqa_decode_varlen_logits failed to compile)."""
    m, n, k, cols = 64, 32, 16, 8
    rng = np.random.default_rng(2)
    (a, a_values), (b, b_values) = small_ints(rng, (m, k)), small_ints(rng, (k, n))
    out = np.full((m, cols), np.nan, np.float32)
    calls = run(lower(gemm_row_max_over_columns(m, n, k, cols), target), a, b, out)
    assert calls["__shfl_xor_sync"] > 0  # a row family
    np.testing.assert_array_equal(out, (a_values @ b_values).max(1)[:, None] * np.arange(1, cols + 1))


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


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
@pytest.mark.parametrize("mnk", [(100, 70, 50), (64, 96, 0)], ids=["edges", "k0"])
def test_a_simt_matmul_with_a_local_accumulator_equals_numpy(target, mnk):
    """The accumulator is a T.alloc_local that T.Parallel indexes (a fragment). With K = 0
    its k loop has no trips and goes away, leaving the shared tiles unused: merged alone
    they made a dynamic shared buffer of 0 bytes, which TVM's split refused (upstream's
    issue 1697 asks for zeros)."""
    m, n, k = mnk
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    run(tilelang.lower(tiled_matmul(m, n, k), target=target).device_mod, a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_a_two_d_block_a_while_loop_and_bitwise_not_as_lowered_equal_numpy():
    """The forms upstream's sparse compressor and top-k selector use, which the emulator
    did not run: a 2-d thread block (threadIdx.y above .x), a while loop each thread
    leaves at its own time, and ``~x`` on unsigned and signed integers."""

    @T.prim_func
    def forms(A: T.Tensor((8, 16), "uint32"), B: T.Tensor((8, 16), "int32"), C: T.Tensor((8, 16), "int32")):
        with T.Kernel(1, threads=(16, 8)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            A[ty, tx] = ~A[ty, tx]
            B[ty, tx] = ~B[ty, tx]
            steps = T.alloc_var("int32")
            left = T.alloc_var("int32")
            steps = 0
            left = ty * 16 + tx
            while left > 0:
                left = left // 2
                steps = steps + 1
            C[ty, tx] = steps

    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, (8, 16), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(-2**31, 2**31, (8, 16), dtype=np.int64).astype(np.int32)
    a_in, b_in, c = a.copy(), b.copy(), np.full((8, 16), -1, np.int32)
    artifact = tilelang.lower(forms, target=SM90)
    assert "steps_ptr" in artifact.device_source  # a variable keeps its name (it was "_ptr")
    run(artifact.device_mod, a, b, c)
    np.testing.assert_array_equal(a, ~a_in)
    np.testing.assert_array_equal(b, ~b_in)
    np.testing.assert_array_equal(c, [[int(v).bit_length() for v in range(r * 16, r * 16 + 16)] for r in range(8)])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_float_to_fp8_as_lowered_rounds_and_saturates_as_torch(arch):
    """float32 -> e4m3 / e5m2 (vectorized: the paired conversions on sm_90): nearest, ties
    to even, beyond the largest finite value that value (cuda_fp8.h's __NV_SATFINITE),
    the emulator's narrowing checked against torch's over magnitudes from 1e-9 to 1e9."""

    @T.prim_func
    def narrow(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float8_e4m3fn"),
               C: T.Tensor((1024,), "float8_e5m2")):
        with T.Kernel(4, threads=128) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i]
                C[bx * 256 + i] = A[bx * 256 + i]

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(1024) * 10.0 ** rng.integers(-9, 10, 1024)).astype(np.float32)
    a[:8] = [0.0, -0.0, 448.0, 464.0, 465.0, 57344.0, 61440.0, -np.inf]
    b, c = np.zeros(1024, np.uint8), np.zeros(1024, np.uint8)
    run(tilelang.lower(narrow, target={"kind": "cuda", "arch": arch}).device_mod, a, b, c)
    for out, dtype, limit in ((b, torch.float8_e4m3fn, 448.0), (c, torch.float8_e5m2, 57344.0)):
        want = torch.from_numpy(np.clip(a, -limit, limit)).to(dtype).view(torch.uint8).numpy()
        np.testing.assert_array_equal(out, want)


def test_int32_wraps_and_atomic_add_returns_the_previous_value_as_lowered():
    """An int32 ``(x << 28) >> 28`` sign-extends a nibble (the emulator computed it in 64
    bits, so upstream's int4 GEMV decoded 15 for -1), and atomicAdd's previous values give
    every thread its own slot (upstream's top-k selector and compaction)."""

    @T.prim_func
    def forms(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32"), S: T.Tensor((128,), "int32"),
              N: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=128):
            t = T.get_thread_binding()
            B[t] = ((A[t] & 15) << 28) >> 28
            S[t] = T.atomic_add(N[0], 1, return_prev=True)

    a = np.arange(128, dtype=np.int32) * 7
    b, slots, count = np.zeros(128, np.int32), np.full(128, -1, np.int32), np.zeros(1, np.int32)
    run(tilelang.lower(forms, target=SM90).device_mod, a, b, slots, count)
    np.testing.assert_array_equal(b, np.where(a % 16 >= 8, a % 16 - 16, a % 16))
    assert count[0] == 128 and sorted(slots) == list(range(128))


def test_a_local_buffer_copied_out_is_copied_whole_by_every_thread():
    """T.copy(local, global[row, slice]) with a row and slice of the thread's own (upstream's
    sparse compressor stores its results so): every thread stores its whole buffer. It was
    dealt out over the block's threads like a shared tile's, so thread (x, y) stored
    element 16 y + x of its own buffer, and only where y == 0 (the H200 ran upstream's
    compressor to 100% wrong values)."""

    @T.prim_func
    def per_thread(A: T.Tensor((16, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=(16, 4)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            row = T.alloc_local((16,), "float32")
            T.copy(A[tx, ty * 16:(ty + 1) * 16], row)
            for i in T.serial(16):
                row[i] = row[i] * 2.0 + 1.0
            T.copy(row, B[tx, ty * 16:(ty + 1) * 16])

    a = np.random.default_rng(0).integers(-4, 5, (16, 64)).astype(np.float32)
    b = np.zeros((16, 64), np.float32)
    run(tilelang.lower(per_thread, target=SM90).device_mod, a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)
