"""How tools/upstream_examples.py's emulate mode hands a lowered kernel to the lowered-IR
emulator (tilelang-cuda/tests/lowered_emulator.py) and reads its outputs back.

The emulator holds bfloat16 and the fp8 types as their bits (uint16, uint8): torch tensors of
those types go in as their bits and come back as the torch type. Integer scalar arguments are
sizes the launch may take (a grid extent, say): they reach the emulator's ``scalars`` by
parameter name, beside the T.dynamic sizes the inputs' shapes give. The emulator raises one
EmulationError for what it does not model and for what the kernel does wrong; an access out of
a buffer's bounds is the kernel's (``is_emulator_limit`` tells them apart by the message).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

# lowered_emulator.py's message for an access outside a buffer (LoweredKernel._positions)
_OUT_OF_BOUNDS = re.compile(r"thread \d+ accesses bytes -?\d+\.\.-?\d+ of .* \(\d+ bytes\)")
_FP8 = ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")


def is_emulator_limit(exc: BaseException) -> bool:
    """An EmulationError for something the emulator does not model ("not emulated"), not an
    out-of-bounds access (a failure of the kernel)."""
    return type(exc).__name__ == "EmulationError" and not _OUT_OF_BOUNDS.match(str(exc))


def storage(dtype: str) -> str:
    """The numpy dtype the emulator holds a buffer of this dtype in: bfloat16 and fp8 as bits."""
    return "uint16" if dtype == "bfloat16" else "uint8" if dtype in _FP8 else dtype


def as_array(t: Any) -> Any:
    """A torch tensor as the emulator's numpy array (bfloat16 and fp8 as their bits)."""
    import numpy as np
    import torch

    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.view(torch.uint8).numpy() if str(t.dtype).removeprefix("torch.") in _FP8 else t.numpy()


def as_float(a: Any, dtype: str) -> Any:
    """An emulator array of this dtype read back as a float64 torch tensor."""
    import numpy as np
    import torch

    a = np.asarray(a)
    if dtype == "bfloat16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    elif dtype in _FP8:  # the bits, read as torch's fp8 type
        return torch.from_numpy(np.ascontiguousarray(a).view(np.uint8)).view(getattr(torch, dtype)).double()
    return torch.from_numpy(a.astype(np.float64))


def run_emulated(func: Any, artifact: Any, inputs: list[Any], outputs: list[int], inplace: tuple[int, ...]) -> list:
    """Runs the lowered ``artifact`` of ``func`` on ``inputs`` (one per parameter that is not
    an output), its kernels in launch order sharing the function's T.alloc_global workspaces;
    returns the outputs, then the in-place ones (``inplace``: indices into the inputs)."""
    import numpy as np
    import torch
    import tvm_ffi
    from tilelang.engine.artifact import dim_value, is_symbol
    from tvm import tirx

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tilelang-cuda" / "tests"))
    from lowered_instructions import lowered_kernel

    arrays, given, at_param = [], iter(inputs), []  # at_param: each input's parameter
    symbols: dict[str, int] = {}  # T.dynamic sizes from the inputs' shapes, and int arguments
    for i, param in enumerate(func.params):
        if i in outputs:
            arrays.append(None)  # allocated below, once the inputs gave every size
            continue
        value = next(given)
        at_param.append(i)
        arrays.append(as_array(value) if isinstance(value, torch.Tensor) else value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and param not in func.buffer_map:
            symbols.setdefault(param.name, int(value))
        for dim, size in zip(artifact.params[i].shape or (), getattr(value, "shape", ())):
            if is_symbol(dim):
                symbols.setdefault(dim, int(size))
    for i in outputs:
        shape = [dim_value(d, symbols) for d in artifact.params[i].shape]
        arrays[i] = np.full(shape, 0, storage(str(artifact.params[i].dtype)))
    workspaces = {}  # T.alloc_global buffers shared by the kernels of one function

    def workspace(alloc: Any) -> None:
        if alloc.buffer.scope() == "global":
            workspaces[alloc.buffer.name] = np.zeros([int(d) for d in alloc.buffer.shape],
                                                     storage(str(alloc.buffer.dtype)))

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, workspace))
    for index in range(len(json.loads(str(artifact.device_mod.attrs["tilelang.launches"])))):
        lowered_kernel(artifact.device_mod, index)(*arrays, workspaces=workspaces, scalars=symbols)
    dtypes = [str(func.buffer_map[p].dtype) if p in func.buffer_map else "" for p in func.params]
    got = [as_float(arrays[i], dtypes[i]) for i in outputs]
    return got + [as_float(arrays[at_param[i]], dtypes[at_param[i]]) for i in inplace]
