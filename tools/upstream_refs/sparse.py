"""gemm_sp's 2:4 structured-sparse GEMM: inputs compressed by the testing kit, the dense reference."""

from __future__ import annotations

from typing import Any

from .common import randn


def sparse_gemm_inputs(gen: Any, m: int = 128, n: int = 128, k: int = 128) -> list:
    """gemm_sp's arguments: A 2:4 sparse (two of each four along K kept), compressed by the
    testing kit's compressor (written from the format, not upstream's), with int16 metadata;
    B dense. The dense A travels as a fourth list item for the reference only."""
    import numpy as np
    import torch
    from tilelang.testing.sparse import compress, semi_sparse

    rng = np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=gen)))
    dense = semi_sparse(rng, m, k, "float16").astype(np.float16)
    a_sparse, e = compress(dense.astype(np.float32), "float16", "int16")
    return [torch.from_numpy(a_sparse.astype(np.float16)), torch.from_numpy(e), randn(gen, k, n, dtype="float16")]


def sparse_gemm_ref(a_sparse: Any, e: Any, b: Any) -> Any:
    """C = A @ B in float32, A rebuilt from (A_sparse, E): each 4-bit chunk of E (lowest
    first) gives the positions of its group's two kept values."""
    import torch

    m, half = a_sparse.shape
    k = 2 * half
    words = e.to(torch.int64) & 0xFFFF
    dense = torch.zeros(m, k, dtype=torch.float64)
    for g in range(k // 4):
        chunk = (words[:, g * 4 // 16] >> (4 * (g % 4))) & 0xF
        for slot in range(2):
            pos = (chunk >> (2 * slot)) & 3
            dense[torch.arange(m), g * 4 + pos] += a_sparse[:, 2 * g + slot].double()
    return (dense @ b.double()).float()
