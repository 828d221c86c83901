"""Argument errors: the C checks refuse what the shared binder refuses, and the error is
the binder's, word for word, on every CPU execution backend. Also what only the C checks
catch, build-time errors, and what `unavailable_reason` says."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from _cython_testing import declared_execution_backends
from tilelang import ArgumentError
from tilelang.errors import BackendUnavailableError, CompileError
from tilelang.jit.adapter.cython import toolchain
from tilelang.jit.adapter.cython.backend import CythonExecutionBackend
from tilelang.testing.kernels import elementwise_add, row_softmax_sum

BACKENDS = declared_execution_backends("c")


def scale_by_int(n: int) -> Any:
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), k: T.int32, B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(n):
                B[bx * n + i] = A[bx * n + i] * T.cast(k, "float32")

    return main


def kernels(func: Any) -> dict[str, tilelang.JITKernel]:
    return {b: tilelang.compile(func, out_idx=[-1], target="c", execution_backend=b) for b in BACKENDS}


@pytest.fixture(scope="module")
def add() -> dict[str, tilelang.JITKernel]:
    return kernels(elementwise_add(T.symbolic("M"), 8))


def same_error(kernels_: dict[str, tilelang.JITKernel], args: tuple[Any, ...], pattern: str) -> str:
    """Every backend raises ArgumentError matching ``pattern``, all with one message."""
    messages = []
    for kernel in kernels_.values():
        with pytest.raises(ArgumentError, match=pattern) as info:
            kernel(*args)
        messages.append(str(info.value))
    assert len(set(messages)) == 1, messages
    return messages[0]


def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, dtype="float32")


def test_wrong_number_of_arguments(add: dict[str, tilelang.JITKernel]) -> None:
    same_error(add, (f32(4, 8),), re.escape("kernel 'main' takes 2 argument(s) (A, B), got 1"))
    same_error(add, (f32(4, 8),) * 3, re.escape("takes 2 argument(s) (A, B), got 3"))


def test_wrong_dtype(add: dict[str, tilelang.JITKernel]) -> None:
    same_error(add, (f32(4, 8), np.ones((4, 8))), re.escape(
        "kernel 'main', argument 'B' (#1): expected dtype float32, got float64; convert it first"))


def test_big_endian_numpy_is_another_dtype(add: dict[str, tilelang.JITKernel]) -> None:
    same_error(add, (f32(4, 8).astype(">f4"), f32(4, 8)), re.escape("expected dtype float32, got >f4"))


def test_wrong_rank_and_constant_dimension(add: dict[str, tilelang.JITKernel]) -> None:
    same_error(add, (f32(4, 8, 1), f32(4, 8)), re.escape(
        "argument 'A' (#0): expected 2 dimensions (M, 8), got shape (4, 8, 1)"))
    same_error(add, (f32(4, 8), f32(4, 9)), re.escape(
        "argument 'B' (#1): expected shape (M, 8), got (4, 9): dimension 1 must be 8"))


def test_symbolic_dimensions_must_agree(add: dict[str, tilelang.JITKernel]) -> None:
    same_error(add, (f32(5, 8), f32(6, 8)), re.escape(
        "argument 'B' (#1): symbolic dimension M is 6 here but 5 in an earlier argument"))


def test_non_contiguous(add: dict[str, tilelang.JITKernel]) -> None:
    strided = f32(8, 16)[:, ::2]
    same_error(add, (strided, f32(8, 8)), re.escape(
        "argument 'A' (#0): expected a contiguous (row-major) tensor; call .contiguous()"))


def test_not_a_tensor(add: dict[str, tilelang.JITKernel]) -> None:
    same_error(add, (f32(4, 8), [[1.0] * 8] * 4), re.escape(
        "argument 'B' (#1): expected a tensor (torch.Tensor or numpy.ndarray), got list"))


def test_torch_tensor_on_another_device(add: dict[str, tilelang.JITKernel]) -> None:
    torch = pytest.importorskip("torch")
    meta = torch.empty(4, 8, device="meta")
    same_error(add, (torch.ones(4, 8), meta), re.escape(
        "argument 'B' (#1): expected a tensor on cpu, got one on an unsupported device"))


def test_scalar_arguments() -> None:
    softmax = kernels(row_softmax_sum(8))
    same_error(softmax, (f32(3, 8), "x"), re.escape("argument 'scale' (#1): expected a number (float32), got 'x'"))
    scale = kernels(scale_by_int(16))
    same_error(scale, (f32(16), True), re.escape("argument 'k' (#1): expected an integer (int32), got True"))
    same_error(scale, (f32(16), 2.0), re.escape("argument 'k' (#1): expected an integer (int32), got 2.0"))
    for kernel in scale.values():  # anything with __index__ is an integer
        np.testing.assert_array_equal(kernel(f32(16), np.int64(3)), f32(16) * 3)


def test_integer_that_does_not_fit_its_parameter_is_caught_in_c() -> None:
    kernel = tilelang.compile(scale_by_int(16), out_idx=[-1], target="c", execution_backend="cython")
    with pytest.raises(ArgumentError, match=re.escape(
            "kernel 'main', argument 'k' (#1): 1099511627776 does not fit its type int32")):
        kernel(f32(16), 2**40)


def test_alignment_is_checked_in_c_when_the_kernel_needs_it(tmp_path: Any) -> None:
    # CPU kernels need no alignment (min_alignment 0); a CUDA-like requirement is checked
    # the same way, by the binder's rule
    from tilelang.backend import create_backend_context
    from tilelang.engine.lower import lower_with_context as lower

    context = create_backend_context("c", execution_backend="cython")
    artifact = dataclasses.replace(lower(elementwise_add(4, 8), context, out_idx=[-1]), min_alignment=16)
    backend = CythonExecutionBackend()
    for name, data in backend.build(artifact, context).items():
        (tmp_path / name).write_bytes(data)
    launcher = backend.load(artifact, tmp_path, context)
    base = np.ones(40, dtype="float32")
    k = next(k for k in range(4) if (base.ctypes.data + 4 * k) % 16 == 0)
    aligned, misaligned = base[k:k + 32].reshape(4, 8), base[k + 1:k + 33].reshape(4, 8)
    with pytest.raises(ArgumentError, match=re.escape(
            "argument 'A' (#0): its data pointer is not aligned to 16 bytes")):
        launcher(misaligned, aligned)
    np.testing.assert_array_equal(launcher(aligned, aligned), aligned * 2)


def test_declared_strides_are_checked_in_c(tmp_path: Any) -> None:
    from tilelang.backend import create_backend_context
    from tilelang.engine.lower import lower_with_context as lower

    context = create_backend_context("c", execution_backend="cython")
    artifact = lower(elementwise_add(4, 8), context, out_idx=[-1])
    params = tuple(dataclasses.replace(p, strides=(8, 1)) for p in artifact.params)
    artifact = dataclasses.replace(artifact, params=params)
    backend = CythonExecutionBackend()
    for name, data in backend.build(artifact, context).items():
        (tmp_path / name).write_bytes(data)
    launcher = backend.load(artifact, tmp_path, context)
    np.testing.assert_array_equal(launcher(f32(4, 8), f32(4, 8)), f32(4, 8) * 2)
    transposed = np.ones((8, 4), dtype="float32").T
    with pytest.raises(ArgumentError, match=re.escape(
            "argument 'A' (#0): its strides (1, 4) are not the ones the kernel declares ((8, 1))")):
        launcher(transposed, f32(4, 8))


def test_cython_does_not_run_llvm_targets() -> None:
    with pytest.raises(BackendUnavailableError,
                       match=r"cython: does not support target kind 'llvm'; it serves 'c': pass target='c'"):
        tilelang.compile(elementwise_add(4, 8), out_idx=[-1], target="llvm", execution_backend="cython")


@pytest.mark.parametrize("target", ["cpu", "auto"])
def test_a_chosen_cpu_target_takes_the_kind_cython_serves(target: str) -> None:
    from tilelang.backend import create_backend_context

    if create_backend_context(target, execution_backend=None).module.name != "cpu":
        pytest.skip("auto picks a GPU here")
    kernel = tilelang.compile(elementwise_add(4, 8), out_idx=[-1], target=target, execution_backend="cython")
    assert kernel.context.target.kind.name == "c"
    assert "kind 'c' for execution backend 'cython'" in kernel.describe()
    np.testing.assert_array_equal(kernel(f32(4, 8), f32(4, 8)), f32(4, 8) * 2)


def test_launch_metadata_outside_the_grammar_is_a_compile_error() -> None:
    from tilelang.backend import create_backend_context
    from tilelang.engine.lower import lower_with_context as lower

    context = create_backend_context("c", execution_backend="cython")
    artifact = lower(row_softmax_sum(8), context, out_idx=[-1])
    launch = dataclasses.replace(artifact.launches[0], args=("param:0", "param:2", "__import__('os')", "scale"))
    bad = dataclasses.replace(artifact, launches=(launch,))
    with pytest.raises(CompileError, match=r"operand #2: \"__import__\('os'\)\" cannot be evaluated"):
        CythonExecutionBackend().build(bad, context)
    unbound = dataclasses.replace(artifact, launches=(dataclasses.replace(launch, args=(*launch.args[:2], "N", "scale")),))
    with pytest.raises(CompileError, match="unknown name 'N'"):
        CythonExecutionBackend().build(unbound, context)


def test_unavailable_without_cython(monkeypatch: pytest.MonkeyPatch) -> None:
    real = toolchain.importlib.util.find_spec
    monkeypatch.setattr(toolchain.importlib.util, "find_spec",
                        lambda name, *a: None if name == "Cython" else real(name, *a))
    assert toolchain.unavailable_reason() == (
        "Cython cannot be imported; pip install 'Cython>=3.0' (or pip install 'tilelang[cython]')")
    with pytest.raises(BackendUnavailableError, match=r"cython: Cython cannot be imported"):
        tilelang.compile(elementwise_add(4, 8), target="c", execution_backend="cython")


def test_unavailable_without_a_c_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    assert toolchain.unavailable_reason() == (
        "no C compiler found (looked for $CC, cc and gcc on PATH); install one "
        "(e.g. apt-get install gcc) or set CC")
    monkeypatch.setenv("CC", "/nonexistent/clang -O1")
    assert "no C compiler found" in toolchain.unavailable_reason()


def test_compiler_errors_carry_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = {name: toolchain.template(name) for name in toolchain.TEMPLATES}
    sources["tl_kernel.h"] = "#error this launcher cannot compile\n"
    with pytest.raises(CompileError, match=r"(?s)kernel 'broken': the C compiler failed.*this launcher cannot compile"):
        toolchain.build_extension(sources, "broken")
