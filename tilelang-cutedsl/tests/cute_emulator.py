"""Runs generated CuTe DSL source on the CPU, for tests on machines without a GPU.

A NULL device in tinygrad's sense: the source the backend generates is executed as is
(after an AST rewrite of ``.to(dtype)`` and ``~``), against small stand-ins for the parts of
``cutlass``/``cute`` it uses: every block of the grid runs its threads as Python threads that
meet at ``sync_threads`` (a ``threading.Barrier``), shared tensors are allocated once per
block (the k-th allocation of each thread is the block's k-th tile), register tensors once
per thread, and a composed layout applies CuTe's ``Swizzle<B, M, S>`` to the offset
(cute/swizzle.hpp: bits [M+S, M+S+B) XORed into [M, M+B)). Numerical types are numpy's.
"""

from __future__ import annotations

import ast
import threading
import types
from collections.abc import Callable
from typing import Any

import cute_mma_emulator
import cute_tma_emulator
import numpy as np

_DTYPES = {"Float16": np.float16, "BFloat16": np.float32, "Float32": np.float32, "Float64": np.float64,
           "Int8": np.int8, "Int16": np.int16, "Int32": np.int32, "Int64": np.int64, "Uint8": np.uint8,
           "Uint16": np.uint16, "Uint32": np.uint32, "Uint64": np.uint64, "Boolean": np.bool_}


class _Layout:
    def __init__(self, size: int, swizzle: Callable[[int], int] | None = None) -> None:
        self.size, self.swizzle = size, swizzle


class _Tensor:
    def __init__(self, data: np.ndarray, layout: _Layout) -> None:
        self.data, self.layout = data, layout

    def _offset(self, index: Any) -> int:
        i = int(index)
        if not 0 <= i < self.layout.size:
            raise IndexError(f"offset {i} outside a tensor of {self.layout.size} elements")
        return self.layout.swizzle(i) if self.layout.swizzle else i

    def __getitem__(self, index: Any) -> Any:
        return self.data[self._offset(index)]

    def __setitem__(self, index: Any, value: Any) -> None:
        self.data[self._offset(index)] = value

    def fill(self, value: Any) -> None:
        self.data[:] = value


def _aligned(size: int, dtype: Any, nbytes: int = 1024) -> np.ndarray:
    """Uninitialized-looking storage starting at an ``nbytes`` boundary (shared memory's)."""
    raw = np.full(size * np.dtype(dtype).itemsize + nbytes, 0x5A, np.uint8)
    start = -raw.ctypes.data % nbytes
    out = raw[start:start + size * np.dtype(dtype).itemsize].view(dtype)
    out[:] = np.array(12345).astype(dtype)
    return out


class _Iter:
    """A tensor's iterator: its storage and an element offset; ``align`` checks the claim."""

    def __init__(self, data: np.ndarray, offset: int = 0) -> None:
        self.data, self.offset = data, offset

    def __add__(self, k: Any) -> _Iter:
        return _Iter(self.data, self.offset + int(k))

    def align(self, nbytes: int) -> _Iter:
        if (self.data.ctypes.data + self.offset * self.data.itemsize) % nbytes:
            raise AssertionError(f"element offset {self.offset} is not {nbytes}-byte aligned")
        return self


def _make_tensor(data: Any, layout: _Layout) -> _Tensor:
    if isinstance(data, _Iter):
        return _Tensor(data.data[data.offset:data.offset + layout.size], layout)
    return _Tensor(data, layout)


def _autovec_copy(src: _Tensor, dst: _Tensor) -> None:
    for i in range(dst.layout.size):
        dst[i] = src[i]


_Tensor.iterator = property(lambda self: _Iter(self.data))
_ATOMIC_LOCK = threading.Lock()
_ATOMIC_OPS = {"add": lambda a, b: a + b, "max": max, "min": min, "fmax": max, "fmin": min,
               "or": lambda a, b: a | b, "and": lambda a, b: a & b, "xor": lambda a, b: a ^ b}


def _atomic(op: str) -> Callable[..., Any]:
    def apply(ptr: _Iter, value: Any, sem: str | None = None, scope: str | None = None) -> Any:
        with _ATOMIC_LOCK:
            old = ptr.data[ptr.offset]
            ptr.data[ptr.offset] = _ATOMIC_OPS[op](old, value)
            return old

    return apply


class _Block(threading.local):
    pass


_STATE = _Block()


class _SmemAllocator:
    def allocate_tensor(self, dtype: Any, layout: Any, byte_alignment: int = 1, swizzle: Any = None) -> Any:
        block = _STATE.block
        with block["lock"]:
            k = _STATE.allocations
            _STATE.allocations += 1
            if k == len(block["smem"]):
                block["smem"].append(_aligned(layout.size, dtype))  # uninitialized memory
            if isinstance(layout, cute_mma_emulator.StagedLayout):  # a wgmma operand tile
                return cute_mma_emulator.StagedTensor(block["smem"][k], layout)
            return _Tensor(block["smem"][k], layout)

    def allocate_array(self, dtype: Any, num_elems: int = 1, byte_alignment: int = 1) -> Any:
        block = _STATE.block  # mbarriers (the TMA ring's only arrays): cute_tma_emulator.py
        with block["lock"]:
            k = _STATE.allocations
            _STATE.allocations += 1
            return cute_tma_emulator.allocate_array(block, k, num_elems)


