"""Distributed shared memory kernels (``T.copy_cluster``), upstream's test_tma_dsmem shapes:
block 0 of a cluster of two fills a shared tile from ``A`` and copies it (or a slice of a
wider one) into block 1's shared memory, which writes it to ``B`` once the copy's barrier
completes (or after a cluster barrier); and a ring in which every block of a cluster of
four sends its tile to the next one. ``B`` equals ``A`` (the ring: the previous block's
rows of ``A``). And upstream's TMA multicast demo: the blocks of a cluster whose rank is in
the mask copy the tile of the lowest of them."""

from __future__ import annotations

from typing import Any

import tilelang.language as T


def cluster_copy_1d(n: int = 128, barrier: bool = True) -> Any:
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)) as pid:
            s_src = T.alloc_shared((n,), T.float32)
            s_dst = T.alloc_shared((n,), T.float32)
            bars = T.alloc_cluster_barrier([1])
            T.fill(s_src, 0.0)
            T.fill(s_dst, 0.0)
            T.cluster_sync()
            if pid == 0:
                for i in T.Parallel(n):
                    s_src[i] = A[i]
                if barrier:
                    T.copy_cluster(s_src, s_dst, dst_block=1, remote_barrier=bars[0])
                else:
                    T.copy_cluster(s_src, s_dst, dst_block=1)
            if not barrier:
                T.cluster_sync()  # orders the remote stores before block 1's reads
            if pid == 1:
                if barrier:
                    T.mbarrier_wait_parity(bars[0], 0)
                for i in T.Parallel(n):
                    B[i] = s_dst[i]

    return main


def cluster_copy_2d(m: int = 4, n_full: int = 64, n: int = 32) -> Any:
    """A [0:m, 0:n] slice of [m, n_full] tiles: rows apart in shared memory."""
    @T.prim_func
    def main(A: T.Tensor((m, n), T.float32), B: T.Tensor((m, n), T.float32)):
        with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)) as pid:
            s_src = T.alloc_shared((m, n_full), T.float32)
            s_dst = T.alloc_shared((m, n_full), T.float32)
            bars = T.alloc_cluster_barrier([1])
            T.fill(s_src, 0.0)
            T.fill(s_dst, 0.0)
            T.cluster_sync()
            if pid == 0:
                for i, j in T.Parallel(m, n):
                    s_src[i, j] = A[i, j]
                T.copy_cluster(s_src[0:m, 0:n], s_dst[0:m, 0:n], dst_block=1, remote_barrier=bars[0])
            if pid == 1:
                T.mbarrier_wait_parity(bars[0], 0)
                for i, j in T.Parallel(m, n):
                    B[i, j] = s_dst[i, j]

    return main


def cluster_copy_3d(d: int = 2, m: int = 4, n_full: int = 32, n: int = 16) -> Any:
    @T.prim_func
    def main(A: T.Tensor((d, m, n), T.float32), B: T.Tensor((d, m, n), T.float32)):
        with T.ClusterKernel(2, threads=d * m * n, cluster_dims=(2, 1, 1)) as pid:
            s_src = T.alloc_shared((d, m, n_full), T.float32)
            s_dst = T.alloc_shared((d, m, n_full), T.float32)
            bars = T.alloc_cluster_barrier([1])
            T.fill(s_src, 0.0)
            T.fill(s_dst, 0.0)
            T.cluster_sync()
            if pid == 0:
                for x, i, j in T.Parallel(d, m, n):
                    s_src[x, i, j] = A[x, i, j]
                T.copy_cluster(s_src[0:d, 0:m, 0:n], s_dst[0:d, 0:m, 0:n], dst_block=1, remote_barrier=bars[0])
            if pid == 1:
                T.mbarrier_wait_parity(bars[0], 0)
                for x, i, j in T.Parallel(d, m, n):
                    B[x, i, j] = s_dst[x, i, j]

    return main


