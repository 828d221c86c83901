"""MFMA operand layouts and shared tiles for them, in upstream TileLang's spelling
(``tilelang.rocm.intrinsics.mfma_layout``).

A 16 x 16 x K ``v_mfma`` spreads each operand over a wavefront's 64 lanes in four groups
of 16 (the CDNA3 ISA's "Matrix fused multiply-add" operand tables):

* A (M x K, stored row-major): lane ``16 g + m`` holds row m's K / 4 consecutive k from
  ``g * K / 4`` on — ``shared_16xK_to_local_64xR_layout_A(i, j)`` is ``(lane, register)``
  of element (m = i, k = j), R = K / 4 registers (K = 4 for float32, 16 for 16-bit types, 32
  for 8-bit ones, 64 for the 8-bit k64 forms);
* B (K x N, stored row-major) mirrors it: lane ``16 g + n`` holds column n's k from
  ``g * K / 4`` on — ``shared_Kx16_to_local_64xR_layout_B(i, j)`` for (k = i, n = j);
* the 16 x 16 accumulator: lane ``16 g + n`` holds rows ``4 g`` to ``4 g + 3`` of column n.

``thread_id_shared_access_64xR_to_...`` are the inverses: (row, column) of ``register``
of ``lane``. ``make_mfma_swizzle_layout`` asks for a bank-conflict-free shared tile (core's
``make_swizzled_layout``; the backend keeps the layout it chooses, which never changes
results).
"""

from __future__ import annotations

from typing import Any

from tilelang.plugin import make_swizzled_layout

_ROWS = 16  # lanes per group: one operand row (A) or column (B, C) each
_GROUPS = 4  # groups in a 64-lane wavefront


def _a(i: Any, j: Any, k: int) -> tuple[Any, Any]:
    per = k // _GROUPS
    return (j // per) * _ROWS + i, j % per


def _a_inverse(lane: Any, register: Any, k: int) -> tuple[Any, Any]:
    return lane % _ROWS, (lane // _ROWS) * (k // _GROUPS) + register


def _b(i: Any, j: Any, k: int) -> tuple[Any, Any]:
    per = k // _GROUPS
    return (i // per) * _ROWS + j, i % per


def _b_inverse(lane: Any, register: Any, k: int) -> tuple[Any, Any]:
    return (lane // _ROWS) * (k // _GROUPS) + register, lane % _ROWS


def shared_16x4_to_local_64x1_layout_A(i: Any, j: Any) -> tuple[Any, Any]:
    return _a(i, j, 4)


def shared_16x16_to_local_64x4_layout_A(i: Any, j: Any) -> tuple[Any, Any]:
    return _a(i, j, 16)


def shared_16x32_to_local_64x8_layout_A(i: Any, j: Any) -> tuple[Any, Any]:
    return _a(i, j, 32)


def shared_16x64_to_local_64x16_layout_A(i: Any, j: Any) -> tuple[Any, Any]:
    return _a(i, j, 64)


def thread_id_shared_access_64x1_to_16x4_layout_A(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_inverse(lane, register, 4)


def thread_id_shared_access_64x4_to_16x16_layout_A(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_inverse(lane, register, 16)


def thread_id_shared_access_64x8_to_16x32_layout_A(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_inverse(lane, register, 32)


def thread_id_shared_access_64x16_to_16x64_layout_A(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_inverse(lane, register, 64)


def shared_4x16_to_local_64x1_layout_B(i: Any, j: Any) -> tuple[Any, Any]:
    return _b(i, j, 4)


def shared_16x16_to_local_64x4_layout_B(i: Any, j: Any) -> tuple[Any, Any]:
    return _b(i, j, 16)


def shared_32x16_to_local_64x8_layout_B(i: Any, j: Any) -> tuple[Any, Any]:
    return _b(i, j, 32)


def shared_64x16_to_local_64x16_layout_B(i: Any, j: Any) -> tuple[Any, Any]:
    return _b(i, j, 64)


def thread_id_shared_access_64x1_to_4x16_layout_B(lane: Any, register: Any) -> tuple[Any, Any]:
    return _b_inverse(lane, register, 4)


def thread_id_shared_access_64x4_to_16x16_layout_B(lane: Any, register: Any) -> tuple[Any, Any]:
    return _b_inverse(lane, register, 16)


def shared_16x16_to_local_64x4_layout_C(i: Any, j: Any) -> tuple[Any, Any]:
    """(lane, register) of accumulator element (m = i, n = j)."""
    return (i // _GROUPS) * _ROWS + j, i % _GROUPS


def make_mfma_swizzle_layout(shared_buf: Any, vecSize: int = 8) -> Any:  # upstream's keyword
    """Ask for a bank-conflict-free layout of shared tile ``shared_buf`` (see the module doc)."""
    del vecSize
    return make_swizzled_layout(shared_buf)


__all__ = [name for name in dir() if name.startswith(("shared_", "thread_id_", "make_"))]
