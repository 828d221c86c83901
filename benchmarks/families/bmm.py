"""bmm: batched fp16 GEMM C[b] = A[b] @ B[b] (fp32 accumulation), one grid z-slice per batch
entry, against torch.bmm (cuBLAS's strided-batched GEMM)."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant, sm_count

# batch, M, N, K; the last one, with a long K, tells a per-tile cost (the ring's fill, the
# epilogue: about the same for any K) from the main loop's speed
SHAPES = ((16, 1024, 1024, 1024), (32, 2048, 2048, 512), (8, 2048, 2048, 4096))
SMALL_SHAPE = (2, 128, 256, 64)
# bM, bN, bK, threads, stages; 4-stage rings and the 2-blocks-per-SM 128x128 tile beside the
# canonical ones: with K of 512-1024 each tile has 8-16 iterations, so the fill and the epilogue
# weigh more, and a second resident block hides them; 128x128 over two consumer warpgroups
# (64 rows each) ran 16 x 1024^3 at 1.04x torch.bmm on the H200 in a paired scan, against 0.97x
# for 128x256, and within 1.2% of it in the families' run (docs/benchmarks/h200-2026-12-02-mask.md)
CONFIGS = ((128, 128, 32, 128, 3), (128, 128, 64, 128, 3), (128, 256, 64, 256, 3), (128, 128, 64, 128, 4),
           (128, 256, 64, 256, 4), (256, 128, 64, 256, 3), (128, 128, 64, 256, 3))


def bmm_kernel(batch, M, N, K, bM=128, bN=128, bK=32, threads=128, num_stages=3, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((batch, M, K), dtype), B: T.Tensor((batch, K, N), dtype),
             C: T.Tensor((batch, M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), batch, threads=threads) as (bx, by, bz):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                T.copy(A[bz, by * bM:(by + 1) * bM, k * bK:(k + 1) * bK], As)
                T.copy(B[bz, k * bK:(k + 1) * bK, bx * bN:(bx + 1) * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[bz, by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN])

    return main


# persistent: one block per SM walks the (batch x M tiles, N tiles) grid with upstream's
# T.PersistentTileScheduler, N fastest inside panels of 8 tile columns, C through a shared
# tile; the TMA ring runs on across tiles, so a tile's fill overlaps the previous epilogue.
# On the H200 (docs/benchmarks/h200-2026-12-02-scheduler.md) 128x256x64 ran 32x2048^2x512 at
# 0.918x torch.bmm against 0.880 for the family's best plain config in the same call, and
# 16x1024^3 at 0.979x; the panel order mattered (0.805 without panels), and so did the
# shared C tile (0.302 storing from the accumulators). Panels of 16 ran K=512 at 0.937 and
# 8 at 0.925 in a scan, 8 ahead at the other shapes (0.989 / 0.964 against 0.984 / 0.953)
PERSISTENT_CONFIGS = (((128, 256, 64, 256, 3), 8), ((128, 256, 64, 256, 3), 16))
PANEL = 8


def bmm_persistent_kernel(batch, M, N, K, bM=128, bN=256, bK=64, threads=256, num_stages=3, workers=132,
                          swizzle=PANEL, dtype="float16"):
    m_blocks, n_blocks = T.ceildiv(M, bM), T.ceildiv(N, bN)

    @T.prim_func
    def main(A: T.Tensor((batch, M, K), dtype), B: T.Tensor((batch, K, N), dtype),
             C: T.Tensor((batch, M, N), dtype)):
        with T.Kernel(workers, threads=threads) as block_id:
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            Cs = T.alloc_shared((bM, bN), dtype)
            sched = T.PersistentTileScheduler(batch * m_blocks, n_blocks, num_workers=workers, swizzle_size=swizzle)
            sched.init(block_id)
            while sched.valid():
                bz = sched.m_idx // m_blocks
                by = sched.m_idx % m_blocks
                bx = sched.n_idx
                T.clear(Cl)
                for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                    T.copy(A[bz, by * bM:(by + 1) * bM, k * bK:(k + 1) * bK], As)
                    T.copy(B[bz, k * bK:(k + 1) * bK, bx * bN:(bx + 1) * bN], Bs)
                    T.gemm(As, Bs, Cl)
                T.copy(Cl, Cs)
                T.copy(Cs, C[bz, by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN])
                sched.next_tile()

    return main


def _workers(device: str) -> int:
    """One block per SM (common.sm_count); the CPU check uses 3."""
    return 3 if device == "cpu" else sm_count()


def _inputs(b: int, m: int, n: int, k: int, device: str) -> dict:
    import torch

    return {"a": torch.randn(b, m, k, device=device, dtype=torch.float16),
            "b": (torch.randn(b, k, n, device=device) * k**-0.5).half(),  # outputs of order one
            "c": torch.empty(b, m, n, device=device, dtype=torch.float16)}


def _launch(kernels: list, t: dict):
    kernels[0](t["a"], t["b"], t["c"])
    return t["c"]


def _reference(t: dict):
    import torch

    return torch.bmm(t["a"], t["b"])


def make_case(shape: tuple, configs: tuple, device: str = "cuda", persistent: tuple = ()) -> Case:
    b, m, n, k = shape
    variants = [Variant("{}x{}x{}/t{}/s{}".format(*c), lambda c=c: [KernelSpec(bmm_kernel(*shape, *c))])
                for c in configs]
    variants += [Variant("persistent/{}x{}x{}/t{}/s{}/sw{}".format(*c, panel),
                         lambda c=c, p=panel: [KernelSpec(bmm_persistent_kernel(*shape, *c, workers=_workers(device),
                                                                                swizzle=p))])
                 for c, panel in persistent]
    return Case("bmm", f"{b}x{m}x{n}x{k}", {"batch": b, "M": m, "N": n, "K": k}, "TFLOP/s", 2.0 * b * m * n * k,
                variants, lambda: _inputs(*shape, device), _launch, _reference, atol=1e-2, rtol=1e-2)


def cases(quick: bool) -> list[Case]:
    return [make_case(shape, CONFIGS[:2] if quick else CONFIGS, persistent=() if quick else PERSISTENT_CONFIGS)
            for shape in (SHAPES[:1] if quick else SHAPES)]


def small_cases() -> list[Case]:
    # the persistent kernel with 128 x 64 tiles: 2 x 4 tiles of the small shape over 3 workers,
    # panels of 3 (the last one narrower)
    return [make_case(SMALL_SHAPE, CONFIGS[:1], device="cpu", persistent=(((128, 64, 32, 128, 2), 3),))]
