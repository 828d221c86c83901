"""Where kernels go (no GPU needed: code generation only): opt-in on and off, kernels
cutedsl does not lower staying on cuda with the reason, the explicit target, the
extension route and the cuda backend's refusal, cache-key separation."""

from __future__ import annotations

import re

import pytest
import tilelang
from cute_kernels import (
    atomic_sum,
    row_sum_of_product,
    swizzled_transpose,
    tile_copy_scale,
)
from tilelang.backend import create_backend_context
from tilelang.errors import LanguageError


@pytest.fixture(autouse=True)
def no_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TILELANG_ROUTE", "TILELANG_USE_CUTEDSL", "TILELANG_DEFAULT_TARGET"):
        monkeypatch.delenv(name, raising=False)


def context_for(kernel, target="cuda"):
    return create_backend_context(target, kernel=kernel, execution_backend=None)


def test_unset_nothing_changes() -> None:
    context = context_for(tile_copy_scale())
    assert context.module.name == "cuda" and context.route is None
    assert "cutedsl" not in [str(k) for k in context.target.keys]


@pytest.mark.parametrize(("var", "value"), [("TILELANG_ROUTE", "cutedsl"), ("TILELANG_ROUTE", "cuda->cutedsl"),
                                            ("TILELANG_USE_CUTEDSL", "1")])
def test_opted_in_a_supported_kernel_moves(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    context = context_for(tile_copy_scale())
    assert context.module.name == "cutedsl"
    assert "cutedsl" in [str(k) for k in context.target.keys]
    assert context.route.describe() == ("routed 'cuda' -> 'cutedsl' by router 'cutedsl': supported by cutedsl "
                                        "and opted in")
    assert "routed 'cuda' -> 'cutedsl'" in context.describe()


def test_an_unsupported_kernel_stays_on_cuda_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_ROUTE", "cutedsl")
    artifact = tilelang.lower(atomic_sum(), target="cuda")
    assert artifact.target_backend == "cuda"
    assert artifact.route == "stays on 'cuda' (router 'cutedsl': cutedsl does not lower atomics)"
    assert "__global__" in artifact.device_source


def test_routing_to_cutedsl_for_a_run_needs_its_execution_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilelang.cutedsl import target

    monkeypatch.setenv("TILELANG_ROUTE", "cutedsl")
    monkeypatch.setattr(target, "unavailable_reason", lambda: "no GPU (test)")
    from tilelang.backend.registry import REGISTRY
    from tilelang.backend.resolution import execution_specs
    from tilelang.backend.routing import route_kernel
    from tvm.target import Target

    route = route_kernel(tile_copy_scale(), "main", Target({"kind": "cuda", "arch": "sm_90"}),
                         REGISTRY.backends["cuda"], "explicit", "auto", execution_specs)
    assert route.describe() == (
        "stays on 'cuda' (router 'cutedsl': not moved to 'cutedsl' (supported by cutedsl and opted in): no "
        "execution backend of 'cutedsl' can run it here (cutedsl: no GPU (test)))")


def test_explicit_target(monkeypatch: pytest.MonkeyPatch) -> None:
    context = context_for(tile_copy_scale(), target="cutedsl")
    assert context.module.name == "cutedsl" and context.route is None
    assert context.target_source == "alias 'cutedsl'"


def test_routes_keep_separate_cache_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    native = context_for(tile_copy_scale())
    monkeypatch.setenv("TILELANG_ROUTE", "cutedsl")
    routed = context_for(tile_copy_scale())
    assert native.fingerprint() != routed.fingerprint()
    assert "route=routed 'cuda' -> 'cutedsl'" in routed.fingerprint()
    assert "route=" not in native.fingerprint()


def test_an_extension_kernel_routes_to_cutedsl_without_opt_in() -> None:
    artifact = tilelang.lower(swizzled_transpose(), target="cuda")
    assert artifact.target_backend == "cutedsl"
    assert artifact.route == ("routed 'cuda' -> 'cutedsl' by T.ext: uses T.ext.swizzled_shared, which target "
                              "backend 'cutedsl' provides")
    assert "cute.make_swizzle(3, 3, 3)" in artifact.device_source


def test_the_cuda_backend_refuses_an_extension_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_ROUTE", "none")
    with pytest.raises(LanguageError, match=re.escape(
            "kernel 'main' uses T.ext.swizzled_shared, which target backend 'cuda' does not implement "
            "(provided by target backend(s) 'cutedsl': compile it with target='cutedsl'; routing is off "
            "(TILELANG_ROUTE=none))")):
        tilelang.lower(swizzled_transpose(), target="cuda")


def test_explicit_cutedsl_refuses_what_it_does_not_lower() -> None:
    """Atomics compile on cutedsl (CuTe DSL's atomic functions) for the types those take."""
    import tilelang.language as T

    assert "cute.arch.atomic_add(" in tilelang.lower(atomic_sum(), target="cutedsl").device_source

    @T.prim_func
    def half_sum(A: T.Tensor((128,), "float16"), B: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                T.atomic_add(B[0], A[i])

    with pytest.raises(LanguageError, match=re.escape(
            "kernel 'half_sum': T.atomic_add on B (float16): CuTe DSL has atomic adds for float32, int32, uint32; "
            "use one of those types")):
        tilelang.lower(half_sum, target="cutedsl")


def test_scalar_parameters_are_taken() -> None:
    """A float scalar is passed by value to the CuTe DSL launch (after the pointers)."""
    from tilelang.cutedsl.router import unsupported_reason
    from tilelang.testing.kernels import saxpy

    func = saxpy(200)
    assert unsupported_reason(func) is None
    source = tilelang.lower(func, target="cutedsl").device_source
    assert "def launch(p0: cute.Pointer, p1: cute.Pointer, s_a: cutlass.Float32, stream: cuda.CUstream):" in source
    assert "def main_kernel(X_ptr: cute.Tensor, Y_ptr: cute.Tensor, a: cutlass.Float32):" in source


def test_gemms_that_would_take_simt_loops_stay_on_cuda() -> None:
    """Tensor-core GEMMs are taken; a float32 one would run SIMT loops here, tens of times
    slower: its reason says what MMA atoms need."""
    from tilelang.cutedsl.router import unsupported_reason
    from tilelang.testing.kernels import tile_gemm

    assert unsupported_reason(tile_gemm(256, 256, 128, relu=True)) is None
    assert unsupported_reason(tile_gemm(256, 256, 128, dtype="float32")) == (
        "T.gemm into 'Cl' on CuTe MMA atoms (it needs float16/bfloat16 operands, B in shared memory, a float32 "
        "accumulator and tiles the warps divide; else it takes SIMT loops)")


def test_gemms_staged_through_shared_memory_every_iteration_stay_on_cuda() -> None:
    """Flash attention's GEMMs would take their tiles through shared memory per key block
    (12x slower than cuda on the H200): it stays on cuda, and says so; a GEMM staged once
    (a product, then its row sums) is taken."""
    from tilelang.cutedsl.router import unsupported_reason
    from tilelang.testing.kernels import flash_attention

    assert unsupported_reason(flash_attention(1, 2, 128, 64)) == (
        "T.gemm into 'acc_s' in a loop at speed: other tile ops read its accumulator, so every iteration would take "
        "it through shared memory (flash attention ran at 0.08x the cuda path); target=\"cutedsl\" still compiles it")
    assert unsupported_reason(row_sum_of_product()) is None

