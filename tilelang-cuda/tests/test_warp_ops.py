"""Upstream's warp intrinsics through ``import tilelang.language as T`` (core's neutral ops,
lowered by the CUDA backend to CUDA's warp functions): the source names them, the lowered
device IR runs in the emulator (lowered_emulator.py; each instruction modelled from the
PTX ISA in lowered_instructions.py) and equals numpy, nvcc compiles them, and what CUDA
does not allow is a compile error."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.errors import LanguageError, LanguageTypeError

SM90 = {"kind": "cuda", "arch": "sm_90"}
THREADS = 64  # two warps: each reduces, shuffles and votes over its own 32 lanes


def lower(func):
    return tilelang.lower(func, target=SM90)


def emulate(func, *arrays) -> dict[str, int]:
    kernel = lowered_kernel(lower(func).device_mod)
    kernel(*arrays)
    return kernel.calls


def warp_reduce(kind: str, dtype: str):
    reduce = {"sum": T.warp_reduce_sum, "max": T.warp_reduce_max, "min": T.warp_reduce_min,
              "bitand": T.warp_reduce_bitand, "bitor": T.warp_reduce_bitor}[kind]

    @T.prim_func
    def main(x: T.Tensor((THREADS,), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            local = T.alloc_local([1], dtype)
            local[0] = x[tx]
            x[tx] = reduce(local[0])

    return main


NUMPY_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "bitand": np.bitwise_and.reduce,
                "bitor": np.bitwise_or.reduce}


@pytest.mark.parametrize("kind,dtype", [("sum", "float32"), ("max", "float32"), ("min", "float32"),
                                        ("bitand", "int32"), ("bitor", "int32"), ("sum", "int64"),
                                        ("max", "int64"), ("bitor", "int64")])
def test_warp_reductions_give_every_lane_its_warps_result(kind, dtype):
    rng = np.random.default_rng(7)
    x = (rng.integers(-8, 9, THREADS) if dtype == "float32" else rng.integers(0, 1 << 20, THREADS)).astype(dtype)
    expected = np.concatenate([np.full(32, NUMPY_REDUCE[kind](x[w * 32:(w + 1) * 32]), dtype) for w in (0, 1)])
    calls = emulate(warp_reduce(kind, dtype), x)
    assert calls["__shfl_xor_sync"] == 5  # a butterfly over 32 lanes
    np.testing.assert_array_equal(x, expected)


def shuffles(width: int):
    @T.prim_func
    def main(x: T.Tensor((THREADS,), "int32"), out: T.Tensor((4, THREADS), "int32")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            v = T.alloc_local([1], "int32")
            v[0] = x[tx]
            out[0, tx] = T.shfl_sync(v[0], 5, width)
            out[1, tx] = T.shfl_xor(v[0], 3, width)
            out[2, tx] = T.shfl_down(v[0], 2, width)
            out[3, tx] = T.shfl_up(v[0], 3, width)

    return main


@pytest.mark.parametrize("width", [32, 8])
def test_shuffles_equal_their_definition(width):
    x = np.arange(THREADS, dtype="int32") * 10 + 1
    out = np.zeros((4, THREADS), "int32")
    emulate(shuffles(width), x, out)
    lane = np.arange(THREADS) % width
    base = np.arange(THREADS) - lane
    np.testing.assert_array_equal(out[0], x[base + 5 % width])
    np.testing.assert_array_equal(out[1], x[base + (lane ^ 3)])
    np.testing.assert_array_equal(out[2], x[np.where(lane + 2 < width, np.arange(THREADS) + 2, np.arange(THREADS))])
    np.testing.assert_array_equal(out[3], x[np.where(lane >= 3, np.arange(THREADS) - 3, np.arange(THREADS))])


@T.prim_func
def votes(out: T.Tensor((7, THREADS), "int64")):
    with T.Kernel(1, threads=THREADS):
        tx = T.get_thread_binding()
        out[0, tx] = T.cast(T.ballot_sync(tx % 3 == 0), "int64")
        out[1, tx] = T.cast(T.any_sync(tx == 40), "int64")
        out[2, tx] = T.cast(T.all_sync(tx < 32), "int64")
        out[3, tx] = T.cast(T.ballot(tx == 33), "int64")
        out[4, tx] = T.cast(T.syncthreads_count(tx < 5), "int64")
        out[5, tx] = T.cast(T.match_any_sync(tx % 4), "int64")
        if tx < 48:
            out[6, tx] = T.cast(T.activemask(), "int64")


def test_votes_ballots_and_matches_equal_their_definition():
    out = np.zeros((7, THREADS), "int64")
    emulate(votes, out)
    lane, warp = np.arange(THREADS) % 32, np.arange(THREADS) // 32
    ballot = [sum(1 << i for i in range(32) if (32 * w + i) % 3 == 0) for w in (0, 1)]
    np.testing.assert_array_equal(out[0], np.array(ballot)[warp])
    np.testing.assert_array_equal(out[1], warp == 1)  # lane 8 of the second warp
    np.testing.assert_array_equal(out[2], warp == 0)
    np.testing.assert_array_equal(out[3], np.where(warp == 1, 2, 0))  # upper 32 bits zero: a 32-lane warp
    np.testing.assert_array_equal(out[4], 5)
    np.testing.assert_array_equal(out[5], sum(1 << i for i in range(32) if i % 4 == 0) << (lane % 4))
    np.testing.assert_array_equal(out[6], np.where(warp == 0, 0xFFFFFFFF, np.where(lane < 16, 0xFFFF, 0)))


@T.prim_func
def positions(out: T.Tensor((3, 128), "int32")):
    with T.Kernel(1, threads=128):
        out[0, T.get_thread_binding()] = T.get_lane_idx()
        out[1, T.get_thread_binding()] = T.get_warp_idx()
        out[2, T.get_thread_binding()] = T.get_warp_idx_sync(16) * 100 + T.get_lane_idx(16)


def test_lane_and_warp_of_a_thread():
    out = np.zeros((3, 128), "int32")
    emulate(positions, out)
    t = np.arange(128)
    np.testing.assert_array_equal(out, [t % 32, t // 32, t // 16 * 100 + t % 16])


@pytest.mark.parametrize("kind,functions", [
    ("sum", ["__shfl_xor_sync"]),
])
def test_the_source_names_cudas_functions(kind, functions):
    source = lower(warp_reduce(kind, "float32")).device_source
    assert all(f in source for f in functions)
    source = lower(votes).device_source
    for name in ("__ballot_sync", "__any_sync", "__all_sync", "__activemask", "__syncthreads_count",
                 "__match_any_sync"):
        assert name + "(" in source


def test_nvcc_compiles_every_warp_function():
    from tilelang.cuda import toolchain

    if toolchain.nvcc_path() is None:
        pytest.skip("nvcc is not installed")

    @T.prim_func
    def everything(x: T.Tensor((THREADS,), "float16"), y: T.Tensor((THREADS,), "int8"),
                   out: T.Tensor((THREADS,), "int64")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            x[tx] = T.warp_reduce_max(x[tx]) + T.shfl_down(x[tx], 1)
            y[tx] = T.shfl_xor(y[tx], 1)
            out[tx] = (T.cast(T.match_all_sync(tx // 32), "int64") + T.cast(T.syncthreads_or(tx == 3), "int64")
                       + T.cast(T.syncthreads_and(tx >= 0), "int64") + T.cast(T.warp_reduce_bitand(out[tx]), "int64"))
            T.sync_warp()

    source = lower(everything).device_source
    assert "tl_match_all_sync(" in source and "__syncwarp(" in source
    assert toolchain._compile_nvcc(source, "sm_90", "everything")[:4] == b"\x7fELF"


def test_a_float_predicate_is_a_type_error():
    with pytest.raises(LanguageTypeError, match=r"T.any_sync requires an integer or boolean predicate, but got "
                                                r"float32; compare it first"):
        T.any_sync(0.5)
    with pytest.raises(TypeError, match="requires an integer or boolean predicate"):  # upstream's type
        T.ballot(tilelang.tvm.tirx.FloatImm("float32", 0.5))
    with pytest.raises(LanguageTypeError, match="T.warp_reduce_bitor combines bits: it needs an integer value"):
        T.warp_reduce_bitor(tilelang.tvm.tirx.FloatImm("float32", 0.5))


def test_lane_index_outside_a_kernel_is_a_language_error():
    with pytest.raises(LanguageError, match=r"T.get_lane_idx is only valid inside a T.Kernel frame"):
        T.get_lane_idx()


# -- on a GPU: the same kernels, their results against the same expectations -----------------
def cuda_tensor(array):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(array).cuda()


@pytest.mark.gpu
@pytest.mark.parametrize("kind,dtype", [("sum", "float32"), ("max", "float32"), ("bitand", "int32"), ("min", "int64")])
def test_warp_reductions_on_the_gpu(kind, dtype):
    rng = np.random.default_rng(11)
    x = (rng.integers(-8, 9, THREADS) if dtype == "float32" else rng.integers(0, 1 << 20, THREADS)).astype(dtype)
    expected = np.concatenate([np.full(32, NUMPY_REDUCE[kind](x[w * 32:(w + 1) * 32]), dtype) for w in (0, 1)])
    device = cuda_tensor(x)
    tilelang.compile(warp_reduce(kind, dtype), target="cuda")(device)
    np.testing.assert_array_equal(device.cpu().numpy(), expected)


@pytest.mark.gpu
def test_shuffles_votes_and_positions_on_the_gpu():
    x = np.arange(THREADS, dtype="int32") * 10 + 1
    out_emulated, out_gpu = np.zeros((4, THREADS), "int32"), cuda_tensor(np.zeros((4, THREADS), "int32"))
    emulate(shuffles(8), x.copy(), out_emulated)
    tilelang.compile(shuffles(8), target="cuda")(cuda_tensor(x), out_gpu)
    np.testing.assert_array_equal(out_gpu.cpu().numpy(), out_emulated)
    v_emulated, v_gpu = np.zeros((7, THREADS), "int64"), cuda_tensor(np.zeros((7, THREADS), "int64"))
    emulate(votes, v_emulated)
    tilelang.compile(votes, target="cuda")(v_gpu)
    np.testing.assert_array_equal(v_gpu.cpu().numpy(), v_emulated)
    p_gpu = cuda_tensor(np.zeros((3, 128), "int32"))
    tilelang.compile(positions, target="cuda")(p_gpu)
    t = np.arange(128)
    np.testing.assert_array_equal(p_gpu.cpu().numpy(), [t % 32, t // 32, t // 16 * 100 + t % 16])


# -- T.__fns: CUDA's find-nth-set-bit ---------------------------------------------------------
def fns_kernel():
    """upstream's test: the third lane from lane 0 among those with tx >= 7 (lane 9), and a
    table of (mask, base, offset) cases, searching up, down and at the base itself."""

    @T.prim_func
    def main(B: T.Tensor((32,), "int32"), M: T.Tensor((64,), "uint32"), S: T.Tensor((64,), "int32"),
             O: T.Tensor((64,), "int32"), R: T.Tensor((64,), "uint32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            mask = T.cast(T.ballot_sync(tx >= 7), "uint32")
            if tx < 32:
                B[tx] = T.cast(T.__fns(mask, 0, 3), "int32")
            R[tx] = T.__fns(M[tx], S[tx], O[tx])

    return main


def fns_cases():
    rng = np.random.default_rng(5)
    m = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    s = rng.integers(0, 32, 64).astype(np.int32)
    o = rng.integers(-6, 7, 64).astype(np.int32)
    table = [(0b1011, 0, 1), (0b1011, 0, 2), (0b1011, 0, 3), (0b1011, 0, 4), (0b1011, 3, -1), (0b1011, 3, -2),
             (0b1011, 2, 0), (0b1011, 1, 0), (0, 5, 1), (0xFFFFFFFF, 31, 1), (0xFFFFFFFF, 31, 2), (1 << 31, 0, 1)]
    for i, (mask, base, offset) in enumerate(table):
        m[i], s[i], o[i] = mask, base, offset
    return m, s, o


def test_fns_equals_cudas_definition():
    from lowered_instructions import fns_reference

    m, s, o = fns_cases()
    # the table's answers, worked by hand from the PTX ISA's fns.b32
    assert [fns_reference(*c) for c in zip(m[:12], s[:12], o[:12])] == [
        0, 1, 3, 0xFFFFFFFF, 3, 1, 0xFFFFFFFF, 1, 0xFFFFFFFF, 31, 0xFFFFFFFF, 31]
    b, r = np.zeros(32, "int32"), np.zeros(64, "uint32")
    calls = emulate(fns_kernel(), b, m, s, o, r)
    assert calls["__fns"] >= 1
    np.testing.assert_array_equal(b, np.full(32, 9))
    np.testing.assert_array_equal(r, [fns_reference(*c) for c in zip(m, s, o)])
    source = lower(fns_kernel()).device_source
    assert "__fns(" in source and "__ballot_sync(" in source


def test_fns_checks_its_mask_and_other_backends_refuse_it():
    with pytest.raises(LanguageError, match=r"T.__fns mask: expected a 32-bit integer, got int64"):
        T.__fns(tilelang.tvm.tirx.Var("m", "int64"), 0, 1)

    @T.prim_func
    def on_cpu(M: T.Tensor((4,), "uint32"), R: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                R[i] = T.__fns(M[i], 0, 1)

    with pytest.raises(LanguageError, match=r"T.__fns is a warp intrinsic, which target backend 'cpu' does not lower"):
        tilelang.compile(on_cpu, target="cpu")


@pytest.mark.gpu
def test_fns_on_the_gpu():
    from lowered_instructions import fns_reference

    m, s, o = fns_cases()
    b, r = cuda_tensor(np.zeros(32, "int32")), cuda_tensor(np.zeros(64, "uint32"))
    tilelang.compile(fns_kernel(), target="cuda")(b, cuda_tensor(m), cuda_tensor(s), cuda_tensor(o), r)
    np.testing.assert_array_equal(b.cpu().numpy(), np.full(32, 9))
    np.testing.assert_array_equal(r.cpu().numpy(), [fns_reference(*c) for c in zip(m, s, o)])
