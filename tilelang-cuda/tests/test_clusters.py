"""Thread-block clusters (T.ClusterKernel, language/clusters.py): the cluster shape is
compiled into the kernel as __cluster_dims__ (so every launcher's plain launch honours
it), T.block_rank_in_cluster / T.cluster_* become tl_device.h's PTX; nvcc compiles them,
other targets and older GPUs refuse them, and (marked gpu) ranks and the cluster barrier
are checked on the GPU through every execution backend. T.copy_cluster (distributed shared
memory, tilelang.testing.cluster_kernels): stores into another block's shared memory and
an arrival on its barrier; here their source, nvcc and the shared-memory plan, on the GPU
the copied values."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.backend
import tilelang.language as T
from tilelang.cuda import toolchain
from tilelang.errors import CompileError, LanguageError
from tilelang.testing.cluster_kernels import (
    cluster_copy_1d,
    cluster_copy_2d,
    cluster_copy_3d,
    cluster_multicast,
    cluster_ring,
    cluster_tma_multicast,
    multicast_reference,
)

SM90 = {"kind": "cuda", "arch": "sm_90"}
needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
EXECUTION_BACKENDS = [spec.name for spec in tilelang.backend.registered_backends()["cuda"].execution_backends]


def neighbours(blocks=64, cluster=4):
    """Each block publishes a flag, the cluster syncs, each block reads its neighbour's."""
    @T.prim_func
    def main(Flags: T.Tensor((blocks,), T.int32), Out: T.Tensor((blocks,), T.int32),
             Rank: T.Tensor((blocks,), T.int32)):
        with T.ClusterKernel(blocks, threads=32, cluster_dims=(cluster, 1, 1)) as bx:
            tx = T.get_thread_binding()
            rank = T.block_rank_in_cluster()
            if tx == 0:
                Flags[bx] = bx + 1
                Rank[bx] = rank
            T.cluster_sync()
            if tx == 0:
                Out[bx] = Flags[(bx // cluster) * cluster + (rank + 1) % cluster]

    return main


def cluster_gemm(M=256, N=256, K=128, block=64):
    """Upstream's test_tilelang_language_cluster GEMM: a pipelined GEMM launched in clusters of 2."""
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.ClusterKernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128, cluster_dims=(2, 1, 1)) as (bx, by):
            A_shared = T.alloc_shared((block, 32), T.float16)
            B_shared = T.alloc_shared((32, block), T.float16)
            C_local = T.alloc_fragment((block, block), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
                T.copy(A[by * block, k * 32], A_shared)
                T.copy(B[k * 32, bx * block], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block, bx * block])

    return gemm


def test_the_cluster_shape_is_compiled_into_the_kernel():
    source = tilelang.lower(neighbours(), target=SM90).device_source
    assert 'extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(32) main_kernel(' in source
    for call in ("tl_cluster_ctarank()", "tl_cluster_arrive()", "tl_cluster_wait()"):
        assert call in source


@needs_nvcc
@pytest.mark.parametrize("kernel", [neighbours, cluster_gemm])
def test_nvcc_compiles_cluster_kernels(kernel):
    source = tilelang.lower(kernel(), target=SM90).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", kernel.__name__)[:4] == b"\x7fELF"


def test_clusters_need_sm_90():
    with pytest.raises(LanguageError, match=r"T.ClusterKernel\(cluster_dims=\(4, 1, 1\)\): thread-block clusters "
                                            r"need sm_90 or newer; the target is sm_80"):
        tilelang.lower(neighbours(), target={"kind": "cuda", "arch": "sm_80"})


def test_a_grid_of_partial_clusters_is_refused():
    with pytest.raises(LanguageError, match=r"T.ClusterKernel: grid extent 6 along x is not a multiple of the "
                                            r"cluster's 4; a grid is launched in whole clusters"):
        neighbours(blocks=6)


def test_a_cluster_larger_than_portable_is_refused():
    with pytest.raises(LanguageError, match=r"T.ClusterKernel\(cluster_dims=\(4, 4, 1\)\): 16 blocks per cluster; "
                                            r"CUDA guarantees at most 8"):
        @T.prim_func
        def main(A: T.Tensor((16,), T.int32)):
            with T.ClusterKernel(16, 4, cluster_dims=(4, 4)):
                A[0] = 0


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_ranks_and_the_cluster_barrier_on_the_gpu(backend):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(neighbours(), target="cuda", execution_backend=backend)
    for _ in range(20):  # the barrier orders the flags: no run may read a neighbour's before it is written
        flags = torch.zeros(64, dtype=torch.int32, device="cuda")
        out = torch.zeros(64, dtype=torch.int32, device="cuda")
        rank = torch.full((64,), -1, dtype=torch.int32, device="cuda")
        kernel(flags, out, rank)
        blocks = torch.arange(64, device="cuda")
        assert torch.equal(rank, (blocks % 4).int())
        assert torch.equal(out, ((blocks // 4) * 4 + (blocks + 1) % 4 + 1).int())


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_a_gemm_launched_in_clusters(backend):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(cluster_gemm(), out_idx=[2], target="cuda", execution_backend=backend)
    a = torch.randn(256, 128, dtype=torch.float16, device="cuda")
    b = torch.randn(128, 256, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


DSMEM_KERNELS = {
    "1d": (cluster_copy_1d, (128,)),
    "1d_odd": (lambda: cluster_copy_1d(127), (127,)),  # 508 bytes: not whole 16-byte chunks
    "1d_cluster_sync": (lambda: cluster_copy_1d(barrier=False), (128,)),
    "2d_slice": (cluster_copy_2d, (4, 32)),
    "2d_odd_rows": (lambda: cluster_copy_2d(n=31), (4, 31)),
    "3d_slice": (cluster_copy_3d, (2, 4, 16)),
}


def test_a_cluster_copy_stores_into_the_other_blocks_shared_memory_and_arrives_there():
    source = tilelang.lower(cluster_copy_2d(), target=SM90).device_source
    body = source[source.index('extern "C" __global__ void __cluster_dims__(2, 1, 1)'):]
    # each thread's elements of s_src[0:4, 0:32] into the same place of block 1's s_dst, then
    # one thread arrives on block 1's barrier once the block's stores are all issued
    assert body.count("tl_cluster_store(") == 1 and ", 1, ((float*)buf_dyn_shmem_ptr)[" in body
    store, arrive = body.index("tl_cluster_store("), body.index("tl_mbarrier_arrive_cluster((&(barriers_ptr[0])), 1);")
    assert store < body.index("__syncthreads();", store) < body.index("if (((int)threadIdx.x) == 0) {", store) < arrive
    assert "T* tl_map_shared_rank(T* local, int rank)" in source and "mapa.u64" in source


def test_the_received_tile_keeps_its_own_shared_memory():
    """The ring's `received` is written only by another block: without being kept live it shared
    `mine`'s bytes, which the block is still sending from."""
    source = tilelang.lower(cluster_ring(), target=SM90).device_source
    body = source[source.index('extern "C" __global__'):]
    store = body[body.index("tl_cluster_store("):]
    store = store[:store.index(";")]
    assert "+ 512)])), ((rank_ptr[0] + 1) & 3), ((half*)buf_dyn_shmem_ptr)[((k * 128) + ((int)threadIdx.x))]" \
        in store, store


def test_a_multicast_is_each_receivers_load_of_the_leaders_tile():
    """cluster_mask=0b0110 (ranks 1 and 2 receive rank 1's tile; 0 and 3 load their own):
    the column block each block reads is selected by its rank."""
    source = tilelang.lower(cluster_multicast(mask=0b0110), target=SM90).device_source
    assert "if (((6 >> tl_cluster_ctarank()) & 1) == 1) {" in source
    assert "((((int)blockIdx.x) + 1) - (((int)blockIdx.x) & 3))" in source  # the leader's column block


def test_a_multicast_follows_named_coordinates_and_refuses_what_it_cannot_follow():
    """`col = bx * 32` before the copy: the receivers must address the leader's column block
    through it too (a name left as it was would load each block's own tile)."""
    @T.prim_func
    def named(A: T.Tensor((64, 256), T.float16), B: T.Tensor((64, 256), T.float16)):
        with T.ClusterKernel(8, threads=128, cluster_dims=(4, 1, 1)) as bx:
            col = bx * 32
            tile = T.alloc_shared((64, 32), T.float16)
            T.copy_cluster(A[0, col], tile, cluster_mask=0b0110)
            T.copy(tile, B[0, bx * 32])

    source = tilelang.lower(named, target=SM90).device_source
    assert "((((int)blockIdx.x) + 1) - (((int)blockIdx.x) & 3))" in source
    with pytest.raises(LanguageError, match=r"T.copy_cluster\(..., cluster_mask=...\): the tile of 'A' is addressed "
                                            r"through 'col', whose value in the leading block cannot be followed"):
        @T.prim_func
        def through_a_variable(A: T.Tensor((64, 256), T.float16), B: T.Tensor((64, 256), T.float16)):
            with T.ClusterKernel(8, threads=128, cluster_dims=(4, 1, 1)) as bx:
                col = T.alloc_var(T.int32)
                col = bx * 32
                tile = T.alloc_shared((64, 32), T.float16)
                T.copy_cluster(A[0, col], tile, cluster_mask=0b0110)
                T.copy(tile, B[0, bx * 32])


def test_a_tma_copy_multicast_is_each_receivers_tma_load_of_the_leaders_tile_on_its_own_barrier():
    """T.tma_copy(..., barrier=bars[slot], cluster_mask=0b0110): ranks 1 and 2 load rank 1's
    column block, each with its own TMA load completing its own barrier."""
    source = tilelang.lower(cluster_tma_multicast(mask=0b0110), target=SM90).device_source
    body = source[source.index('extern "C" __global__'):]
    assert "if (((6 >> tl_cluster_ctarank()) & 1) == 1) {" in body
    assert "condval = ((((int)blockIdx.x) + 1) - (((int)blockIdx.x) & 3));" in body  # the leader's column block
    assert body.count("tl_tma_load_2d(") == 2  # the two slots of the ring
    assert "(condval * 32), (k * 64));" in body
    with pytest.raises(LanguageError, match=r"T.tma_copy\(\.\.\., cluster_mask=...\) is only valid inside a "
                                            r"T.ClusterKernel frame"):
        @T.prim_func
        def plain(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1, threads=128):
                tile = T.alloc_shared((64, 64), T.float16)
                bar = T.alloc_barrier(128)
                T.tma_copy(A, tile, barrier=bar, cluster_mask=1)
    with pytest.raises(LanguageError, match=r"T.tma_copy\(shared, global, cluster_mask=...\): a multicast loads"):
        @T.prim_func
        def store(A: T.Tensor((64, 64), T.float16)):
            with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)):
                tile = T.alloc_shared((64, 64), T.float16)
                T.tma_copy(tile, A, cluster_mask=0b11)


@needs_nvcc
@pytest.mark.parametrize("name", [*DSMEM_KERNELS, "ring", "multicast", "tma_multicast"])
def test_nvcc_compiles_cluster_copies(name):
    kernel = {"ring": cluster_ring, "multicast": cluster_multicast, "tma_multicast": cluster_tma_multicast}.get(
        name, DSMEM_KERNELS.get(name, (None,))[0])()
    source = tilelang.lower(kernel, target=SM90).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", f"dsmem_{name}")[:4] == b"\x7fELF"


def test_cluster_copies_are_refused_clearly():
    with pytest.raises(LanguageError, match=r"T.copy_cluster\(..., cluster_mask=16\): a mask of the cluster's 4 "
                                            r"block ranks, an int from 1 to 15"):
        cluster_multicast(mask=16)
    with pytest.raises(LanguageError, match=r"T.copy_cluster: the source 'A' is in global memory; it copies a shared "
                                            r"tile into another block's shared tile"):
        @T.prim_func
        def from_global(A: T.Tensor((64,), T.float32)):
            with T.ClusterKernel(2, threads=64, cluster_dims=(2, 1, 1)):
                tile = T.alloc_shared((64,), T.float32)
                T.copy_cluster(A, tile, dst_block=1)
    with pytest.raises(LanguageError, match=r"T.copy_cluster\(src, dst\): name the block of the cluster that "
                                            r"receives the tile, dst_block=k"):
        @T.prim_func
        def no_block(A: T.Tensor((64,), T.float32)):
            with T.ClusterKernel(2, threads=64, cluster_dims=(2, 1, 1)):
                tile = T.alloc_shared((64,), T.float32)
                other = T.alloc_shared((64,), T.float32)
                T.copy_cluster(tile, other)
    with pytest.raises(LanguageError, match=r"T.copy_cluster is only valid inside a T.ClusterKernel frame"):
        @T.prim_func
        def plain_kernel(A: T.Tensor((64,), T.float32)):
            with T.Kernel(2, threads=64):
                tile = T.alloc_shared((64,), T.float32)
                other = T.alloc_shared((64,), T.float32)
                T.copy_cluster(tile, other, dst_block=1)
    # the CPU lowers the barriers (run in program order) but has no clusters
    with pytest.raises(LanguageError, match=r"kernel 'main' uses T.ClusterKernel\(cluster_dims=\(2, 1, 1\)\): "
                                            r"thread-block clusters, which target backend 'cpu' does not compile; "
                                            r"target backend 'cuda' does"):
        tilelang.compile(cluster_copy_1d(barrier=False), target="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
@pytest.mark.parametrize("name", list(DSMEM_KERNELS))
def test_cluster_copies_on_the_gpu(backend, name):
    torch = pytest.importorskip("torch")
    make, shape = DSMEM_KERNELS[name]
    kernel = tilelang.compile(make(), out_idx=[1], target="cuda", execution_backend=backend)
    for trial in range(10):
        a = torch.arange(trial, trial + torch.Size(shape).numel(), dtype=torch.float32, device="cuda").reshape(shape)
        assert torch.equal(kernel(a), a)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_a_ring_of_cluster_copies_on_the_gpu(backend):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(cluster_ring(), out_idx=[1], target="cuda", execution_backend=backend)
    for _ in range(20):
        a = torch.randn(64, 64, dtype=torch.float16, device="cuda")
        # block b receives block b-1's rows (its cluster's previous rank: rows are 8 per block)
        blocks = a.reshape(2, 4, 8, 64)
        assert torch.equal(kernel(a), torch.roll(blocks, 1, dims=1).reshape(64, 64))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
@pytest.mark.parametrize("mask", [0b0011, 0b0110, 0b1111, 0b1000])
def test_a_multicast_on_the_gpu(backend, mask):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(cluster_multicast(mask=mask), out_idx=[1], target="cuda", execution_backend=backend)
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    assert torch.equal(kernel(a), multicast_reference(a, mask=mask))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
@pytest.mark.parametrize("mask", [0b0011, 0b0110, 0b1111])
def test_a_tma_copy_multicast_on_the_gpu(backend, mask):
    torch = pytest.importorskip("torch")
    if backend == "cython":  # its launcher encodes no TMA tensor maps (any T.tma_copy)
        with pytest.raises(CompileError, match=r"T.tma_copy needs TMA tensor maps, which the kernel's host code "
                                               r"encodes before the launch; .* execution_backend='tvm_ffi'"):
            tilelang.compile(cluster_tma_multicast(mask=mask), out_idx=[1], target="cuda", execution_backend=backend)
        return
    kernel = tilelang.compile(cluster_tma_multicast(mask=mask), out_idx=[1], target="cuda",
                              execution_backend=backend)
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    assert torch.equal(kernel(a), multicast_reference(a, mask=mask))
