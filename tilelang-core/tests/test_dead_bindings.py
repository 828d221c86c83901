"""DropDeadBindings (backend/pass_pipeline/dead_bindings.py): a binding nothing reads goes,
unless its value has an effect; chains of dead bindings go together. The CUDA and ROCm
pipelines run it after their device-side StmtSimplify (tilelang-cuda's
test_device_dead_bindings.py checks the generated source)."""

from __future__ import annotations

import tvm
import tvm_ffi
from tilelang.backend.pass_pipeline import DropDeadBindings
from tvm import tirx
from tvm.script import tirx as S


def bound_names(func) -> list[str]:
    names: list[str] = []
    tvm_ffi.structural_walk(func.body, (tirx.Bind, lambda b: names.append(b.var.name)))
    return names


def dropped(func):
    return DropDeadBindings()(tvm.IRModule({"main": func}))["main"]


@S.prim_func
def dead_and_live(A: S.Buffer((64,), "int32"), n: S.int32):
    dead: S.let[S.int32] = n * 4 + 1  # noqa: F841 (unread on purpose)
    chained: S.let[S.int32] = n + 2
    dead_too: S.let[S.int32] = chained * 3  # noqa: F841 (unread on purpose)
    live: S.let[S.int32] = n * 8
    A[live] = 1


@S.prim_func
def effect_kept(A: S.Buffer((64,), "int32"), n: S.int32):
    drawn: S.let[S.int32] = S.call_extern("int32", "next_random", n)  # noqa: F841 (unread on purpose)
    loaded: S.let[S.int32] = A[n]  # noqa: F841 (unread on purpose)
    A[0] = n


def test_unread_bindings_go_and_read_ones_stay() -> None:
    assert bound_names(dead_and_live) == ["dead", "chained", "dead_too", "live"]
    assert bound_names(dropped(dead_and_live)) == ["live"]


def test_a_value_with_an_effect_stays_and_a_load_goes() -> None:
    # call_extern may do anything (TVM's Opaque effect); a buffer load only reads
    assert bound_names(dropped(effect_kept)) == ["drawn"]


def test_nothing_to_drop_keeps_the_function() -> None:
    @S.prim_func
    def all_read(A: S.Buffer((64,), "int32"), n: S.int32):
        i: S.let[S.int32] = n + 1
        A[i] = i

    assert bound_names(dropped(all_read)) == ["i"]
