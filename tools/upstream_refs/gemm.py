"""The GEMM family's references: plain, split-K, stream-K, block-sparse, fp8, grouped, convolution,
the dequantizing GEMM / GEMV (int4, fp4) and the GEMV kernels. Sums in float64 (the kernels
accumulate in float32), rounded once as the kernel stores its output."""

from __future__ import annotations

from typing import Any

from .common import mm64, randn


def gemm_nt_ref(a: Any, b: Any, *rest: Any) -> Any:
    """C = A B^T (B stored N x K), rounded once to A's dtype as the kernels store it."""
    return mm64(a, b.T).to(a.dtype)


def gemm_ref(a: Any, b: Any, *rest: Any) -> Any:
    """C = A B (B stored K x N), rounded once to A's dtype."""
    return mm64(a, b).to(a.dtype)


def splitk_atomic_inputs(gen: Any, m: int = 256, n: int = 256, k: int = 256) -> list:
    """A, B (fp16) and a C that is not zero: the split-K kernel atomically adds every K slice
    of A B into C, so C's first values must survive."""
    return [randn(gen, m, k, dtype="float16"), randn(gen, k, n, dtype="float16"), randn(gen, m, n)]


def splitk_atomic_ref(a: Any, b: Any, c: Any) -> Any:
    """C + A B, in float64 (C is float32, the kernel adds float32 partial sums into it)."""
    return c.double() + mm64(a, b)


def streamk_inputs(gen: Any) -> list:
    """example_tilelang_gemm_streamk's operands at the module's fixed sizes (m, n, k = 256,
    1024, 512: its kernel reads the stream-K split from module globals, so the sizes cannot
    shrink): A (m, k), B (n, k) uniform in [-1, 1) as the module makes them, C zeroed
    (partial tiles are atomically added into it)."""
    import torch

    a = torch.rand(256, 512, generator=gen).half() * 2 - 1
    b = torch.rand(1024, 512, generator=gen).half() * 2 - 1
    return [a, b, torch.zeros(256, 1024)]


def streamk_ref(a: Any, b: Any, c: Any) -> Any:
    """C = A B^T in float64 (C is float32)."""
    return mm64(a, b.T)


