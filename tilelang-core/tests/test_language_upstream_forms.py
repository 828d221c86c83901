"""Upstream TileLang forms the language front end reads as upstream does: ``T.ptr`` without a
dtype, integer literals against unsigned and 64-bit expressions, ``T.let(var, value)``,
``T.view`` outside a kernel body, scalar values to every atomic and ``T.Ramp`` runs in
``T.atomic_addx2/x4``.

CPU runs compare with numpy (exact: integer and small-float arithmetic); what the CPU cannot
run is checked on the parsed kernel or the CUDA source (no GPU needed)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError
from tilelang.testing.upstream_kernels import padded_tile_copy
from tvm import tirx

SM90 = {"kind": "cuda", "arch": "sm_90"}


def cpu(func, out_idx=None):
    return tilelang.compile(func, out_idx=out_idx, target="c")


def cuda_source(func) -> str:
    pytest.importorskip("tilelang.cuda")
    return tilelang.lower(func, target=SM90).device_source


# -- T.ptr -----------------------------------------------------------------------------------
def test_ptr_without_dtype_is_an_opaque_handle_parameter():
    """``a_ptr: T.ptr`` (upstream's pointer parameter): T.make_tensor types it."""

    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, n: T.int32):
        A = T.make_tensor(a_ptr, (n,), T.float16)
        B = T.make_tensor(b_ptr, (n,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = T.Cast("float32", A[i])

    assert [str(p.ty) for p in main.params[:2]] == ["T.handle", "T.handle"]
    script = main.script()
    assert 'A = T.decl_buffer((n,), "float16", data=a_ptr)' in script
    assert "B = T.decl_buffer((n,), data=b_ptr)" in script  # float32, the script's default


def test_ptr_keeps_its_typed_and_table_spellings():
    typed = T.ptr(T.float16, "shared")
    assert typed.ty.element_type.dtype == "float16" and typed.ty.storage_scope == "shared"

    @T.prim_func
    def table(ptrs: T.Tensor([4], T.ptr), out: T.Tensor([4], "int64")):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                out[i] = ptrs[i]

    assert str(table.params[0].dtype) == "int64"  # addresses as torch's data_ptr() holds them


# -- integer literals ------------------------------------------------------------------------
def test_integer_literals_take_the_expressions_type_outside_a_kernel():
    """Upstream's test_tilelang_intimm, and what each literal becomes."""
    a = tirx.Var("a", "uint32")
    assert str(a & 0xFFFFFFFF) == "a & T.uint32(4294967295)"
    assert str(0x80000000 | a) == "T.uint32(2147483648) | a"
    assert str(a ^ -1) == "a ^ T.uint32(4294967295)"  # C's (uint32_t)-1
    i = tirx.Var("i", "int32")
    assert str(i & 0xFFFFFFFF) == "i & -1"  # the two's-complement pattern, as before
    n = tirx.Var("n", "int64")
    assert str(n ^ 0x100000000) == "n ^ T.int64(4294967296)"  # TVM alone: `n ^ 0`
    assert str(n & 0x7FFFFFFFFFFFFFFF) == "n & T.int64(9223372036854775807)"
    u = T.uint64()
    assert str(u & 0xFFFFFFFFFFFFFFFF).endswith(' & T.reinterpret("uint64", T.int64(-1))')
    assert str(u & T.uint64(0xFFFFFFFFFFFFFFFF)).endswith(' & T.reinterpret("uint64", T.int64(-1))')


def test_integer_literal_wider_than_the_type_is_refused():
    with pytest.raises(LanguageError, match=r"the literal 0x100000005 in `&` does not fit uint32"):
        T.uint32() & 0x100000005


def masks_kernel():
    @T.prim_func
    def main(n: T.uint32, m: T.int64, out: T.Tensor((4,), "uint32"), wide: T.Tensor((2,), "int64")):
        with T.Kernel(1, threads=1):
            out[0] = n & 0xFFFFFFFF
            out[1] = n | 0x80000000
            out[2] = n ^ -1
            out[3] = 0xFFFF0000 & n
            wide[0] = m ^ 0x100000000
            wide[1] = m & 0x7FFFFFFFFFFFFFFF

    return main


def test_integer_literal_masks_compute_as_in_c():
    out, wide = np.zeros(4, np.uint32), np.zeros(2, np.int64)
    n, m = np.uint32(0x12345678), np.int64(-5)
    cpu(masks_kernel())(int(n), int(m), out, wide)
    np.testing.assert_array_equal(out, [n & np.uint32(0xFFFFFFFF), n | np.uint32(0x80000000), ~n,
                                        np.uint32(0xFFFF0000) & n])
    np.testing.assert_array_equal(wide, [m ^ np.int64(0x100000000), m & np.int64(0x7FFFFFFFFFFFFFFF)])


# -- T.let -----------------------------------------------------------------------------------
def let_kernel():
    @T.prim_func
    def main(A: T.Tensor((4, 16), "float32"), B: T.Tensor((4, 3), "float32")):
        with T.Kernel(1, threads=1):
            for ko in T.serial(4):
                offset = T.int32()
                T.let(offset, ko * 4)  # upstream's call form: bound for the rest of the block
                B[ko, 0] = A[ko, offset]
                after: T.let = offset + 1  # TVMScript's annotation form still works
                B[ko, 1] = A[ko, after]
                z = T.int32()
                B[ko, 2] = T.let(z, ko + 2, A[ko, z])  # with a body: a Let expression

    return main


def test_let_binds_a_declared_variable():
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    b = np.zeros((4, 3), np.float32)
    cpu(let_kernel())(a, b)
    ko = np.arange(4)
    np.testing.assert_array_equal(b, np.stack([a[ko, ko * 4], a[ko, ko * 4 + 1], a[ko, ko + 2]], axis=1))


def test_let_in_a_copy_offset_lowers_for_cuda():
    """Upstream's test_tilelang_language_alias: the let-bound offset of a tile copy."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((32, 64), "float16")
            for ko in T.Pipelined(2, num_stages=0):
                aliased_offset = T.int32()
                T.let(aliased_offset, ko * 32)
                T.copy(A[aliased_offset, 0], S)
                T.copy(S, C[bx * 32, 0])

    # the bound offset, ko * 32 rows of 64, in the copy's source index (its binding is
    # substituted there and dropped: DropDeadBindings)
    assert "*(uint4*)(A_ptr + (((ko * 2048) + (k * 1024)) + (((int)threadIdx.x) * 8)))" in cuda_source(main)


def test_let_refuses_what_is_not_a_scalar_variable():
    with pytest.raises(LanguageError, match=r"T.let\(var, value\): var must be a scalar variable"):

        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.let(A, 1)


# -- T.view outside a kernel body ------------------------------------------------------------
def test_view_of_a_bare_buffer_changes_shape_and_dtype():
    """Upstream's test_view_subbyte_dtype_change: 16 x 32 fp4 seen as 16 x 16 bytes."""
    A = tirx.decl_buffer((16, 32), "float4_e2m1fn", name="A")
    viewed = T.view(A, (16, 16), dtype=T.uint8)
    assert str(viewed.dtype) == "uint8"
    assert [int(d) for d in viewed.shape] == [16, 16]
    assert viewed.scope() == A.scope()
    with pytest.raises(LanguageError, match=r"\[16, 8\] x uint8 is 1024 bits but \[16, 32\] x float4_e2m1fn is 2048"):
        T.view(A, (16, 8), dtype=T.uint8)


# -- atomics with scalar values ----------------------------------------------------------------
def scalar_atomics_kernel():
    @T.prim_func
    def main(A: T.Tensor((8,), T.int32), F: T.Tensor((2,), T.float32), B: T.Tensor((4,), T.int32),
             mask: T.int32, v: T.float32):
        with T.Kernel(1, threads=1):
            T.atomic_or(A[0], mask, memory_order="release")
            T.atomic_and(A[1], mask)
            T.atomic_xor(A[2], mask)
            T.atomic_add(A[3], mask)
            T.atomic_max(A[4], mask)
            T.atomic_min(A[5], mask)
            T.atomic_store(A[6], mask)
            A[7] = T.atomic_add(A[7], mask, return_prev=True)
            T.atomic_add(F[0], v)
            T.atomic_max(F[1], v)
            T.atomic_add(B, mask)  # a tile updated by one scalar

    return main


def test_every_atomic_takes_a_scalar_parameter_as_its_value():
    a = np.array([1, 0xFF, 0x0F, 10, 3, 100, 0, 42], np.int32)
    f = np.array([1.0, 0.0], np.float32)
    b = np.arange(4, dtype=np.int32)
    mask, v = 0x35, 2.5
    want_a = [1 | mask, 0xFF & mask, 0x0F ^ mask, 10 + mask, max(3, mask), min(100, mask), mask, 42]
    cpu(scalar_atomics_kernel())(a, f, b, mask, v)
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(f, [1.0 + v, v])
    np.testing.assert_array_equal(b, np.arange(4) + mask)


def test_atomic_or_of_a_scalar_parameter_lowers_for_cuda():
    """Upstream's test_atomic_or_codegen."""

    @T.prim_func
    def main(A: T.Tensor((1,), T.int32), mask: T.int32):
        with T.Kernel(1, threads=32):
            T.atomic_or(A[0], mask, memory_order="release")

    assert "atomicOr((&(A_ptr[0])), mask)" in cuda_source(main)


# -- T.Ramp runs in T.atomic_addx2 / x4 --------------------------------------------------------
def ramp_kernel(lanes):
    @T.prim_func
    def main(Dst: T.Tensor((2 * lanes,), "float32"), Val: T.Tensor((lanes,), "float32")):
        with T.Kernel(1, threads=1):
            if lanes == 2:
                T.atomic_addx2(Dst[T.Ramp(2, 1, 2)], Val[T.Ramp(0, 1, 2)])
            else:
                T.atomic_addx4(Dst[T.Ramp(4, 1, 4)], Val[0:4])

    return main


@pytest.mark.parametrize("lanes", [2, 4])
def test_atomic_addx_takes_a_ramp_as_its_run(lanes):
    dst = np.arange(2 * lanes, dtype=np.float32)
    val = 10 * np.arange(1, lanes + 1, dtype=np.float32)
    want = dst.copy()
    want[lanes:] += val
    cpu(ramp_kernel(lanes))(dst, val)
    np.testing.assert_array_equal(dst, want)


def test_atomic_addx2_of_ramps_returns_the_previous_pair_on_cuda():
    """Upstream's test_atomic_addx2_return_prev_accepts_ramp (the CPU builds no vectors)."""

    @T.prim_func
    def main(Dst: T.Tensor((2,), "float32"), Val: T.Tensor((2,), "float32"), Prev: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=1):
            Prev[0:2] = T.atomic_addx2(Dst[T.Ramp(0, 1, 2)], Val[T.Ramp(0, 1, 2)], return_prev=True)

    assert ("*(float2*)(Prev_ptr + 0) = make_float2(atomicAdd((&(Dst_ptr[0])), Val_ptr[0]), "
            "atomicAdd((&(Dst_ptr[1])), Val_ptr[1]));") in cuda_source(main)


def test_atomic_addx2_refuses_a_strided_ramp():
    with pytest.raises(LanguageError, match=r"T.atomic_addx2 destination: .* indexes 2 lanes with .*T.Ramp\(start, 1, 2\)"):

        @T.prim_func
        def main(Dst: T.Tensor((4,), "float32"), Val: T.Tensor((2,), "float32")):
            with T.Kernel(1, threads=1):
                T.atomic_addx2(Dst[T.Ramp(0, 2, 2)], Val[0:2])


# -- T.rng_init / T.rng_rand: a backend without a generator says so ---------------------------
def test_random_numbers_on_a_backend_without_a_generator_are_refused_at_the_users_line():
    @T.prim_func
    def draws(A: T.Tensor((32,), "uint32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            T.rng_init(42, tx, 0)
            A[tx] = T.rng_rand()

    with pytest.raises(LanguageError, match=r"kernel 'draws': T\.rng_init draws random numbers, which target "
                                            r"backend 'cpu' has no generator for; compile the kernel for CUDA, or "
                                            r"pass random numbers in as a tensor \(torch\.rand\)\n --> .*"
                                            r"test_language_upstream_forms\.py:\d+"):
        tilelang.compile(draws, target="c")


@pytest.mark.parametrize("call,message", [
    (lambda: T.rng_rand_float(bit=16), r"T\.rng_rand_float: bit must be 32 or 64, got 16"),
    (lambda: T.rng_rand_float(dist="poisson"), (r"T\.rng_rand_float: dist must be one of \['uniform', 'normal'\], "
                                                r"got 'poisson'")),
    (lambda: T.rng_init(-1, 0, 0), r"T\.rng_init: seed -1 does not fit 64 unsigned bits"),
    (lambda: T.rng_init(1, 0, 0, generator="mt19937"), (r"T\.rng_init: generator must be one of "
                                                        r"\['curandStatePhilox4_32_10_t', ")),
])
def test_random_number_calls_check_their_arguments(call, message):
    with pytest.raises(LanguageError, match=message):
        call()


# -- T.tma_copy from shared to global memory (upstream's TMA store) ---------------------------
def _tile_through_shared_store():
    @T.prim_func
    def doubled(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(2, threads=32) as bx:
            tile = T.alloc_shared((32, 32), "float32")
            for i, j in T.Parallel(32, 32):
                tile[i, j] = A[bx * 32 + i, j] * 2
            T.tma_copy(tile, B[bx * 32, 0])
            T.tma_store_arrive()
            T.tma_store_wait(0, read=True)

    return doubled


def test_a_tma_store_writes_the_shared_tile_to_global_memory():
    a = np.arange(64 * 32, dtype="float32").reshape(64, 32)
    b = np.zeros_like(a)
    tilelang.compile(_tile_through_shared_store(), target="c")(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_a_tma_store_takes_no_barrier_and_its_wait_checks_its_arguments():
    with pytest.raises(LanguageError, match=r"T\.tma_store_wait\(count=-1\): count is the number of TMA store "
                                            r"groups allowed to stay in flight, an int >= 0"):
        T.tma_store_wait(-1)
    with pytest.raises(LanguageError, match=r"T\.tma_store_wait\(read=1\): read is True or False"):
        T.tma_store_wait(0, read=1)

    @T.macro
    def store_with_barrier(tile, B, bar):
        T.tma_copy(tile, B[0, 0], barrier=bar)

    with pytest.raises(LanguageError, match=r"T\.tma_copy\(shared, global, barrier=\.\.\.\): a TMA store takes "
                                            r"no barrier; T\.tma_store_wait\(\) completes it"):
        @T.prim_func
        def refused(B: T.Tensor((32, 32), "float32")):
            with T.Kernel(1, threads=32):
                tile = T.alloc_shared((32, 32), "float32")
                bar = T.alloc_barrier(32)
                store_with_barrier(tile, B, bar)


# -- T.async_copy ----------------------------------------------------------------------------
def test_async_copy_is_a_copy_landed_before_the_next_statement():
    """Upstream's T.async_copy + T.ptx_wait_group: here the copy is synchronous, so the wait
    finds it done (and in a T.Pipelined loop the CUDA backend pipelines it as a T.copy)."""

    @T.prim_func
    def main(A: T.Tensor((130, 32), "float32"), B: T.Tensor((130, 32), "float32")):
        with T.Kernel(2, threads=64) as bx:
            S = T.alloc_shared((128, 32), "float32")
            T.async_copy(A[bx * 128, 0], S)  # the second block's rows past 130 read as zero
            T.ptx_wait_group(0)
            T.copy(S, B[bx * 128, 0])

    a = np.arange(130 * 32, dtype="float32").reshape(130, 32)
    b = np.zeros_like(a)
    cpu(main)(a, b)
    np.testing.assert_array_equal(b, a)


def test_async_copy_of_one_element():
    # upstream's T.async_copy(A[0], A_shared[0]): one element, global -> shared
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            S = T.alloc_shared((4,), "float32")
            T.async_copy(A[2], S[1])
            T.ptx_wait_group(0)
            B[0] = S[1]

    b = np.zeros(4, "float32")
    cpu(main)(np.arange(1, 5, dtype="float32"), b)
    np.testing.assert_array_equal(b, [3, 0, 0, 0])


def test_async_copy_between_shared_tiles_is_refused():
    with pytest.raises(LanguageError, match=r"T.async_copy only supports global->shared/shared.dyn copies; got "
                                            r"S0 \(shared.dyn\) -> S1 \(shared.dyn\): use T.copy"):
        @T.prim_func
        def main(A: T.Tensor((4,), "float16"), B: T.Tensor((4,), "float16")):
            with T.Kernel(1, threads=1):
                S0 = T.alloc_shared((4,), "float16")
                S1 = T.alloc_shared((4,), "float16")
                T.copy(A[0:4], S0)
                T.async_copy(S0, S1)
                T.copy(S1, B[0:4])


# -- T.dp4a ----------------------------------------------------------------------------------
def test_dp4a_accumulates_four_int8_products_into_int32():
    """Upstream's T.dp4a(A_local[k], B_local[k], acc[0]) (its SIMT GEMV and bitnet decode):
    acc += A[k:k+4] . B[k:k+4] in int32. Before, it was TVM's expression form, which no
    code generator resolved."""

    @T.prim_func
    def main(A: T.Tensor((16,), "int8"), B: T.Tensor((16,), "int8"), C: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=1):
            a = T.alloc_local((16,), "int8")
            b = T.alloc_local((16,), "int8")
            acc = T.alloc_local((1,), "int32")
            T.clear(acc)
            for i in T.serial(16):
                a[i] = A[i]
                b[i] = B[i]
            for k in T.serial(4):
                T.dp4a(a[k * 4], b[k * 4], acc[0])
            C[0] = acc[0]
            C[1] = 7
            T.dp4a(A, B, C[1:2])  # whole buffers / slices: their first four elements

    rng = np.random.default_rng(0)
    a, b = (rng.integers(-128, 128, 16).astype("int8") for _ in range(2))
    c = np.zeros(2, "int32")
    cpu(main)(a, b, c)
    wide = a.astype("int64") * b.astype("int64")
    np.testing.assert_array_equal(c, [wide.sum(), 7 + wide[:4].sum()])


@pytest.mark.parametrize("a,b,c,message", [
    ("float16", "float16", "int32", r"dp4a requires int8 inputs, got A.dtype='float16'"),
    ("int8", "int8", "float32", r"dp4a requires an int32 accumulator, got C.dtype='float32'"),
    ("uint8", "uint8", "int32", r"dp4a requires int8 inputs, got A.dtype='uint8'"),
    ("int8", "float16", "int32", r"dp4a requires int8 inputs, got B.dtype='float16'"),
])
def test_dp4a_checks_its_dtypes_as_upstream(a, b, c, message):
    with pytest.raises(LanguageError, match=message):
        @T.prim_func
        def main(A: T.Tensor((4,), a), B: T.Tensor((4,), b), C: T.Tensor((1,), c)):
            T.dp4a(A, B, C)


# -- T.annotate_safe_value -------------------------------------------------------------------
def shifted_copy(pad):
    """Upstream's test_tilelang_language_annotate_safe_value kernel: rows read 10 above
    their own, the first 10 of them outside A."""

    @T.prim_func
    def main(A: T.Tensor((256, 64), "float32"), B: T.Tensor((256, 64), "float32")):
        with T.Kernel(1, 2, threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 64), "float32")
            T.annotate_safe_value({A: pad})
            for i, j in T.Parallel(128, 64):
                A_shared[i, j] = A[by * 128 + i - 10, bx * 64 + j]
            for i, j in T.Parallel(128, 64):
                B[by * 128 + i, bx * 64 + j] = A_shared[i, j]

    return main


@pytest.mark.parametrize("pad", [0, 10.5])
def test_reads_outside_an_annotated_tensor_give_its_safe_value(pad):
    a = np.random.default_rng(1).standard_normal((256, 64)).astype("float32")
    b = cpu(shifted_copy(pad), out_idx=[1])(a)
    want = np.full_like(a, pad)
    want[10:] = a[:-10]
    np.testing.assert_array_equal(b, want)


def test_without_a_safe_value_such_a_read_gives_zero():
    """(the same kernel unannotated: a read that may leave A gives 0 there, upstream's
    default safe value; tilelang.transform.safe_memory guards it when the kernel compiles.
    Before, it was a compile error)"""
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float32"), B: T.Tensor((256, 64), "float32")):
        with T.Kernel(1, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(128, 64):
                B[by * 128 + i, bx * 64 + j] = A[by * 128 + i - 10, bx * 64 + j]

    a = np.random.default_rng(2).standard_normal((256, 64)).astype("float32")
    want = np.zeros_like(a)
    want[10:] = a[:-10]
    np.testing.assert_array_equal(cpu(main, out_idx=[1])(a), want)


@pytest.mark.parametrize("dst_dtype", ["float32", "float16"])
def test_a_tile_copy_of_a_tensor_with_a_safe_value_reads_it_outside(dst_dtype):
    # (it was refused: a tile copy read zero outside a tensor)
    a = np.random.default_rng(3).standard_normal((100, 60)).astype("float32")
    want = np.full((128, 64), -99, dst_dtype)
    want[:100, :60] = a.astype(dst_dtype)
    np.testing.assert_array_equal(cpu(padded_tile_copy(-99, dst_dtype), out_idx=[1])(a), want)


def test_safe_values_check_where_and_what_they_annotate():
    with pytest.raises(LanguageError, match=r"T.annotate_safe_value is only valid inside a T.Kernel frame"):
        T.annotate_safe_value({})
    with pytest.raises(LanguageError, match=r"'S' is not a global tensor"):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float32")
                T.annotate_safe_value({S: 0})
    # upstream scopes a second value to its T.sblock; one read would get the other's value here
    with pytest.raises(LanguageError, match=r"T.annotate_safe_value: 'A' already reads -1 outside its shape in "
                                            r"this kernel; a tensor has one safe value per kernel \(here -99 too\)"):
        @T.prim_func
        def twice(A: T.Tensor((60,), "int32"), B: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                T.annotate_safe_value({A: -1})
                T.annotate_safe_value({A: -99})
                for i in T.Parallel(64):
                    B[i] = A[i]

    @T.prim_func
    def same_twice(A: T.Tensor((60,), "int32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            T.annotate_safe_value({A: -1})
            T.annotate_safe_value({A: -1})
            for i in T.Parallel(64):
                B[i] = A[i]

    b = np.zeros(64, "int32")
    cpu(same_twice)(np.arange(60, dtype="int32"), b)
    np.testing.assert_array_equal(b, np.r_[np.arange(60), [-1] * 4])


# -- tilelang.transform.simplify ---------------------------------------------------------------
def test_simplify_prim_func_and_apply_simplify_simplify_the_kernel_and_keep_its_result():
    from tilelang.transform import simplify_prim_func
    from tilelang.transform.simplify import apply_simplify

    @simplify_prim_func  # upstream's SIMT GEMM test builds its kernel so
    def scaled(n: int):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    B[i * 1 + 0] = A[(i + 1) - 1] * 2.0

        return main

    kernel = scaled(8)
    assert isinstance(kernel, tirx.PrimFunc) and "B[i] = A[i] * T.float32(2.0)" in kernel.script()
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(cpu(kernel, out_idx=[1])(a), 2 * a)
    assert apply_simplify(kernel).script() == kernel.script()  # as upstream's gemv test calls it
    with pytest.raises(LanguageError, match="apply_simplify: expected a PrimFunc or an IRModule, got int"):
        apply_simplify(3)


def test_apply_simplify_drops_the_tensor_parameters_the_body_never_uses():
    # upstream's SIMT GEMV declares Bias and, without a bias, is called with A, B, C
    from tilelang.transform.simplify import apply_simplify

    @T.prim_func
    def gemv(A: T.Tensor((4, 8), "float32"), B: T.Tensor((8,), "float32"), Bias: T.Tensor((4,), "float32"),
             C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                C[i] = 0.0
                for k in T.serial(8):
                    C[i] += A[i, k] * B[k]

    kernel = apply_simplify(gemv)
    assert [p.name for p in kernel.params] == ["A", "B", "C"]
    a, b, c = np.arange(32, dtype="float32").reshape(4, 8), np.arange(8, dtype="float32"), np.zeros(4, "float32")
    cpu(kernel)(a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_clear_accum_may_be_a_condition_of_an_unrolled_loop():
    """Upstream's FlashMLA: ``T.gemm(..., clear_accum=(j == 0))`` inside ``for j in
    T.unroll(n)``. C is cleared on the first k tile and accumulates the others, so what C
    held before does not count."""
    M, N, K, bk = 16, 16, 64, 16

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            As = T.alloc_shared((M, bk), "float32")
            Bs = T.alloc_shared((bk, N), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.fill(acc, 1000.0)
            for j in T.unroll(K // bk):
                T.copy(A[0, j * bk], As)
                T.copy(B[j * bk, 0], Bs)
                T.gemm(As, Bs, acc, clear_accum=(j == 0))
            T.copy(acc, C)

    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    tilelang.compile(main, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-4)
