"""TMA tensor maps for nvrtc launches: the 128-byte ``CUtensorMap`` a kernel takes by value
(``__grid_constant__``), encoded from the launch metadata's recipe (core's
launch_metadata: tensor parameter, element type, rank, dimensions and byte strides,
box, swizzle, ...) with the driver's ``cuTensorMapEncodeTiled`` (CUDA Driver API,
"Tensor Map Object Management").

Encoding is a host-side table fill, but through cuda-bindings it costs several
microseconds; a map depends only on the tensor's address, dimensions and strides, so each
encoder remembers the last few it made and a call with the same tensor reuses its bytes.
"""

from __future__ import annotations

import ctypes
from typing import Any

from tilelang.errors import LaunchError

TENSOR_MAP_BYTES = 128
_KEPT = 16  # maps remembered per encoder (per tensor parameter of a launch)
_DTYPES = {
    "float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32", "float64": "FLOAT64",
    "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "int8": "UINT8", "uint16": "UINT16",
    "int16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
}


class TensorMapEncoder:
    """``encoder(address, dims, strides) -> bytes``: the tensor map of one recipe."""

    def __init__(self, recipe: dict[str, Any], where: str) -> None:
        from cuda.bindings import driver

        dtype = _DTYPES.get(str(recipe["dtype"]))
        if dtype is None:
            raise LaunchError(f"{where}: no TMA element type for {recipe['dtype']!r}")
        self.where = where
        self.rank = int(recipe["rank"])
        self.dtype = getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{dtype}")
        # cuda-bindings takes its own integer wrappers in these arrays, not Python ints
        self._u64 = driver.cuuint64_t
        self.box = [driver.cuuint32_t(int(b)) for b in recipe["box"]]
        self.element_strides = [driver.cuuint32_t(int(e)) for e in recipe["element_strides"]]
        self.interleave = driver.CUtensorMapInterleave(int(recipe["interleave"]))
        self.swizzle = driver.CUtensorMapSwizzle(int(recipe["swizzle"]))
        self.l2_promotion = driver.CUtensorMapL2promotion(int(recipe["l2_promotion"]))
        self.oob_fill = driver.CUtensorMapFloatOOBfill(int(recipe["oob_fill"]))
        self._encode = driver.cuTensorMapEncodeTiled
        self._success = driver.CUresult.CUDA_SUCCESS
        self._made: dict[tuple[int, tuple[int, ...], tuple[int, ...]], bytes] = {}

    def __call__(self, address: int, dims: tuple[int, ...], strides: tuple[int, ...]) -> bytes:
        key = (address, dims, strides)
        made = self._made.get(key)
        if made is not None:
            return made
        u64 = self._u64
        err, tensor_map = self._encode(self.dtype, self.rank, address, [u64(d) for d in dims],
                                       [u64(s) for s in strides], self.box,
                                       self.element_strides, self.interleave, self.swizzle, self.l2_promotion,
                                       self.oob_fill)
        if err != self._success:
            raise LaunchError(
                f"{self.where}: cuTensorMapEncodeTiled failed ({err.name}) for a tensor at {address:#x} "
                f"with dimensions {list(dims)} and byte strides {list(strides)}: TMA needs a 16-byte "
                "aligned address and strides that are multiples of 16 bytes (pass a contiguous tensor, "
                "or compile with pass_configs={'tl.disable_tma_lower': True})")
        made = ctypes.string_at(tensor_map.getPtr(), TENSOR_MAP_BYTES)
        if len(self._made) >= _KEPT:
            self._made.clear()
        self._made[key] = made
        return made
