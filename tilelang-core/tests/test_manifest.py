"""BackendModule validation and create_backend_context resolution, in process.

Manifests are validated when constructed, so a plugin author sees a ManifestError that
names the backend and the field at import time, not a KeyError mid-compilation. Context
resolution is checked against core's built-ins only (cpu + tvm_ffi): the
``core_builtins_only`` fixture reloads the entry points with TILELANG_PLUGINS_ALLOW, so
that whatever else this environment has installed (a CUDA backend, say) cannot change the
answers.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest
import tilelang
from tilelang import BackendNotFoundError, ManifestError
from tilelang.backend import (
    BackendModule,
    DeviceCodegen,
    ExecutionBackendSpec,
    PassPipeline,
    create_backend_context,
    register_backend,
    registered_backends,
    registered_execution_backends,
)


def _no_passes(context: Any) -> list[Any]:
    return []


PIPELINE = PassPipeline("toy", _no_passes, _no_passes, _no_passes)
CODEGEN = DeviceCodegen(source_only=lambda mod, target: "")


def toy_manifest(**overrides: Any) -> BackendModule:
    """A valid manifest for an imaginary kind, with some fields replaced."""
    fields: dict[str, Any] = dict(
        name="toy",
        target_kinds=("toy_kind",),
        pipelines={"toy_kind": PIPELINE},
        device_codegens={"toy_kind": CODEGEN},
        execution_backends=(ExecutionBackendSpec("tvm_ffi"),),
    )
    fields.update(overrides)
    return BackendModule(**fields)


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


# -- BackendModule validation -----------------------------------------------------------------


def test_valid_manifest_is_frozen() -> None:
    module = toy_manifest(pipelines={"toy_kind": "tilelang.cpu.pipeline:CPU_PIPELINE"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        module.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        module.pipelines["cuda"] = PIPELINE  # type: ignore[index]
    from tilelang.cpu.pipeline import CPU_PIPELINE

    assert module.pipeline("toy_kind") is CPU_PIPELINE  # references resolve on first use


def test_owned_kind_without_pipeline() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy'): pipelines has no entry for owned kind(s) ['other_kind']"
    )):
        toy_manifest(target_kinds=("toy_kind", "other_kind"))


def test_pipeline_for_kind_not_owned() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy'): pipelines has entries for kinds it does not own: ['cuda']"
    )):
        toy_manifest(pipelines={"toy_kind": PIPELINE, "cuda": PIPELINE})


def test_owned_kind_without_device_codegen() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy'): device_codegens has no entry for owned kind(s) ['toy_kind']"
    )):
        toy_manifest(device_codegens={})


def test_no_target_kinds() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy'): target_kinds must be a non-empty tuple of kind names"
    )):
        toy_manifest(target_kinds=())


@pytest.mark.parametrize("execution_backends", [(), ("tvm_ffi",)], ids=["empty", "names-not-specs"])
def test_execution_backends_must_be_specs(execution_backends: tuple[Any, ...]) -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy'): execution_backends must be a non-empty tuple of ExecutionBackendSpec"
    )):
        toy_manifest(execution_backends=execution_backends)


def test_duplicate_execution_backend_specs() -> None:
    specs = (ExecutionBackendSpec("tvm_ffi"), ExecutionBackendSpec("nvrtc"), ExecutionBackendSpec("tvm_ffi"))
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy'): execution_backends lists a name twice: ['tvm_ffi', 'nvrtc', 'tvm_ffi']"
    )):
        toy_manifest(execution_backends=specs)


@pytest.mark.parametrize("name", ["Toy", "toy-backend", "9toy", "", "toy backend"])
def test_name_must_be_lower_snake_case(name: str) -> None:
    with pytest.raises(ManifestError, match=exactly(f"BackendModule({name!r}): name must be lower_snake_case")):
        toy_manifest(name=name)


def test_execution_backend_spec_name_must_be_lower_snake_case() -> None:
    with pytest.raises(ManifestError, match=exactly("ExecutionBackendSpec name 'NVRTC' must be lower_snake_case")):
        ExecutionBackendSpec("NVRTC")


def test_aliases_need_a_default_target() -> None:
    with pytest.raises(ManifestError, match=exactly("BackendModule('toy'): aliases ('toy',) need a default_target")):
        toy_manifest(aliases=("toy",))
    assert toy_manifest(aliases=("toy",), default_target=lambda: "llvm").aliases == ("toy",)


def test_malformed_reference() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy').pipelines['toy_kind']: 'toy.pipeline.PIPELINE' is not a "
        "'package.module:attribute' reference"
    )):
        toy_manifest(pipelines={"toy_kind": "toy.pipeline.PIPELINE"})


def test_reference_to_a_missing_module() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy').device_codegens['toy_kind']: module 'tilelang_no_such_backend.codegen' "
        "of reference 'tilelang_no_such_backend.codegen:CODEGEN' cannot be found"
    )):
        toy_manifest(device_codegens={"toy_kind": "tilelang_no_such_backend.codegen:CODEGEN"})


def test_component_of_the_wrong_type() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy').pipelines['toy_kind'] must be a PassPipeline or a reference, got 42"
    )):
        toy_manifest(pipelines={"toy_kind": 42})


def test_predicate_must_be_callable() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "BackendModule('toy'): supports_target must be callable or None"
    )):
        toy_manifest(supports_target=True)


# -- create_backend_context -------------------------------------------------------------------


@pytest.fixture(scope="module")
def core_builtins_only() -> Iterator[None]:
    """Entry points reloaded with only core's built-ins allowed; the full set afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILELANG_PLUGINS_ALLOW", "cpu,tvm_ffi")
        mp.delenv("TILELANG_PLUGINS_DENY", raising=False)
        mp.delenv("TILELANG_PLUGINS_STRICT", raising=False)
        tilelang.load_plugins(force=True)
        assert sorted(registered_backends()) == ["cpu"]
        assert sorted(registered_execution_backends()) == ["tvm_ffi"]
        yield
    tilelang.load_plugins(force=True)


