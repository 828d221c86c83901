"""``T.im2col`` (upstream also spells it ``T.c2d_im2col``): one tile of the im2col matrix of
a 2-d convolution, written as a T.Parallel nest that every backend maps like any other.

The image is NHWC, (N, H, W, C). Row ``m`` of the im2col matrix is an output pixel
``(n, oh, ow)`` in row-major order; column ``k`` is a filter tap and channel
``(kh, kw, c)`` in row-major order, which matches a (KH, KW, C, F) filter seen as a
(KH*KW*C, F) matrix. The tile ``col`` of shape (bM, bK) holds rows ``nhw_step * bM ...``
and columns ``c_step * bK ...``; taps that fall in the padding, and rows or columns past
the matrix, read as zero.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .loop import Parallel


def im2col(img: Any, col: Any, nhw_step: Any, c_step: Any, kernel: int, stride: int, dilation: int,
           pad: int, eviction_policy: Any = None, annotations: Any = None) -> None:
    del eviction_policy, annotations  # cache hints: no effect on the values
    if not (isinstance(img, tirx.Buffer) and len(img.shape) == 4):
        raise LanguageError("T.im2col: img must be a 4-d (N, H, W, C) tensor")
    if not (isinstance(col, tirx.Buffer) and len(col.shape) == 2):
        raise LanguageError("T.im2col: col must be a 2-d (block_M, block_K) tile")
    for name, value in (("kernel", kernel), ("stride", stride), ("dilation", dilation)):
        if not isinstance(value, int) or value < 1:
            raise LanguageError(f"T.im2col: {name} must be a positive int, got {value!r}")
    if not isinstance(pad, int) or pad < 0:
        raise LanguageError(f"T.im2col: pad must be a non-negative int, got {pad!r}")
    n_img, height, width, channels = img.shape
    out_h = (height + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    out_w = (width + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    block_m, block_k = col.shape
    rows, cols = n_img * out_h * out_w, kernel * kernel * channels
    zero = tirx.const(0, str(img.dtype))
    with Parallel(block_m, block_k) as (i, j):
        m = nhw_step * block_m + i
        k = c_step * block_k + j
        n, oh, ow = m // (out_h * out_w), (m // out_w) % out_h, m % out_w
        kh, kw, c = k // (kernel * channels), (k // channels) % kernel, k % channels
        h = oh * stride + kh * dilation - pad
        w = ow * stride + kw * dilation - pad
        inside = tirx.all(m < rows, k < cols, h >= 0, h < height, w >= 0, w < width)
        value = tirx.if_then_else(inside, tirx.BufferLoad(img, [n, h, w, c]), zero)
        _ib.buffer_store(col, tirx.Cast(str(col.dtype), value) if str(col.dtype) != str(img.dtype) else value,
                         [i, j])


c2d_im2col = im2col