def _kernel(fn: Callable[..., None]) -> Callable[..., Any]:
    def bind(*args: Any) -> Any:
        def launch(grid: list[int], block: list[int], smem: int = 0, stream: Any = None) -> None:
            threads = block[0] * block[1] * block[2]
            for bz in range(grid[2]):
                for by in range(grid[1]):
                    for bx in range(grid[0]):
                        _run_block(fn, args, (bx, by, bz), block, threads)

        return types.SimpleNamespace(launch=launch)

    return bind


def _run_block(fn: Callable[..., None], args: tuple, bidx: tuple, block: list[int], threads: int) -> None:
    shared = {"lock": threading.Lock(), "smem": [], "barrier": threading.Barrier(threads)}
    errors: list[BaseException] = []

    def body(tidx: tuple) -> None:
        _STATE.block, _STATE.allocations, _STATE.tidx, _STATE.bidx = shared, 0, tidx, bidx
        _STATE.threads = threads
        try:
            fn(*args)
        except BaseException as err:  # noqa: BLE001 - re-raised after the block
            errors.append(err)
            shared["barrier"].abort()

    workers = [threading.Thread(target=body, args=((t % block[0], t // block[0] % block[1],
                                                     t // (block[0] * block[1])),)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]


def _swizzle(bits: int, base: int, shift: int) -> Callable[[int], int]:
    mask = (1 << bits) - 1
    return lambda i: i ^ (((i >> (base + shift)) & mask) << base)


def _modules() -> dict[str, Any]:
    arch = types.SimpleNamespace(
        thread_idx=lambda: _STATE.tidx, block_idx=lambda: _STATE.bidx,
        sync_threads=lambda: _STATE.block["barrier"].wait(),
        **{f"atomic_{op}": _atomic(op) for op in _ATOMIC_OPS}, **cute_mma_emulator.ARCH, **cute_tma_emulator.ARCH,
    )
    math = types.SimpleNamespace(exp=np.exp, exp2=np.exp2, log=np.log, log2=np.log2, log10=np.log10,
                                 sqrt=np.sqrt, rsqrt=lambda x: 1 / np.sqrt(x), abs=np.abs, tanh=np.tanh,
                                 sin=np.sin, cos=np.cos, floor=np.floor, ceil=np.ceil, pow=np.power,
                                 round=np.round, trunc=np.trunc, roundeven=np.rint)
    cute = types.SimpleNamespace(
        kernel=_kernel, jit=lambda fn: fn, arch=arch, math=math, Tensor=_Tensor, Pointer=np.ndarray,
        make_layout=lambda n: _Layout(int(n)), make_swizzle=_swizzle,
        make_composed_layout=lambda swz, offset, layout: _Layout(layout.size, swz),
        make_tensor=_make_tensor, autovec_copy=_autovec_copy,
        make_rmem_tensor=lambda layout, dtype: _Tensor(np.zeros(layout.size, dtype=dtype), layout),
    )
    vars(cute).update(cute_mma_emulator.namespace())  # the warp-level MMA path
    cute_tma_emulator.extend(cute)  # the TMA stage rings
    cutlass = types.SimpleNamespace(
        **_DTYPES, min=min, max=max, range_constexpr=range,
        select_=lambda c, a, b: a if c else b, memory=types.SimpleNamespace(SmemAllocator=_SmemAllocator),
    )
    cuda = types.SimpleNamespace(CUstream=int)
    return {"cute": cute, "cutlass": cutlass, "cuda": cuda, "__to": lambda x, t: t(x), **cute_mma_emulator.MODULES}


class _Rewrite(ast.NodeTransformer):
    """``x.to(T)`` -> ``__to(x, T)``; ``~c`` (CuTe DSL's Boolean not) -> ``not c``."""

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            return ast.Call(ast.Name("__to", ast.Load()), [node.func.value, *node.args], [])
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        self.generic_visit(node)
        if isinstance(node.op, ast.Invert):
            return ast.UnaryOp(ast.Not(), node.operand)
        return node

    def visit_Import(self, node: ast.Import) -> Any:
        return None


def load(source: str) -> dict[str, Any]:
    """The generated module's namespace, bound to the stand-ins (``launch`` included)."""
    tree = ast.fix_missing_locations(_Rewrite().visit(ast.parse(source)))
    namespace = _modules()
    exec(compile(tree, "<cutedsl>", "exec"), namespace)  # noqa: S102 - our own generated source
    return namespace


def run(source: str, *arrays: np.ndarray) -> None:
    """``launch(*arrays)`` of generated source on the CPU (flat views of the arrays)."""
    load(source)["launch"](*[a.reshape(-1) if isinstance(a, np.ndarray) else a for a in arrays], 0)
