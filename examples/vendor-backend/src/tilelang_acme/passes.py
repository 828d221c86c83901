"""Acme's own pass: shared tiles live in a 48 KiB scratchpad, so a kernel whose
``T.alloc_shared`` buffers need more is refused before code generation, naming the buffers
and the pass config that raises the limit (for a part with a bigger scratchpad)."""

from __future__ import annotations

from typing import Any

from tilelang.errors import CompileError
from tilelang.plugin import pass_config, prim_func_pass

from .device import SCRATCHPAD_BYTES

#: the pass config (tilelang.compile(pass_configs=...)) the acme backend honours
SCRATCHPAD_CONFIG = "acme.scratchpad_bytes"


def shared_allocations(func: Any) -> list[tuple[str, int]]:
    """(name, bytes) of every shared-memory buffer ``func`` uses (each once)."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    seen: list[Any] = []

    def on_buffer(buffer: Any) -> Any:
        if (isinstance(getattr(buffer, "ty", None), tirx.BufferType) and buffer.scope().startswith("shared")
                and not any(b.same_as(buffer) for b in seen)):
            seen.append(buffer)
        return buffer

    tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post")
    found = []
    for buffer in seen:
        count = 1
        for extent in buffer.shape:
            count *= int(extent)
        found.append((str(buffer.name), count * tvm.DataType(str(buffer.dtype)).bits // 8))
    return found


def _check_scratchpad(func: Any, mod: Any, ctx: Any) -> Any:
    limit = int(pass_config(SCRATCHPAD_CONFIG, SCRATCHPAD_BYTES))
    buffers = shared_allocations(func)
    total = sum(size for _, size in buffers)
    if total > limit:
        name = func.attrs["global_symbol"] if func.attrs and "global_symbol" in func.attrs else "kernel"
        listed = ", ".join(f"{n} ({size} B)" for n, size in buffers)
        raise CompileError(
            f"acme: kernel {name!r} needs {total} bytes of shared memory ({listed}); Acme's scratchpad "
            f"holds {limit}. Use smaller tiles, or pass_configs={{'{SCRATCHPAD_CONFIG}': <bytes>}} "
            "for a part with a bigger scratchpad"
        )
    return func


def CheckScratchpad() -> Any:
    return prim_func_pass(_check_scratchpad, name="acme.CheckScratchpad")
