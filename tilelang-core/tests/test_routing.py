"""Per-kernel routing and T.ext, in process, on the CPU: a fake second backend on core's
llvm kind (told apart from the CPU backend by a target key, as a CUDA variant is from
``cuda``) with a router and a language extension. Both paths compile and run for real."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from fake_plugins import FakeDist, FakeEntryPoint, plugin
from tilelang import BackendNotFoundError, CompileError, LanguageError
from tilelang.backend import BackendModule, ExecutionBackendSpec, create_backend_context
from tilelang.backend.routing import (
    KernelRouter,
    RouteDecision,
    RouteRequest,
    route_switches,
)
from tilelang.cache import KernelCache
from tilelang.jit.kernel import JITKernel
from tilelang.language.ext import extension_call
from tilelang.plugins import loader
from tilelang.testing.kernels import elementwise_add

EXT_REF = f"{__name__}:fast_scale"  # this module, found by reference like a plugin's


def fast_scale(buffer: Any, factor: float) -> None:
    """The fake extension: scale a tile in place (the fast backend's pipeline lowers it)."""
    T.evaluate(extension_call("fast_scale", buffer.data, T.float32(factor)))


def _has_key(target: Any) -> bool:
    return "fastcpu" in [str(k) for k in target.keys]


def _with_key(target: Any) -> Any:
    from tvm.target import Target

    if _has_key(target):
        return target
    config = dict(target.export())
    config["keys"] = ["fastcpu", *config.get("keys", ())]
    host = config.pop("host", None)
    return Target(config, host=host) if host else Target(config)


def fast_backend(**fields: Any) -> BackendModule:
    manifest: dict[str, Any] = {
        "name": "fastcpu", "target_kinds": ("llvm",), "supports_target": _has_key,
        "pipelines": {"llvm": "tilelang.cpu.pipeline:CPU_PIPELINE"},
        "device_codegens": {"llvm": "tilelang.cpu.codegen:CPU_DEVICE_CODEGEN"},
        "host_codegens": {"llvm": "tilelang.cpu.codegen:LLVM_HOST_CODEGEN"},
        "execution_backends": (ExecutionBackendSpec("tvm_ffi", requires_device_compile=False),),
        "aliases": ("fastcpu",), "default_target": lambda: {"kind": "llvm", "keys": ["fastcpu", "cpu"]},
        "canonicalize_target": _with_key,
    }
    return BackendModule(**{**manifest, **fields})


def takes_small(request: RouteRequest) -> RouteDecision | None:
    """The fake router: opted-in kernels with no more than 3 parameters move to fastcpu."""
    if request.backend != "cpu" or not request.opted_in:
        return None
    if len(request.kernel.params) > 3:
        return RouteDecision("cpu", "more than 3 parameters")
    return RouteDecision("fastcpu", "small kernel")


@pytest.fixture
def load_with() -> Iterator[Callable[..., None]]:
    real = [ep for ep in loader._entry_points() if ep.dist is not None and ep.dist.name == "tilelang-core"]
    original = loader._entry_points

    def load(*fakes: FakeEntryPoint) -> None:
        every = sorted([*real, *fakes], key=lambda ep: (ep.name, ep.dist.name, ep.value))
        loader._entry_points = lambda: every  # type: ignore[assignment]
        tilelang.load_plugins(force=True)

    try:
        yield load
    finally:
        loader._entry_points = original  # type: ignore[assignment]
        tilelang.load_plugins(force=True)


@pytest.fixture
def fast(load_with: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """The fast backend and its router, as a plugin; returns load_with for more plugins."""
    monkeypatch.delenv("TILELANG_ROUTE", raising=False)
    monkeypatch.delenv("TILELANG_DEFAULT_TARGET", raising=False)

    def load(*extra: FakeEntryPoint, router: Callable[..., Any] = takes_small, **fields: Any) -> None:
        module = plugin("fastcpu",
                        tilelang_backend_modules=lambda: [fast_backend(**fields)],
                        tilelang_kernel_routers=lambda: [KernelRouter("fastcpu", router)])
        load_with(FakeEntryPoint("fastcpu", FakeDist("tilelang-fastcpu"), module), *extra)

    return load


def scaled_copy(n: int = 64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[i]

    return main


def test_route_switches_grammar() -> None:
    assert route_switches("") == (True, set())
    assert route_switches("fastcpu, cpu->other") == (True, {(None, "fastcpu"), ("cpu", "other")})
    assert route_switches("fastcpu,none") == (False, set())
    with pytest.raises(BackendNotFoundError, match=re.escape(
            "TILELANG_ROUTE='cpu->': entry 'cpu->' names no router; write '<router>' or "
            "'<from backend>-><router>'")):
        route_switches("cpu->")


def test_unset_routes_nothing(fast: Callable[..., None]) -> None:
    fast()
    context = create_backend_context("cpu", kernel=elementwise_add(64, 32), execution_backend=None)
    assert context.module.name == "cpu" and context.route is None
    assert "routed" not in context.describe()


@pytest.mark.parametrize("switch", ["fastcpu", "cpu->fastcpu"])
def test_opted_in_router_moves_a_kernel_and_says_why(fast: Callable[..., None], monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture, switch: str) -> None:
    fast()
    monkeypatch.setenv("TILELANG_ROUTE", switch)
    with caplog.at_level(logging.DEBUG, logger="tilelang.routing"):
        context = create_backend_context("cpu", kernel=elementwise_add(64, 32), execution_backend=None)
    assert context.module.name == "fastcpu" and "fastcpu" in list(context.target.keys)
    assert context.route.describe() == "routed 'cpu' -> 'fastcpu' by router 'fastcpu': small kernel"
    assert "routed 'cpu' -> 'fastcpu' by router 'fastcpu': small kernel" in context.describe()
    assert "kernel 'main' routed 'cpu' -> 'fastcpu'" in caplog.text


def test_switch_for_another_backend_does_not_opt_in(fast: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    fast()
    monkeypatch.setenv("TILELANG_ROUTE", "cuda->fastcpu")
    context = create_backend_context("cpu", kernel=elementwise_add(64, 32), execution_backend=None)
    assert context.module.name == "cpu" and context.route is None


def test_a_kernel_the_router_refuses_stays_with_the_reason(fast: Callable[..., None],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    fast()
    monkeypatch.setenv("TILELANG_ROUTE", "fastcpu")

    @T.prim_func
    def four(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"),
             C: T.Tensor((8,), "float32"), D: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                D[i] = A[i] + B[i] + C[i]

    kernel = tilelang.compile(four, target="cpu")
    assert kernel.context.module.name == "cpu"
    assert kernel.artifact.route == "stays on 'cpu' (router 'fastcpu': more than 3 parameters)"
    assert "stays on 'cpu'" in kernel.describe()


def test_routed_and_native_kernels_run_with_separate_cache_entries(
        fast: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    fast()
    cache = KernelCache(tmp_path / "cache")
    a = np.arange(64, dtype="float32")
    native = JITKernel(scaled_copy(), out_idx=[-1], target="cpu", cache=cache)
    monkeypatch.setenv("TILELANG_ROUTE", "fastcpu")
    routed = JITKernel(scaled_copy(), out_idx=[-1], target="cpu", cache=cache)
    assert native.context.module.name == "cpu" and routed.context.module.name == "fastcpu"
    assert native.cache_key != routed.cache_key
    np.testing.assert_array_equal(native(a), a)
    np.testing.assert_array_equal(routed(a), a)
    assert routed.artifact.route.startswith("routed 'cpu' -> 'fastcpu'")
    again = JITKernel(scaled_copy(), out_idx=[-1], target="cpu", cache=cache)
    assert again.from_cache and again.artifact.route == routed.artifact.route


def test_a_router_that_raises_is_named(fast: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(request: RouteRequest) -> None:
        raise ZeroDivisionError("oops")

    fast(router=broken)
    with pytest.raises(CompileError, match=re.escape(
            "kernel 'main': kernel router 'fastcpu' (from tilelang-fastcpu 1.0) raised ZeroDivisionError: "
            "oops. To compile without it: leave it out of TILELANG_ROUTE, or disable its plugin with "
            "TILELANG_PLUGINS_DENY=<entry point>")):
        create_backend_context("cpu", kernel=elementwise_add(64, 32), execution_backend=None)


def test_a_router_returning_garbage_is_named(fast: Callable[..., None]) -> None:
    fast(router=lambda request: "fastcpu")
    with pytest.raises(CompileError, match=re.escape(
            "kernel router 'fastcpu' (from tilelang-fastcpu 1.0) returned 'fastcpu'; a router "
            "returns a RouteDecision or None")):
        create_backend_context("cpu", kernel=elementwise_add(64, 32), execution_backend=None)


def test_an_unknown_router_in_the_switch_is_an_error(fast: Callable[..., None],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fast()
    monkeypatch.setenv("TILELANG_ROUTE", "fastcpuu")
    with pytest.raises(BackendNotFoundError, match=re.escape(
            "TILELANG_ROUTE names router 'fastcpuu', which no installed plugin provides "
            "(installed routers: fastcpu)")):
        create_backend_context("cpu", kernel=elementwise_add(64, 32), execution_backend=None)


def test_an_explicit_execution_backend_the_other_backend_lacks_keeps_the_kernel(
        fast: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    from tilelang.backend.registry import REGISTRY
    from tilelang.backend.routing import route_kernel
    from tvm.target import Target

    fast()
    monkeypatch.setenv("TILELANG_ROUTE", "fastcpu")
    route = route_kernel(elementwise_add(64, 32), "main", Target("llvm"), REGISTRY.backends["cpu"],
                         "explicit", "cython", lambda m: m.execution_backends)
    assert route.describe() == (
        "stays on 'cpu' (router 'fastcpu': not moved to 'fastcpu' (small kernel): execution backend "
        "'cython' was requested and 'fastcpu' cannot use it)")


# -- T.ext --------------------------------------------------------------------------------------


def ext_kernel(n: int = 16):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1):
            T.ext.fast_scale(A, 2.0)

    return main


def test_ext_without_a_provider_is_a_clear_error(fast: Callable[..., None]) -> None:
    fast()
    with pytest.raises(LanguageError, match=re.escape(
            "T.ext.fast_scale: no installed plugin provides this language extension (installed: none)")):
        ext_kernel()


def test_ext_with_two_providers_is_a_clear_error(fast: Callable[..., None]) -> None:
    other = BackendModule(**{**fast_backend().__dict__, "name": "fastcpu2", "aliases": ("fastcpu2",),
                             "priority": 1, "language_extensions": {"fast_scale": EXT_REF}})
    second = FakeEntryPoint("fastcpu2", FakeDist("tilelang-fastcpu2"),
                            plugin("fastcpu2", tilelang_backend_modules=lambda: [other]))
    fast(second, language_extensions={"fast_scale": EXT_REF})
    with pytest.raises(LanguageError, match=re.escape(
            "T.ext.fast_scale: several plugins provide this language extension: target backend "
            "'fastcpu' (from tilelang-fastcpu); target backend 'fastcpu2' (from tilelang-fastcpu2). "
            "Keep one: leave the others out with TILELANG_PLUGINS_DENY=<entry point>")):
        ext_kernel()


def test_a_kernel_using_an_extension_routes_to_its_provider(fast: Callable[..., None]) -> None:
    fast(language_extensions={"fast_scale": EXT_REF})
    context = create_backend_context("cpu", kernel=ext_kernel(), execution_backend=None)
    assert context.module.name == "fastcpu"
    assert context.route.describe() == (
        "routed 'cpu' -> 'fastcpu' by T.ext: uses T.ext.fast_scale, which target backend 'fastcpu' provides")


def test_other_backends_refuse_an_extension_kernel(fast: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    fast(language_extensions={"fast_scale": EXT_REF})
    monkeypatch.setenv("TILELANG_ROUTE", "none")
    with pytest.raises(LanguageError, match=re.escape(
            "kernel 'main' uses T.ext.fast_scale, which target backend 'cpu' does not implement "
            "(provided by target backend(s) 'fastcpu': compile it with target='fastcpu'; routing is "
            "off (TILELANG_ROUTE=none))")):
        tilelang.lower(ext_kernel(), target="cpu")


def test_the_extension_is_imported_on_first_use_only(fast: Callable[..., None]) -> None:
    fast(language_extensions={"fast_scale": EXT_REF})
    assert "fast_scale" in dir(T.ext)
    assert T.ext.fast_scale is fast_scale


def test_a_kernel_to_run_stays_when_the_other_backend_cannot_run_it(
        fast: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    fast(execution_backends=(ExecutionBackendSpec("tvm_ffi", requires_device_compile=False,
                                                  is_available=lambda: "no fast device (test)"),))
    monkeypatch.setenv("TILELANG_ROUTE", "fastcpu")
    kernel = JITKernel(scaled_copy(), out_idx=[-1], target="cpu", cache=KernelCache(enabled=False))
    assert kernel.context.module.name == "cpu"
    assert kernel.artifact.route == (
        "stays on 'cpu' (router 'fastcpu': not moved to 'fastcpu' (small kernel): no execution backend of "
        "'fastcpu' can run it here (tvm_ffi: no fast device (test)))")
    a = np.arange(64, dtype="float32")
    np.testing.assert_array_equal(kernel(a), a)
    # code generation only needs nothing to run: the same kernel moves
    assert create_backend_context("cpu", kernel=scaled_copy(), execution_backend=None).module.name == "fastcpu"
