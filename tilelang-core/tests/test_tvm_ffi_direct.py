"""A tvm_ffi kernel library called through libtvm_ffi's C ABI (tilelang.jit.adapter.tvm_ffi.direct):
what a disk hit does before ``tvm_ffi`` is imported. Results against torch (exact for the
integer-valued sums, ``allclose`` at 1e-6 for a multiply-add), the kernel's own errors with
tvm_ffi's types and messages, and concurrent calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tilelang
import tilelang.language as T
from tilelang.jit.adapter.tvm_ffi import direct
from tilelang.jit.adapter.tvm_ffi.backend import LIBRARY, TVMFFIExecutionBackend

KERNELS = textwrap.dedent(
    """
    import tilelang


    @tilelang.jit(out_idx=[-1], target="cpu", execution_backend="tvm_ffi")
    def axpb(N, dtype="float32"):
        import tilelang.language as T

        M = T.dynamic("M")

        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), s: T.float32, k: T.int32, flag: T.bool,
                 C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:
                for i, j in T.Parallel(32, N):
                    if bx * 32 + i < M:
                        C[bx * 32 + i, j] = T.if_then_else(flag, A[bx * 32 + i, j] * s + k, -A[bx * 32 + i, j])

        return main
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    sys.path.insert(0, {folder!r})
    from kernels import axpb
    kernel = axpb(16)
    torch.manual_seed(0)
    results = []
    for m, s, k, flag in ((5, 2.5, 3, True), (40, 2, -7, True), (64, -0.5, 0, False), (33, 1.25, 1, True)):
        a = torch.randn(m, 16)
        ref = a * s + k if flag else -a
        results.append(bool(torch.allclose(kernel(a, s, k, flag), ref, rtol=1e-6, atol=1e-6)))
    print(json.dumps({{"from_cache": kernel.from_cache, "results": results, "tvm_ffi": "tvm_ffi" in sys.modules,
                      "function": type(kernel.launcher.function).__name__}}))
    """
)


def run(folder: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD.format(folder=str(folder))], capture_output=True, text=True,
                          env=dict(os.environ), check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_hit_calls_the_library_through_the_c_abi(tmp_path: Path) -> None:
    """Dynamic extents and scalars of each kind (a float, an int for the float, an int, a
    bool) reach the kernel as tvm_ffi would pass them."""
    (tmp_path / "kernels.py").write_text(KERNELS)
    for _ in range(3):  # others editing this checkout change the request key: compiled again
        cold, hit = run(tmp_path), run(tmp_path)
        if hit["from_cache"]:
            break
    assert cold["results"] == [True] * 4 and cold["tvm_ffi"] and cold["function"] == "Function", cold
    assert hit["from_cache"] and hit["results"] == [True] * 4, hit
    assert not hit["tvm_ffi"] and hit["function"] == "DirectFunction", hit


def add_kernel(n: int = 64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n) as _:
            for i in T.Parallel(n):
                C[i] = A[i] + B[i]

    return main


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, object]:
    kernel = tilelang.compile(add_kernel(), target="cpu", execution_backend="tvm_ffi", out_idx=[-1])
    files = TVMFFIExecutionBackend().build(kernel.artifact, kernel.context)
    path = tmp_path_factory.mktemp("direct") / LIBRARY
    path.write_bytes(files[LIBRARY])
    return str(path), kernel.artifact


def test_concurrent_calls_each_get_their_own_arguments(library: tuple[str, object]) -> None:
    path, artifact = library
    lib = direct.ffi_library()
    assert lib is not None
    function = direct.DirectFunction(lib, path, artifact.kernel_name, artifact.params, 1, lambda: None)
    failures: list[str] = []

    def worker(seed: int) -> None:
        for step in range(300):
            a = torch.full((64,), float(seed * 1000 + step))
            b = torch.arange(64, dtype=torch.float32)
            c = torch.empty(64)
            function.launch(a, b, c)
            if not torch.equal(c, a + b):
                failures.append(f"thread {seed}, step {step}")

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:5]


def test_the_kernels_own_error_keeps_tvm_ffis_type_and_message(library: tuple[str, object]) -> None:
    """A null data pointer (never from the fast binder) fails the library's own argument
    checks: raised as tvm_ffi raises it."""
    import tvm_ffi

    path, artifact = library
    function = direct.DirectFunction(direct.ffi_library(), path, artifact.kernel_name, artifact.params, 1,
                                     lambda: None)
    empty = torch.empty(0)
    a = torch.ones(64)

    class NullData:  # what the C ABI caller reads of a tensor: a null data pointer
        shape = (64,)

        def data_ptr(self) -> int:
            return 0

    with pytest.raises(Exception) as ours:
        function.launch(NullData(), a, a)
    with pytest.raises(Exception) as theirs:
        tvm_ffi.load_module(path)[artifact.kernel_name](tvm_ffi.from_dlpack(empty), a, a)
    assert type(ours.value) is type(theirs.value) is ValueError, (ours.value, theirs.value)
    assert str(ours.value) == str(theirs.value), (ours.value, theirs.value)
    assert str(ours.value).startswith("A data pointer is NULL on argument #0 when calling:"), ours.value


def test_a_global_functions_error_is_that_of_tvm_ffi() -> None:
    import tvm_ffi

    lib = direct.ffi_library()
    with pytest.raises(Exception) as ours:
        direct.load_function(lib, "/no/such/library.so", "main")
    with pytest.raises(Exception) as theirs:
        tvm_ffi.load_module("/no/such/library.so")
    assert type(ours.value) is type(theirs.value), (ours.value, theirs.value)  # tvm registered the kind
    assert str(ours.value) == str(theirs.value), (ours.value, theirs.value)
    assert "Failed to load dynamic shared library /no/such/library.so" in str(ours.value)


def test_a_missing_function_is_named(library: tuple[str, object]) -> None:
    path, _ = library
    with pytest.raises(RuntimeError, match=r"the library has no function 'no_such_kernel'"):
        direct.load_function(direct.ffi_library(), path, "no_such_kernel")


def test_global_lookups() -> None:
    lib = direct.ffi_library()
    assert direct.has_global(lib, "ffi.ModuleLoadFromFile")
    assert not direct.has_global(lib, "ffi.no.such.function")


def test_after_many_calls_the_launcher_goes_on_through_tvm_ffi(library: tuple[str, object],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A direct call costs more than tvm_ffi's (ctypes): a kernel called often moves to
    tvm_ffi's call once (direct.SWITCH_AFTER_CALLS), with the same results."""
    import tvm_ffi
    from tilelang.jit.adapter.tvm_ffi.backend import TVMFFILauncher

    path, artifact = library
    monkeypatch.setattr(direct, "SWITCH_AFTER_CALLS", 5)
    function = direct.DirectFunction(direct.ffi_library(), path, artifact.kernel_name, artifact.params, 1,
                                     lambda: tvm_ffi.load_module(path)[artifact.kernel_name])
    launcher = TVMFFILauncher(function, artifact, 1)
    b = torch.arange(64, dtype=torch.float32)
    kinds = []
    for step in range(8):
        a = torch.full((64,), float(step))
        assert torch.equal(launcher(a, b), a + b), step
        kinds.append(type(launcher.function).__name__)
    assert kinds == ["DirectFunction"] * 4 + ["Function"] * 4, kinds


def test_a_kernel_its_toolchain_says_cannot_run_here_is_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """tvm_ffi asks the target backend's toolchain before loading (TVM's runtime stopped the
    process on a CUDA cubin for another GPU); the kernel compiles, a launch says why not."""
    from tilelang.jit.adapter.tvm_ffi import backend

    asked: list[object] = []
    monkeypatch.setattr(backend, "device_mismatch", lambda artifact, context: asked.append(artifact) or "it is for another chip")

    @T.prim_func
    def double(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i] * 2.0

    kernel = tilelang.compile(double, out_idx=[-1], target="cpu", execution_backend="tvm_ffi")
    assert asked and "double" in kernel.get_kernel_source()
    with pytest.raises(tilelang.LaunchError, match="kernel 'double' cannot run on this device: it is for another chip"):
        kernel(torch.ones(8))
