"""CUDA source for atomics, bitwise reductions and T.transpose (no GPU needed): the atomic
function each element op becomes, the tl_device.h helpers for the gaps, and that nvcc
accepts the result."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError
from tilelang.cuda import toolchain

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90"}
HAS_NVCC = toolchain.nvcc_path() is not None


def kernel_body(source: str) -> str:
    """The generated kernels, without the prepended helper header."""
    return source[source.index('extern "C" __global__'):]


def element_kernel(kind: str, dtype: str, memory_order: str | None = None, return_prev: bool = False):
    emit = getattr(T, f"atomic_{kind}")
    n = 256

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), H: T.Tensor((8,), dtype), P: T.Tensor((n,), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                if return_prev:
                    P[bx * 128 + i] = emit(H[i % 8], X[bx * 128 + i], memory_order=memory_order, return_prev=True)
                else:
                    emit(H[i % 8], X[bx * 128 + i], memory_order=memory_order)

    return main


@pytest.mark.parametrize("kind,dtype,function", [
    ("add", "float16", "atomicAdd"), ("add", "bfloat16", "atomicAdd"), ("add", "int32", "atomicAdd"),
    ("max", "int32", "atomicMax"), ("min", "uint32", "atomicMin"),
    ("or", "int32", "atomicOr"), ("and", "uint32", "atomicAnd"), ("xor", "int32", "atomicXor"),
    ("max", "float32", "tl_atomic_max"), ("min", "float16", "tl_atomic_min"), ("max", "bfloat16", "tl_atomic_max"),
    ("add", "int64", "tl_atomic_add_64"), ("add", "uint64", "tl_atomic_add_64"),
])
def test_each_element_atomic_becomes_its_cuda_function(kind, dtype, function):
    source = tilelang.lower(element_kernel(kind, dtype), target=SM80).device_source
    assert f"{function}((&(H_ptr[" in kernel_body(source)
    # CUDA's atomics come from the toolkit; only the gaps need tl_device.h
    assert ("template <typename T> __device__ __forceinline__ T tl_atomic_max(" in source) == \
        function.startswith("tl_")


def test_return_prev_is_the_value_of_the_cuda_atomic():
    source = kernel_body(tilelang.lower(element_kernel("add", "float32", return_prev=True), target=SM80).device_source)
    assert re.search(r"P_ptr\[[^\]]+\] = atomicAdd\(\(&\(H_ptr\[", source)


@pytest.mark.parametrize("order,index", [("acquire", 2), ("release", 3), ("seq_cst", 5)])
def test_memory_orders_stronger_than_relaxed_are_fenced(order, index):
    source = kernel_body(tilelang.lower(element_kernel("add", "float32", memory_order=order), target=SM80)
                         .device_source)
    assert f"tl_atomic_ordered({index}, atomicAdd((&(H_ptr[" in source
    relaxed = kernel_body(tilelang.lower(element_kernel("add", "float32", memory_order="relaxed"), target=SM80)
                          .device_source)
    assert "tl_atomic_ordered" not in relaxed


def load_store_kernel(dtype="float32"):
    @T.prim_func
    def main(Flag: T.Tensor((1,), dtype), Out: T.Tensor((128,), dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                x = T.atomic_load(Flag[0], memory_order="acquire")
                T.atomic_store(Out[i], x, memory_order="release")

    return main


def test_atomic_load_and_store_use_the_helpers():
    source = kernel_body(tilelang.lower(load_store_kernel("float16"), target=SM80).device_source)
    assert "tl_atomic_load((&(Flag_ptr[0])), 2)" in source and "tl_atomic_store((&(Out_ptr[" in source


def test_a_type_without_an_atomic_is_named_with_the_alternatives():
    with pytest.raises(LanguageError, match=r"T.atomic_max on H \(int64\): CUDA has atomic max for int32, uint32, "
                                            r"float32, float64, float16, bfloat16; use one of those types"):
        tilelang.lower(element_kernel("max", "int64"), target=SM80)


def tile_atomic_kernel(use_tma: bool):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tile = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32, 0], tile)
            T.atomic_add(C[bx * 32, 0], tile, use_tma=use_tma)
            T.atomic_max(C[bx * 32, 0], tile)

    return main


def bitwise_and_transpose_kernel():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "int32"), R: T.Tensor((64,), "int32"), B: T.Tensor((32, 64), "int32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 32), "int32")
            t = T.alloc_shared((32, 64), "int32")
            rows = T.alloc_fragment((64,), "int32")
            T.copy(A, tile)
            T.reduce_bitxor(tile, rows, dim=1)
            T.transpose(tile, t)
            T.copy(rows, R)
            T.copy(t, B)

    return main


def test_bitwise_reduction_and_transpose_lower_to_thread_loops():
    source = kernel_body(tilelang.lower(bitwise_and_transpose_kernel(), target=SM90).device_source)
    # the row's xor over its 32 columns, and the transposed shared-to-shared store
    assert "acc3_ptr[0] = (acc3_ptr[0] ^ ((int*)buf_dyn_shmem_ptr)[" in source
    assert "(((int)threadIdx.x) & 31) * 64)" in source and "*(int4*)(B_ptr" in source


def vector_add_kernel(dtype: str, offset: int = 0):
    """Each thread adds 4 consecutive elements of X into H from ``offset`` on, atomically."""

    @T.prim_func
    def main(X: T.Tensor((256,), dtype), H: T.Tensor((260,), dtype)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                for v in T.vectorized(4):
                    T.atomic_add(H[offset + i * 4 + v], X[i * 4 + v])

    return main


@pytest.mark.parametrize("arch,dtype,offset,calls", [
    ("sm_90", "float32", 0, ["tl_atomic_add_f32x4"]),  # float4 atomicAdd from sm_90
    ("sm_90", "float32", 2, ["tl_atomic_add_f32x2"]),  # 8-byte aligned only: a loop of two float2
    ("sm_90", "float32", 1, ["atomicAdd"]),  # not aligned: a loop over the elements
    ("sm_80", "float32", 0, ["atomicAdd"]),
    ("sm_80", "float16", 0, ["tl_atomic_add_f16x2"] * 2),
    ("sm_80", "bfloat16", 0, ["tl_atomic_add_bf16x2"] * 2),
    ("sm_75", "bfloat16", 0, ["tl_atomic_add_bf16"]),  # a compare-and-swap loop per element
])
def test_consecutive_atomic_adds_are_one_vector_add_where_the_arch_has_it(arch, dtype, offset, calls):
    body = kernel_body(tilelang.lower(vector_add_kernel(dtype, offset), target={"kind": "cuda", "arch": arch}).device_source)
    assert re.findall(r"\btl_atomic_add_\w+|\batomicAdd\b", body) == calls


@pytest.mark.parametrize("arch,dtype,offset", [("sm_90", "float32", 0), ("sm_90", "float32", 2), ("sm_90", "float32", 1),
                                               ("sm_80", "float16", 0), ("sm_80", "bfloat16", 0)])
def test_vector_adds_as_lowered_add_every_element(arch, dtype, offset):
    """The emulator runs the lowered kernel, each vector add lane by lane."""
    from lowered_emulator import bf16_bits, bf16_floats
    from lowered_instructions import lowered_kernel

    kernel = lowered_kernel(tilelang.lower(vector_add_kernel(dtype, offset), target={"kind": "cuda", "arch": arch}).device_mod)
    values = np.arange(256) % 16
    x, h = (values.astype(dtype), np.ones(260, dtype)) if dtype != "bfloat16" else \
        (bf16_bits(values.astype(np.float32)), bf16_bits(np.ones(260, np.float32)))
    for _ in range(3):
        kernel(x, h)
    result = bf16_floats(h) if dtype == "bfloat16" else h.astype(np.float64)
    expected = np.ones(260)
    expected[offset:offset + 256] += 3 * values
    np.testing.assert_array_equal(result, expected)
    vector = [name for name in kernel.calls if name.startswith("tl_atomic_add_")]
    assert (vector, "atomicAdd" in kernel.calls) == (([], True) if offset % 2 else ([vector[0]], False))



def scatter_addx_kernel(lanes: int, dtype: str = "float32"):
    """Upstream's sparse MLA backward (deepseek_v32/sparse_mla_bwd.py): rows of a shared
    tile added into rows an index picks, ``lanes`` elements per T.atomic_addx<lanes>."""
    @T.prim_func
    def main(Out: T.Tensor((16, 64), dtype), Idx: T.Tensor((32,), "int32"), G: T.Tensor((32, 64), dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 64), dtype)
            T.copy(G, S)
            for r, c in T.Parallel(32, 64 // lanes):
                if lanes == 4:
                    T.atomic_addx4(Out[Idx[r], c * 4], S[r, c * 4])
                else:
                    T.atomic_addx2(Out[Idx[r], c * 2], S[r, c * 2])

    return main


@pytest.mark.parametrize("arch,lanes,dtype,vector", [("sm_90", 4, "float32", "tl_atomic_add_f32x4"),
                                                     ("sm_90", 2, "float32", "tl_atomic_add_f32x2"),
                                                     ("sm_80", 2, "float16", "tl_atomic_add_f16x2"),
                                                     ("sm_80", 4, "float32", None)])
def test_atomic_addx_is_one_vector_add_where_the_arch_has_it(arch, lanes, dtype, vector):
    """T.atomic_addx4 / x2 made four / two element adds in a row; they are now a loop over
    the lanes, which PackAtomicAdds makes one float4 / float2 / half2 atomicAdd (where the
    arch has it and the first element is aligned: here a row of 64 and a multiple of the
    lanes). Rows picked twice accumulate: the emulator adds lane by lane, as the GPU does."""
    from lowered_instructions import lowered_kernel

    func = scatter_addx_kernel(lanes, dtype)
    lowered = tilelang.lower(func, target={"kind": "cuda", "arch": arch})
    body = kernel_body(lowered.device_source)
    assert (vector in body and "atomicAdd(" not in body) if vector else "atomicAdd(" in body
    rng = np.random.default_rng(11)
    idx = rng.integers(0, 16, 32).astype(np.int32)
    g = rng.integers(-4, 5, (32, 64)).astype(dtype)
    out = np.ones((16, 64), dtype)
    lowered_kernel(lowered.device_mod)(out, idx, g)
    expected = np.ones((16, 64))
    np.add.at(expected, idx, g.astype(np.float64))
    np.testing.assert_array_equal(out.astype(np.float64), expected)
    if HAS_NVCC:
        assert toolchain._compile_nvcc(lowered.device_source, arch + "a" * (arch == "sm_90"), "addx")[:4] == b"\x7fELF"


def test_split_k_through_vector_adds_as_lowered():
    from lowered_instructions import lowered_kernel
    from tilelang.testing.kernels import split_k_gemm

    kernel = lowered_kernel(tilelang.lower(split_k_gemm(64, 64, 128, 2), target=SM90).device_mod)
    rng = np.random.default_rng(3)
    a, b = rng.integers(-3, 4, (64, 128)).astype(np.float16), rng.integers(-3, 4, (128, 64)).astype(np.float16)
    c = np.ones((64, 64), np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, 1 + a.astype(np.float32) @ b.astype(np.float32))
    assert kernel.calls["tl_atomic_add_f32x2"] > 0 and "atomicAdd" not in kernel.calls


NVCC_KERNELS = {
    "float_max_min": lambda: element_kernel("max", "float16", return_prev=True),
    "ordered_add": lambda: element_kernel("add", "bfloat16", memory_order="seq_cst"),
    "bit_xor": lambda: element_kernel("xor", "uint32", return_prev=True),
    "int64_add": lambda: element_kernel("add", "int64", return_prev=True),
    "uint64_add": lambda: element_kernel("add", "uint64", memory_order="release"),
    "load_store": lambda: load_store_kernel("bfloat16"),
    "tile_atomics": lambda: tile_atomic_kernel(False),
    "bitwise_transpose": bitwise_and_transpose_kernel,
    "vector_adds": lambda: vector_add_kernel("float16"),
}


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not installed")
@pytest.mark.parametrize("name", sorted(NVCC_KERNELS))
def test_nvcc_compiles_the_atomics(name):
    source = tilelang.lower(NVCC_KERNELS[name](), target=SM80).device_source
    assert toolchain._compile_nvcc(source, "sm_80", name)[:4] == b"\x7fELF"


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not installed")
@pytest.mark.parametrize("arch,dtype", [("sm_90", "float32"), ("sm_80", "bfloat16"), ("sm_75", "float16")])
def test_nvcc_compiles_the_vector_adds(arch, dtype):
    source = tilelang.lower(vector_add_kernel(dtype), target={"kind": "cuda", "arch": arch}).device_source
    assert toolchain._compile_nvcc(source, arch + "a" * (arch == "sm_90"), "vector_adds")[:4] == b"\x7fELF"


# -- on a GPU (marked `gpu`, skipped without one) ------------------------------------------------
_COMBINE = {"add": lambda a, b: a + b, "max": max, "min": min, "xor": lambda a, b: a ^ b}


@pytest.mark.gpu
@pytest.mark.parametrize("kind,dtype", [("add", "float32"), ("add", "float16"), ("max", "float32"),
                                        ("min", "bfloat16"), ("max", "int32"), ("xor", "int32"), ("add", "int64")])
def test_element_atomics_from_every_thread_land_on_the_gpu(kind, dtype):
    """256 threads update 8 cells (thread e: cell e % 8) and keep the previous values. The
    updates of a cell form one chain start -> ... -> final, so the previous values plus
    the final value are the updated values plus the start (small integers: exact)."""
    torch = pytest.importorskip("torch")
    n = 256
    kernel = tilelang.compile(element_kernel(kind, dtype, return_prev=True), target="cuda")
    tdtype = getattr(torch, dtype)
    x = torch.randint(-8, 8, (n,), device="cuda").to(tdtype)
    h = torch.full((8,), 3, dtype=tdtype, device="cuda")
    p = torch.empty(n, dtype=tdtype, device="cuda")
    kernel(x, h, p)
    xs, ps, hs = x.cpu().tolist(), p.cpu().tolist(), h.cpu().tolist()
    combine = _COMBINE[kind]
    for c in range(8):
        mine = range(c, n, 8)
        values = [3, *(xs[e] for e in mine)]
        assert hs[c] == functools.reduce(combine, values), (kind, dtype, c)
        assert sorted([ps[e] for e in mine] + [hs[c]]) == sorted([combine(ps[e], xs[e]) for e in mine] + [3])


@pytest.mark.gpu
def test_bitwise_reduction_and_transpose_on_the_gpu():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(bitwise_and_transpose_kernel(), out_idx=[1, 2], target="cuda")
    a = torch.randint(-(1 << 30), 1 << 30, (64, 32), dtype=torch.int32, device="cuda")
    r, b = kernel(a)
    expected = a[:, 0].clone()
    for j in range(1, 32):
        expected ^= a[:, j]
    assert torch.equal(r, expected) and torch.equal(b, a.t())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,offset", [("float32", 0), ("float32", 2), ("float16", 0), ("bfloat16", 0)])
def test_vector_atomic_adds_on_the_gpu(dtype, offset):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(vector_add_kernel(dtype, offset), target="cuda")
    x = torch.arange(256, device="cuda").to(getattr(torch, dtype)) % 16
    h = torch.ones(260, device="cuda", dtype=getattr(torch, dtype))
    for _ in range(3):
        kernel(x, h)
    expected = torch.ones(260, device="cuda", dtype=getattr(torch, dtype))
    expected[offset:offset + 256] += 3 * x
    torch.testing.assert_close(h, expected, rtol=0, atol=0)  # small integers: exact in every type


@pytest.mark.gpu
def test_tile_atomics_and_load_store_on_the_gpu():
    torch = pytest.importorskip("torch")
    a = torch.randn(64, 64, device="cuda")
    c = torch.full((64, 64), -1.0, device="cuda")
    tilelang.compile(tile_atomic_kernel(True), target="cuda")(a, c)  # c = max(c + a, a)
    torch.testing.assert_close(c, torch.maximum(a - 1, a), rtol=0, atol=0)
    flag = torch.tensor([2.5], dtype=torch.bfloat16, device="cuda")
    out = torch.zeros(128, dtype=torch.bfloat16, device="cuda")
    tilelang.compile(load_store_kernel("bfloat16"), target="cuda")(flag, out)
    assert torch.equal(out, torch.full_like(out, 2.5))