def cluster_ring(blocks: int = 8, cluster: int = 4, rows: int = 8, cols: int = 64, dtype: str = T.float16) -> Any:
    """Every block copies rows [rows * bx, rows * (bx + 1)) of A into a shared tile, sends it
    to the next block of its cluster, and writes what it received from the previous one."""
    @T.prim_func
    def main(A: T.Tensor((blocks * rows, cols), dtype), B: T.Tensor((blocks * rows, cols), dtype)):
        with T.ClusterKernel(blocks, threads=128, cluster_dims=(cluster, 1, 1)) as bx:
            mine = T.alloc_shared((rows, cols), dtype)
            received = T.alloc_shared((rows, cols), dtype)
            bars = T.alloc_cluster_barrier([1])
            rank = T.block_rank_in_cluster()
            T.copy(A[bx * rows, 0], mine)
            T.cluster_sync()  # every block's barrier is initialized before anyone arrives on it
            T.copy_cluster(mine, received, dst_block=(rank + 1) % cluster, remote_barrier=bars[0])
            T.mbarrier_wait_parity(bars[0], 0)
            T.copy(received, B[bx * rows, 0])
            T.cluster_sync()  # no block exits while another may still store into its shared memory

    return main


def cluster_multicast(m: int = 256, n: int = 256, block_m: int = 64, block_n: int = 32, mask: int = 0b0011,
                      cluster: int = 4) -> Any:
    """Upstream's test_tma_multicast_demo: each block copies its tile of A to B through shared
    memory, loaded with T.copy_cluster(..., cluster_mask=mask)."""
    @T.prim_func
    def main(A: T.Tensor((m, n), T.float16), B: T.Tensor((m, n), T.float16)):
        with T.ClusterKernel(T.ceildiv(n, block_n), T.ceildiv(m, block_m), threads=128,
                             cluster_dims=(cluster, 1, 1)) as (bx, by):
            tile = T.alloc_shared((block_m, block_n), T.float16)
            T.copy_cluster(A[by * block_m, bx * block_n], tile, cluster_mask=mask)
            T.copy(tile, B[by * block_m, bx * block_n])

    return main


def cluster_tma_multicast(m: int = 256, n: int = 256, block_m: int = 64, block_n: int = 32, mask: int = 0b0011,
                          cluster: int = 4, slots: int = 2) -> Any:
    """Upstream's test_tma_copy_cluster_mask_multicast with the tile chosen by the block: each
    block walks the row blocks of its column block through a ring of ``slots`` shared tiles,
    loading each with T.tma_copy(..., barrier=, cluster_mask=mask) and waiting on the slot's
    barrier (every slot reused under both parities); writes what multicast_reference says."""
    @T.prim_func
    def main(A: T.Tensor((m, n), T.float16), B: T.Tensor((m, n), T.float16)):
        with T.ClusterKernel(T.ceildiv(n, block_n), threads=128, cluster_dims=(cluster, 1, 1)) as bx:
            tiles = T.alloc_shared((slots, block_m, block_n), T.float16)
            bars = T.alloc_barrier([128] * slots)
            for k in T.serial(m // block_m):
                slot = k % slots
                T.tma_copy(A[k * block_m:(k + 1) * block_m, bx * block_n:(bx + 1) * block_n], tiles[slot, :, :],
                           barrier=bars[slot], cluster_mask=mask)
                T.mbarrier_arrive(bars[slot])
                T.mbarrier_wait_parity(bars[slot], (k // slots) % 2)
                T.copy(tiles[slot, :, :], B[k * block_m:(k + 1) * block_m, bx * block_n:(bx + 1) * block_n])

    return main


def multicast_reference(a: Any, block_m: int = 64, block_n: int = 32, mask: int = 0b0011, cluster: int = 4) -> Any:
    """What cluster_multicast writes: block (bx, by) gets the tile of the cluster's lowest
    rank in ``mask`` when its own rank is in it, else its own tile."""
    out = a.clone()
    leader = (mask & -mask).bit_length() - 1
    for bx in range(a.shape[1] // block_n):
        if (mask >> (bx % cluster)) & 1:
            src = bx - bx % cluster + leader
            out[:, bx * block_n:(bx + 1) * block_n] = a[:, src * block_n:(src + 1) * block_n]
    return out