core_only = pytest.mark.usefixtures("core_builtins_only")


@core_only
def test_auto_resolves_to_the_cpu() -> None:
    context = create_backend_context()
    assert context.module.name == "cpu"
    assert context.target_source == "auto (cpu)"
    assert context.target.kind.name in {"llvm", "c"}
    assert context.execution_backend.name == "tvm_ffi"
    assert context.execution_spec.requires_device_compile is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.module = toy_manifest()  # type: ignore[misc]


@core_only
def test_cpu_alias() -> None:
    context = create_backend_context("cpu")
    assert context.module.name == "cpu"
    assert context.target_source == "alias 'cpu'"
    assert context.describe().startswith("target backend 'cpu' (")


@core_only
@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_explicit_cpu_kinds(kind: str) -> None:
    context = create_backend_context(kind)
    assert context.module.name == "cpu"
    assert context.target_source == "explicit"
    assert context.target.kind.name == kind
    assert context.target_host.kind.name == kind  # a CPU target is its own host
    assert context.execution_backend.name == "tvm_ffi"


@core_only
def test_cuda_without_a_cuda_backend_says_what_to_install() -> None:
    with pytest.raises(BackendNotFoundError) as info:
        create_backend_context("cuda")
    message = str(info.value)
    assert message.startswith("no installed target backend handles target kind 'cuda' (target ")
    assert "Installed target backends: cpu (llvm/c)." in message
    assert message.endswith("To fix: pip install 'tilelang[cuda]'")


@core_only
def test_execution_backend_the_cpu_backend_does_not_declare() -> None:
    # nvrtc is installed here but left out by the fixture's allow-list: the error says so
    with pytest.raises(BackendNotFoundError, match=(
        "^" + re.escape("target backend 'cpu' cannot use execution backend 'nvrtc'; it declares: tvm_ffi, cython")
        + r"(\. Note: 'nvrtc' was claimed by a plugin that is not used: plugin 'nvrtc' from "
        r"tilelang-exec-nvrtc \S+ disabled: disabled by TILELANG_PLUGINS_ALLOW)?$"
    )):
        create_backend_context("cpu", execution_backend="nvrtc")


@core_only
def test_unparsable_target() -> None:
    with pytest.raises(BackendNotFoundError, match=r"^cannot parse target 'no_such_kind': "):
        create_backend_context("no_such_kind")


@core_only
def test_registering_a_second_backend_with_a_taken_name() -> None:
    with pytest.raises(ManifestError, match=exactly(
        "target backend 'cpu' is already registered (by tilelang-core); backend names must be unique"
    )):
        register_backend(toy_manifest(name="cpu"))
    assert sorted(registered_backends()) == ["cpu"]
