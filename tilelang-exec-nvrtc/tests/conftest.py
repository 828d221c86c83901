"""Shared fixtures: a private kernel cache per test, the ``gpu`` marker (skipped without a
CUDA GPU) and a fake CUDA driver that records launches instead of running them."""

from __future__ import annotations

import contextlib
import ctypes
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from tilelang.jit.adapter.nvrtc.driver import DEFAULT_DYNAMIC_SMEM_LIMIT, LoadedImage
from tilelang.jit.adapter.nvrtc.launch_plan import ARG_FORMATS
from tilelang.testing.pytest_plugin import (  # noqa: F401 - hooks and fixtures for pytest
    private_kernel_cache,
    pytest_collection_modifyitems,
    pytest_configure,
)


@dataclass
class RecordedLaunch:
    symbol: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    stream: int
    operands: tuple[Any, ...]
    cooperative: bool = False  # cuLaunchCooperativeKernel (T.sync_grid)


class FakeDriver:
    """A CUDA driver stand-in: "loads" images with made-up handles and decodes every
    launch's ``void**`` operand array (with the artifact's arg types) into a record."""

    def __init__(self, arg_types: dict[str, tuple[str, ...]], device: int = -1) -> None:
        self.arg_types = arg_types
        self.device = device
        self.stream = 7
        self.results: list[int] = []  # CUresults to return, in order; then 0
        self.launches: list[RecordedLaunch] = []
        self.loaded: list[LoadedImage] = []
        self.unloaded: list[LoadedImage] = []
        self.smem_attributes: list[tuple[int, int]] = []
        self.contexts_ensured: list[int] = []
        self.symbols: dict[int, str] = {}
        self.launch_kernel = self._launch_kernel
        self.launch_cooperative_kernel = lambda *args: self._launch_kernel(*args, None, cooperative=True)
        self.current_device = lambda: self.device
        self.current_stream = lambda device: self.stream

    def _launch_kernel(self, function: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                       smem: int, stream: int, params: int, extra: Any, cooperative: bool = False) -> tuple[int]:
        symbol = self.symbols[function]
        operands = []
        for k, arg_type in enumerate(self.arg_types[symbol]):
            address = ctypes.c_void_p.from_address(params + 8 * k).value
            fmt = "<" + ARG_FORMATS[arg_type]
            (value,) = struct.unpack(fmt, ctypes.string_at(address, struct.calcsize(fmt)))
            operands.append(value)
        self.launches.append(RecordedLaunch(symbol, (gx, gy, gz), (bx, by, bz), smem, stream, tuple(operands),
                                            cooperative))
        return (self.results.pop(0) if self.results else 0,)  # cuda-bindings' result form

    def device_guard(self, device: int) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def ensure_context(self, device: int) -> int:
        self.contexts_ensured.append(device)
        return 1

    def load_image(self, cubin: bytes, symbols: tuple[str, ...], device: int) -> LoadedImage:
        functions = []
        for symbol in symbols:
            handle = 0x1000 + len(self.symbols)
            self.symbols[handle] = symbol
            functions.append(handle)
        image = LoadedImage(device, 1, 0x99, tuple(functions), [DEFAULT_DYNAMIC_SMEM_LIMIT] * len(functions))
        self.loaded.append(image)
        return image

    def unload_image(self, image: LoadedImage) -> None:
        self.unloaded.append(image)

    def set_max_dynamic_smem(self, function: int, nbytes: int) -> int:
        self.smem_attributes.append((function, nbytes))
        return 0 if nbytes <= 227 * 1024 else 1

    def max_dynamic_smem(self, device: int) -> int | None:
        return 227 * 1024

    def error_name(self, code: int) -> str:
        return {1: "CUDA_ERROR_INVALID_VALUE", 201: "CUDA_ERROR_INVALID_CONTEXT",
                720: "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"}.get(code, f"CUresult {code}")


@pytest.fixture
def fake_driver_for() -> Callable[[Any], FakeDriver]:
    """fake_driver_for(artifact) -> a FakeDriver that knows the artifact's launches."""

    def make(artifact: Any) -> FakeDriver:
        return FakeDriver({launch.symbol: launch.arg_types for launch in artifact.launches})

    return make