def blocksparse_inputs(gen: Any, m: int = 256, n: int = 256, k: int = 128, bm: int = 128, bn: int = 128,
                       bk: int = 32) -> list:
    """A, B and a block mask (M/bm, N/bn, K/bk) with about half the K blocks kept, the first
    output tile's all dropped (a tile that only clears and stores)."""
    import torch

    mask = torch.rand(m // bm, n // bn, k // bk, generator=gen) > 0.5
    mask[0, 0] = False
    mask[-1, -1, 0] = True
    return [randn(gen, m, k, dtype="float16"), randn(gen, k, n, dtype="float16"), mask]


def blocksparse_ref(a: Any, b: Any, mask: Any) -> Any:
    """Each (bm, bn) tile of C: the sum over the K blocks its mask keeps of A's block times
    B's block, in float64, rounded once to fp16. The block sizes follow from the mask's shape."""
    import torch

    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = m // mask.shape[0], n // mask.shape[1], k // mask.shape[2]
    keep = mask.repeat_interleave(bk, 2)  # (M/bm, N/bn, K)
    out = torch.zeros(m, n, dtype=torch.float64)
    for i in range(mask.shape[0]):
        for j in range(mask.shape[1]):
            cols = keep[i, j]
            out[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] = (
                a[i * bm:(i + 1) * bm, cols].double() @ b[cols, j * bn:(j + 1) * bn].double())
    return out.half()


def fp8_gemm_inputs(gen: Any, dtype: str, m: int = 128, n: int = 256, k: int = 192) -> list:
    """A (m, k) and B (n, k): standard normals rounded to the fp8 dtype."""
    import torch

    return [torch.randn(m, k, generator=gen).to(getattr(torch, dtype)),
            torch.randn(n, k, generator=gen).to(getattr(torch, dtype))]


def fp8_gemm_ref(a: Any, b: Any) -> Any:
    """C = A B^T (the fp8 values exactly, summed in float64), rounded once to the fp8 dtype,
    which the kernel's C is."""
    return mm64(a, b.T).to(a.dtype)


def grouped_gemm_inputs(gen: Any, sizes: tuple = (63, 77, 20), k: int = 64, n: int = 96, block_m: int = 64) -> list:
    """example_grouped_gemm_fwd's arguments: the groups' rows of A stacked (sum(sizes), K),
    B (groups, K, N), and the int32 sizes, offsets and block_M-padded offsets, as its
    construct_inputs makes them (sizes not multiples of block_M: tiles that straddle groups)."""
    import torch

    offsets, padded = [0], [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
        padded.append(padded[-1] + -(-size // block_m) * block_m)
    as_int = lambda v: torch.tensor(v, dtype=torch.int32)
    return [randn(gen, sum(sizes), k, dtype="float16"), randn(gen, len(sizes), k, n, dtype="float16"),
            as_int(list(sizes)), as_int(offsets), as_int(padded)]


def grouped_gemm_ref(a: Any, b: Any, sizes: Any, *_: Any) -> Any:
    """Each group's rows of A times its B, in float64, rounded once to fp16."""
    import torch

    rows = torch.repeat_interleave(torch.arange(len(sizes)), sizes.long())
    return torch.einsum("mk,mkn->mn", a.double(), b.double()[rows]).half()


def conv_ref(stride: int = 1, padding: int = 1, dilation: int = 1) -> Any:
    """The NHWC x (KH, KW, C, F) convolution, in float64, rounded once to fp16."""
    def ref(data: Any, kernel: Any) -> Any:
        import torch

        out = torch.nn.functional.conv2d(data.double().permute(0, 3, 1, 2), kernel.double().permute(3, 2, 0, 1),
                                         stride=stride, padding=padding, dilation=dilation)
        return out.permute(0, 2, 3, 1).half()
    return ref


def int4_gemv_inputs(gen: Any, m: int = 2, n: int = 64, k: int = 512) -> list:
    """dequantize_gemv's A (m, k) fp16, B (n, k / 2) int8 (two int4 a byte) and C.
    A holds -1, 0, 1 so that the kernel's fp16 accumulation is exact (partial sums are
    small integers): the check is then independent of the summation order."""
    import torch

    a = torch.randint(-1, 2, (m, k), generator=gen).half()
    b = torch.randint(-128, 128, (n, k // 2), generator=gen).to(torch.int8)
    return [a, b, torch.zeros(m, n, dtype=torch.float16)]


def int4_gemv_ref(a: Any, b: Any, c: Any) -> Any:
    """C = A B^T with B's element 2j+p the signed 4-bit field p (low nibble first) of byte j,
    as the example's _tir_packed_int_to_int_convert("int", 8) reads it (sign-extended)."""
    import torch

    nib = torch.stack((b.int() & 0xF, (b.int() >> 4) & 0xF), -1).reshape(b.shape[0], -1)
    nib = torch.where(nib >= 8, nib - 16, nib)
    return (a.double() @ nib.double().T).half()


def fp4_gemm_inputs(gen: Any, m: int = 128, n: int = 256, k: int = 256) -> list:
    """example_dequant_gemm_fp4_hopper's A (m, k) fp16 and B (n, k / 2) uint8 (two fp4 a byte)."""
    import torch

    return [randn(gen, m, k, dtype="float16"), torch.randint(0, 256, (n, k // 2), generator=gen).to(torch.uint8)]


def fp4_gemm_ref(a: Any, b: Any) -> Any:
    """Ct = B A^T (N x M), B's element 2j+p the s1e2m1 field p (low nibble first) of byte j
    read as the example's _tir_u8_to_f4_to_f16 does: (-1)^s 2^(e-1) (1 + m/2) -- e = 0 is
    not zero there (the fp16 exponent is e + 14 always); float64 sums, fp16 once."""
    import torch

    nib = torch.stack((b.int() & 0xF, b.int() >> 4), -1).reshape(b.shape[0], -1)
    sign, exp, man = nib >> 3, (nib >> 1) & 3, nib & 1
    value = (1 - 2 * sign).double() * torch.pow(2.0, exp.double() - 1) * (1 + man.double() / 2)
    return (value @ a.double().T).half()


def gemv_ref(a: Any, b: Any) -> Any:
    """example_gemv's C = B A (A the vector (K,), B (N, K)), float64, fp16 once."""
    return (b.double() @ a.double()).half()


def gemv_reducer_ref(a: Any, x: Any) -> Any:
    """gemv_alloc_reducer's o = a x: each product a[i, j] x[j] is an fp16 multiply (the kernel
    multiplies its fp16 fragments) then summed in float (float64 here), fp16 once."""
    return (a * x).double().sum(-1).half()
