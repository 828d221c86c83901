"""Normalizations: RMS norm and layer norm (forward, backward)."""

from __future__ import annotations

from typing import Any

from .common import randn


def rms_ref(x: Any) -> Any:
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-12)


def layernorm_fwd_inputs(gen: Any, n: int = 8, d: int = 1024) -> list:
    """norm/layernorm's forward arguments: X, gamma, beta in bfloat16 (gamma, beta random so
    that both enter the output)."""
    return [randn(gen, n, d, dtype="bfloat16"), randn(gen, d, dtype="bfloat16"), randn(gen, d, dtype="bfloat16")]


def layernorm_fwd_ref(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> list:
    """Y (rounded to bfloat16 as the kernel stores it), Mean and Rstd (float32) of the kernel's
    one-pass formula: mean = E[x], rstd = 1 / sqrt(E[x^2] - mean^2 + eps), in float64."""
    import torch

    x64 = x.double()
    mean = x64.mean(-1)
    rstd = torch.rsqrt((x64 * x64).mean(-1) - mean * mean + eps)
    y = (x64 - mean[:, None]) * rstd[:, None] * gamma.double() + beta.double()
    return [y.to(torch.bfloat16), mean.float(), rstd.float()]


def layernorm_bwd_inputs(gen: Any, n: int = 64, d: int = 512) -> list:
    """norm/layernorm's backward arguments: dY, X, gamma (bfloat16), X's Mean and Rstd (float32,
    as the forward makes them), DGamma and DBeta zeroed (each block atomically adds into them)."""
    import torch

    dy, x, gamma = randn(gen, n, d, dtype="bfloat16"), randn(gen, n, d, dtype="bfloat16"), randn(gen, d, dtype="bfloat16")
    x64 = x.double()
    mean = x64.mean(-1)
    rstd = torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5)
    return [dy, x, gamma, mean.float(), rstd.float(), torch.zeros(d), torch.zeros(d)]


def layernorm_bwd_ref(dy: Any, x: Any, gamma: Any, mean: Any, rstd: Any, *_: Any) -> list:
    """DX (rounded to bfloat16), DGamma = sum over rows of dY x_hat, DBeta = sum of dY, in float64
    from the given Mean and Rstd: x_hat = (x - mean) rstd, dx_hat = dY gamma,
    DX = rstd (dx_hat - mean(dx_hat) - x_hat mean(dx_hat x_hat))."""
    import torch

    r = rstd.double()[:, None]
    x_hat = (x.double() - mean.double()[:, None]) * r
    dx_hat = dy.double() * gamma.double()
    dx = r * (dx_hat - dx_hat.mean(-1, keepdim=True) - x_hat * (dx_hat * x_hat).mean(-1, keepdim=True))
    return [dx.to(torch.bfloat16), (dy.double() * x_hat).sum(0), dy.double().sum(0)]
