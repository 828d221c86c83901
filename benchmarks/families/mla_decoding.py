"""mla_decoding: DeepSeek MLA decode attention (one query token per sequence, 128 heads that
share one latent KV cache of dim 512 plus a 64-dim rotary part; FlashMLA's shape) with a
split-KV kernel in the manner of upstream's example_mla_decode.py: blocks of block_H heads
scan their share of the cache with an online softmax and write partial outputs plus
log2-sum-exp, then a second kernel combines the splits. Against
F.scaled_dot_product_attention on the concatenated [latent, rope] keys (built once, outside
the timing). Memory-bound: GB/s counts the cache, queries and output once.

Two ways to hold the 64 x 512 fp32 output tile. With 4 warps each owns whole rows (16 per
warp, all columns), which would take 256 registers a thread: so a block owns a block_D
slice of the 512 output columns and recomputes the (cheap to reread, L2-resident) scores
of its rows, the score GEMMs running dim / block_D times. With 8 warps and block_D = dim,
as upstream's example, the warps also split the columns (a row family split over columns:
the row max and sum meet across warps in shared memory, P goes to the second GEMM through
a shared tile); the cache tile is then the values too."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant

SHAPES = ((64, 128, 8192, 512, 64), (128, 128, 8192, 512, 64))  # batch, heads, kv_len, dim, pe_dim
# block_H, block_N, block_D, threads, num_split
CONFIGS = ((64, 32, 128, 128, 1), (64, 32, 256, 128, 1), (64, 32, 128, 128, 2), (64, 32, 512, 256, 1),
           (64, 64, 512, 256, 1))
LOG2E = 1.44269504
SMALL_SHAPE, SMALL_CONFIG = (2, 64, 128, 128, 64), (64, 32, 64, 128, 2)  # the CPU check's: 2 slices, 2 splits
LSE_COLS = 32  # the row family writes row values as (rows, 32) tiles (16 per warp); column 0 is read back


def split_kernel(batch, heads, kv_len, dim, pe_dim, block_H, block_N, block_D, threads, num_split):
    scale = (dim + pe_dim) ** -0.5 * LOG2E
    part = kv_len // num_split  # cases are chosen so that it divides
    dtype, accum = "float16", "float32"

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, kv_len, dim], dtype), K_pe: T.Tensor([batch, kv_len, pe_dim], dtype),
             O_part: T.Tensor([batch, heads, num_split, dim], accum),
             Lse: T.Tensor([batch, heads, num_split, LSE_COLS], accum)):
        # x: the output column slice, fastest, so blocks that read the same cache rows run together
        with T.Kernel(dim // block_D, heads // block_H, batch * num_split, threads=threads) as (dx, hx, bs):
            bz = bs // num_split
            sx = bs % num_split
            q_s = T.alloc_shared([block_H, dim], dtype)
            qpe_s = T.alloc_shared([block_H, pe_dim], dtype)
            kv_s = T.alloc_shared([block_N, dim], dtype)
            kpe_s = T.alloc_shared([block_N, pe_dim], dtype)
            if block_D == dim:
                v_s = kv_s  # the whole latent row: the cache tile is the values
            else:
                v_s = T.alloc_shared([block_N, block_D], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum)
            p = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, block_D], accum)
            lse = T.alloc_fragment([block_H, LSE_COLS], accum)
            row_max = T.alloc_fragment([block_H], accum)
            row_max_prev = T.alloc_fragment([block_H], accum)
            rescale = T.alloc_fragment([block_H], accum)
            row_sum = T.alloc_fragment([block_H], accum)
            denom = T.alloc_fragment([block_H], accum)

            T.copy(Q[bz, hx * block_H:(hx + 1) * block_H, :], q_s)
            T.copy(Q_pe[bz, hx * block_H:(hx + 1) * block_H, :], qpe_s)
            T.fill(acc_o, 0)
            T.fill(denom, 0)
            T.fill(row_max, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(part, block_N), num_stages=2):
                # (the row offset is spelled out: a name bound inside a pipelined loop is a
                # variable the stage ring's prefetches would read before it is set)
                T.copy(KV[bz, sx * part + k * block_N:sx * part + (k + 1) * block_N, :], kv_s)
                T.copy(K_pe[bz, sx * part + k * block_N:sx * part + (k + 1) * block_N, :], kpe_s)
                if block_D != dim:
                    T.copy(KV[bz, sx * part + k * block_N:sx * part + (k + 1) * block_N,
                              dx * block_D:(dx + 1) * block_D], v_s)
                T.clear(acc_s)
                # the score is the latent part plus the rotary part: two GEMMs into one tile
                T.gemm(q_s, kv_s, acc_s, transpose_B=True)
                T.gemm(qpe_s, kpe_s, acc_s, transpose_B=True)
                T.copy(row_max, row_max_prev)
                T.reduce_max(acc_s, row_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2(row_max_prev[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_H):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_H, block_D):
                    acc_o[i, j] *= rescale[i]
                T.copy(acc_s, p)
                T.gemm(p, v_s, acc_o)  # the latent cache is the values too
            for i, j in T.Parallel(block_H, block_D):
                acc_o[i, j] /= denom[i]
            for i, j in T.Parallel(block_H, LSE_COLS):  # log2 of the split's softmax denominator
                lse[i, j] = T.log2(denom[i]) + row_max[i] * scale
            T.copy(acc_o, O_part[bz, hx * block_H:(hx + 1) * block_H, sx, dx * block_D:(dx + 1) * block_D])
            T.copy(lse, Lse[bz, hx * block_H:(hx + 1) * block_H, sx, :])

    return main


def combine_kernel(batch, heads, dim, num_split, threads=128):
    """out = sum_s O_part[s] * 2^(lse[s] - log2 sum_t 2^lse[t]), one block per (head, batch)."""
    accum = "float32"

    @T.prim_func
    def main(O_part: T.Tensor([batch, heads, num_split, dim], accum), Lse: T.Tensor([batch, heads, num_split, LSE_COLS], accum),
             Out: T.Tensor([batch, heads, dim], "float16")):
        with T.Kernel(heads, batch, threads=threads) as (hx, bz):
            lse_max = T.alloc_local([1], accum)
            total = T.alloc_local([1], accum)
            acc = T.alloc_fragment([dim], accum)
            lse_max[0] = -T.infinity(accum)
            for s in T.serial(num_split):
                lse_max[0] = T.max(lse_max[0], Lse[bz, hx, s, 0])
            total[0] = 0.0
            for s in T.serial(num_split):
                total[0] += T.exp2(Lse[bz, hx, s, 0] - lse_max[0])
            T.clear(acc)
            for s in T.serial(num_split):
                for j in T.Parallel(dim):
                    acc[j] += O_part[bz, hx, s, j] * (T.exp2(Lse[bz, hx, s, 0] - lse_max[0]) / total[0])
            for j in T.Parallel(dim):
                Out[bz, hx, j] = T.cast(acc[j], "float16")

    return main


def _variant(shape: tuple, config: tuple) -> Variant:
    batch, heads, _, dim, _ = shape
    block_H, block_N, block_D, threads, num_split = config

    def launch(kernels: list, t: dict):
        o_part, lse = t[f"o_part{num_split}"], t[f"lse{num_split}"]
        kernels[0](t["q"], t["q_pe"], t["kv"], t["k_pe"], o_part, lse)
        kernels[1](o_part, lse, t["out"])
        return t["out"]

    return Variant(f"bH{block_H}/bN{block_N}/bD{block_D}/t{threads}/split{num_split}", lambda: [
        KernelSpec(split_kernel(*shape, *config)), KernelSpec(combine_kernel(batch, heads, dim, num_split))], launch)


def _inputs(batch: int, heads: int, kv_len: int, dim: int, pe_dim: int, splits: tuple, device: str) -> dict:
    import torch

    def randn(*shape):
        return torch.randn(*shape, device=device, dtype=torch.float16)

    t = {"q": randn(batch, heads, dim), "q_pe": randn(batch, heads, pe_dim), "kv": randn(batch, kv_len, dim),
         "k_pe": randn(batch, kv_len, pe_dim), "out": torch.empty(batch, heads, dim, device=device, dtype=torch.float16)}
    # SDPA's layout [batch, 1 kv head, len, dim]: the query heads are the query rows of one head
    t["query"] = torch.cat([t["q"], t["q_pe"]], dim=-1).unsqueeze(1)
    t["key"] = torch.cat([t["kv"], t["k_pe"]], dim=-1).unsqueeze(1)
    t["value"] = t["kv"].unsqueeze(1)
    for n in splits:  # each variant's partial outputs, by its split count
        t[f"o_part{n}"] = torch.empty(batch, heads, n, dim, device=device, dtype=torch.float32)
        t[f"lse{n}"] = torch.empty(batch, heads, n, LSE_COLS, device=device, dtype=torch.float32)
    return t


def _reference(t: dict):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(t["query"], t["key"], t["value"]).squeeze(1)


def make_case(shape: tuple, configs: tuple, device: str = "cuda") -> Case:
    batch, heads, kv_len, dim, pe_dim = shape
    splits = tuple(sorted({c[4] for c in configs}))
    nbytes = 2.0 * (batch * kv_len * (dim + pe_dim) + batch * heads * (2 * dim + pe_dim))
    return Case("mla_decoding", f"b{batch}", {"batch": batch, "heads": heads, "kv_len": kv_len, "dim": dim,
                                              "pe_dim": pe_dim}, "GB/s", nbytes,
                [_variant(shape, c) for c in configs], lambda: _inputs(*shape, splits, device), None, _reference,
                atol=2e-3, rtol=1e-2, notes="memory-bound; 4-warp configs repeat the score GEMMs per output slice (module docstring)")


def cases(quick: bool) -> list[Case]:
    return [make_case(shape, CONFIGS[:2] if quick else CONFIGS) for shape in (SHAPES[:1] if quick else SHAPES)]


def small_cases() -> list[Case]:
    return [make_case(SMALL_SHAPE, (SMALL_CONFIG,), device="cpu")]
