"""The backend conformance suite: one small kernel per tile operation and loop construct,
each checked against numpy at a stated tolerance, for any target backend and execution
backend (vendor ones included). ``pytest --tilelang-backend=<target>`` runs it (see
``conformance_plugin``); ``run_case`` is the library form, and ``compile_case`` the form for
a backend this machine can compile for but not run (``--tilelang-conformance=compile``).

Covered: T.copy (global <-> shared <-> fragment, edge tiles), T.fill, T.clear, T.gemm
(transposes, fp16 inputs), T.reduce_max/min/sum/abssum/absmax/bitand/bitor/bitxor (both
dims, with and without clear), T.cumsum (both directions), T.atomic_add/max/min (elements
and tiles), T.Parallel, T.Pipelined, T.serial, T.unroll, T.vectorized, T.alloc_local and a
scalar parameter with a symbolic dimension.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .kernels import (
    elementwise_add,
    row_softmax_sum,
    saxpy,
    split_k_gemm,
    tile_gemm,
    tiled_matmul,
)


@dataclass(frozen=True)
class ConformanceCase:
    """name: the test id; ops: what it covers; build() -> PrimFunc; inputs(rng) -> the
    kernel's arguments (numpy; scalars as Python numbers); reference(*inputs) -> the
    expected result: the returned output (``out_idx``), or, when ``out_idx`` is empty, the
    argument at ``checked`` after the call (kernels that update an argument in place)."""

    name: str
    ops: tuple[str, ...]
    build: Callable[[], Any]
    inputs: Callable[[np.random.Generator], list[Any]]
    reference: Callable[..., np.ndarray]
    rtol: float = 1e-5
    atol: float = 1e-5
    out_idx: Sequence[int] = (-1,)
    checked: int | None = None


def _rand(rng: np.random.Generator, *shape: int, dtype: str = "float32") -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _zeros(*shape: int, dtype: str = "float32") -> np.ndarray:
    return np.zeros(shape, dtype)


def copy_roundtrip(M: int, N: int, bM: int = 16, bN: int = 16):
    import tilelang.language as T

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            s = T.alloc_shared((bM, bN), "float32")
            f = T.alloc_fragment((bM, bN), "float32")
            T.copy(X[by * bM, bx * bN], s)  # out-of-range parts of an edge tile read as zero
            T.copy(s, f)
            for i, j in T.Parallel(bM, bN):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.copy(f, Y[by * bM, bx * bN])  # and are not written

    return main


def fill_and_clear(M: int = 8, N: int = 32):
    import tilelang.language as T

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((M, N), "float32")
            T.fill(f, 2.5)
            for i, j in T.Parallel(M, N):
                f[i, j] = f[i, j] + X[i, j]
            T.copy(f, Y)
            T.clear(Y[0:M // 2, 0:N])

    return main


def reduction(M: int, N: int, kind: str, dim: int, clear: bool, dtype: str = "float32"):
    import tilelang.language as T

    out_shape = (M,) if dim == 1 else (N,)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), R: T.Tensor(out_shape, dtype)):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((M, N), dtype)
            r = T.alloc_fragment(out_shape, dtype)
            T.copy(X, x)
            if not clear:
                T.fill(r, 1)
            T.reduce(x, r, kind, dim=dim, clear=clear)
            T.copy(r, R)

    return main


def cumsum(M: int, N: int, reverse: bool):
    import tilelang.language as T

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((M, N), "float32")
            T.copy(X, s)
            T.cumsum(s, dim=1, reverse=reverse)
            T.copy(s, Y)

    return main


def atomic_elements(n: int, bins: int, op: str, block: int = 64):
    import tilelang.language as T

    atomic = {"add": T.atomic_add, "max": T.atomic_max, "min": T.atomic_min}[op]

    @T.prim_func
    def main(X: T.Tensor((n,), "int32"), V: T.Tensor((n,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    atomic(H[X[bx * block + i]], V[bx * block + i])

    return main


def _bins(op: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    ufunc = {"add": np.add, "max": np.maximum, "min": np.minimum}[op]

    def reference(x: np.ndarray, v: np.ndarray, h: np.ndarray) -> np.ndarray:
        out = h.copy()
        ufunc.at(out, x, v)
        return out

    return reference


_REDUCE = {
    "max": lambda x, d: x.max(axis=d), "min": lambda x, d: x.min(axis=d), "sum": lambda x, d: x.sum(axis=d),
    "abssum": lambda x, d: np.abs(x).sum(axis=d), "absmax": lambda x, d: np.abs(x).max(axis=d),
    "bitand": lambda x, d: np.bitwise_and.reduce(x, axis=d), "bitor": lambda x, d: np.bitwise_or.reduce(x, axis=d),
    "bitxor": lambda x, d: np.bitwise_xor.reduce(x, axis=d),
}


def _reduce_case(kind: str, dim: int, clear: bool = True) -> ConformanceCase:
    bits = kind.startswith("bit")
    dtype = "int32" if bits else "float32"

    def inputs(rng: np.random.Generator) -> list[Any]:
        return [rng.integers(0, 1 << 12, (12, 20)).astype(dtype) if bits else _rand(rng, 12, 20)]

    def reference(x: np.ndarray) -> np.ndarray:
        out = _REDUCE[kind](x, dim)
        return out if clear else {"sum": out + 1, "max": np.maximum(out, 1)}[kind].astype(dtype)

    name = f"reduce_{kind}_dim{dim}" + ("" if clear else "_accumulate")
    return ConformanceCase(name, (f"T.reduce_{kind}",), lambda: reduction(12, 20, kind, dim, clear, dtype),
                           inputs, reference, rtol=1e-5, atol=1e-5)


CASES: tuple[ConformanceCase, ...] = (
    ConformanceCase("parallel_elementwise", ("T.Parallel",), lambda: elementwise_add(70, 33),
                    lambda r: [_rand(r, 70, 33), _rand(r, 70, 33)], lambda a, b: a + b, 1e-6, 1e-6),
    ConformanceCase("serial_local_symbolic_scalar", ("T.serial", "T.alloc_local", "T.symbolic", "scalar"),
                    lambda: row_softmax_sum(19), lambda r: [_rand(r, 45, 19), 0.5],
                    lambda a, s: s * np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)),
    ConformanceCase("unroll_shared_matmul", ("T.unroll", "T.alloc_shared"), lambda: tiled_matmul(65, 40, 70),
                    lambda r: [_rand(r, 65, 70), _rand(r, 70, 40)], lambda a, b: a @ b, 1e-4, 1e-4),
    ConformanceCase("vectorized_in_place", ("T.vectorized",), lambda: saxpy(200),
                    lambda r: [_rand(r, 200), _rand(r, 200), 1.5], lambda x, y, a: a * x + y,
                    1e-6, 1e-6, out_idx=(), checked=1),
    ConformanceCase("copy_global_shared_fragment_edges", ("T.copy", "T.alloc_fragment"),
                    lambda: copy_roundtrip(37, 45), lambda r: [_rand(r, 37, 45)], lambda x: 2 * x + 1, 1e-6, 1e-6),
    ConformanceCase("fill_and_clear", ("T.fill", "T.clear"), fill_and_clear, lambda r: [_rand(r, 8, 32)],
                    lambda x: np.concatenate([np.zeros((4, 32)), x[4:] + 2.5]).astype("float32"), 1e-6, 1e-6),
    ConformanceCase("gemm_pipelined_edges", ("T.gemm", "T.Pipelined", "T.clear"),
                    lambda: tile_gemm(70, 45, 33, dtype="float32"),
                    lambda r: [_rand(r, 70, 33), _rand(r, 33, 45)], lambda a, b: a @ b, 1e-4, 1e-4),
    ConformanceCase("gemm_transposed", ("T.gemm transpose_A/B",),
                    lambda: tile_gemm(64, 64, 32, trans_a=True, trans_b=True, dtype="float32"),
                    lambda r: [_rand(r, 32, 64), _rand(r, 64, 32)], lambda a, b: a.T @ b.T, 1e-4, 1e-4),
    ConformanceCase("gemm_fp16_inputs", ("T.gemm float16",), lambda: tile_gemm(64, 64, 64, dtype="float16"),
                    lambda r: [_rand(r, 64, 64, dtype="float16"), _rand(r, 64, 64, dtype="float16")],
                    lambda a, b: a.astype("float32") @ b.astype("float32"), 1e-2, 1e-2),
    *(_reduce_case(kind, 1) for kind in sorted(_REDUCE)),
    _reduce_case("sum", 0),
    _reduce_case("max", 0),
    _reduce_case("sum", 1, clear=False),
    _reduce_case("max", 1, clear=False),
    ConformanceCase("cumsum", ("T.cumsum",), lambda: cumsum(6, 10, False), lambda r: [_rand(r, 6, 10)],
                    lambda x: np.cumsum(x, 1), 1e-5, 1e-5),
    ConformanceCase("cumsum_reverse", ("T.cumsum reverse",), lambda: cumsum(6, 10, True),
                    lambda r: [_rand(r, 6, 10)], lambda x: np.flip(np.cumsum(np.flip(x, 1), 1), 1), 1e-5, 1e-5),
    *(ConformanceCase(f"atomic_{op}_elements", (f"T.atomic_{op}",), lambda op=op: atomic_elements(1000, 17, op),
                      lambda r: [r.integers(0, 17, 1000).astype("int32"), r.integers(-50, 50, 1000).astype("int32"),
                                 np.full(17, 3, "int32")],
                      _bins(op), 0, 0, out_idx=(), checked=2) for op in ("add", "max", "min")),
    ConformanceCase("atomic_add_tiles_split_k", ("T.atomic_add (tile)", "T.Pipelined"),
                    lambda: split_k_gemm(70, 45, 64, 4, bM=32, bN=32, bK=16, dtype="float32"),
                    lambda r: [_rand(r, 70, 64), _rand(r, 64, 45), np.ones((70, 45), "float32")],
                    lambda a, b, c: c + a @ b, 1e-4, 1e-4, out_idx=(), checked=2),
)

assert len({case.name for case in CASES}) == len(CASES)  # the names are test ids


def run_case(case: ConformanceCase, target: Any = "auto", execution_backend: str = "auto",
             seed: int = 0) -> Any:
    """Compile and run one case; returns the kernel. Raises AssertionError (numpy's, with
    the mismatch) on a wrong result; compile and launch errors propagate as they are."""
    import tilelang

    from . import to_kernel_device, to_numpy

    inputs = case.inputs(np.random.default_rng(seed))
    expected = case.reference(*[x.copy() if isinstance(x, np.ndarray) else x for x in inputs])
    kernel = tilelang.compile(case.build(), out_idx=list(case.out_idx) or None, target=target,
                              execution_backend=execution_backend)
    args = to_kernel_device(kernel, *inputs)
    out = kernel(*args)
    got = to_numpy(args[case.checked] if case.checked is not None else out)
    np.testing.assert_allclose(got, expected, rtol=case.rtol, atol=case.atol,
                               err_msg=f"conformance case {case.name!r} ({kernel.describe()})")
    return kernel


def compile_case(case: ConformanceCase, target: Any) -> bytes | None:
    """The case for a target this machine cannot run (a GPU backend on a CPU machine):
    lowered to its sources, and its device source compiled by the backend's toolchain when
    that toolchain works here (nvcc for CUDA, hipcc for ROCm). Returns the binary, or None
    when the backend has no device code or no working toolchain here; compile errors
    propagate as CompileError / LanguageError."""
    from ..backend.module import create_backend_context
    from ..backend.toolchain import (
        compile_device_source,
        declared_toolchain,
        toolchain_unavailable_reason,
    )
    from ..engine.lower import lower_with_context
    from ..jit.kernel import _name_of

    func = case.build()
    # one context (and one routing decision) for the lowering and the toolchain
    context = create_backend_context(target, None, execution_backend=None, kernel=func, kernel_name=_name_of(func))
    artifact = lower_with_context(func, context, out_idx=list(case.out_idx))
    if not artifact.device_source or declared_toolchain(context.module) is None:
        return None
    if toolchain_unavailable_reason(context.module) is not None:
        return None
    binary = compile_device_source(artifact, context, "conformance")
    assert binary, f"conformance case {case.name!r}: the toolchain returned an empty binary"
    return binary


__all__ = ["CASES", "ConformanceCase", "compile_case", "run_case"]
