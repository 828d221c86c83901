"""Registration, manifest declarations, what `tilelang backends list` says, and the CPU
pipeline's direct-call variant that cython compiles (tvm_ffi's packed path unchanged)."""

from __future__ import annotations

import json
import subprocess
import sys

import tilelang
from tilelang.backend import create_backend_context, registered_backends
from tilelang.backend.registry import REGISTRY, origin
from tilelang.engine.lower import lower_with_context as lower
from tilelang.jit.adapter.cython import toolchain
from tilelang.jit.adapter.cython.backend import CythonExecutionBackend
from tilelang.testing.kernels import row_softmax_sum

DIST = "tilelang-exec-cython"


def test_plugin_registers_cython_from_its_distribution() -> None:
    backend = REGISTRY.execution_backends["cython"]
    assert isinstance(backend, CythonExecutionBackend)
    assert origin("execution", "cython")[0] == DIST
    # the shared version, the launcher templates and the Python ABI (they enter cache keys)
    assert backend.version == f"{tilelang.__version__}+{toolchain.templates_digest()[:16]}{toolchain.SUFFIX}"
    assert backend.description


def test_manifests_declare_cython_after_their_other_backends() -> None:
    cpu = registered_backends()["cpu"]
    assert [s.name for s in cpu.execution_backends] == ["tvm_ffi", "cython"]
    spec = cpu.spec("cython")
    assert spec.direct_call and spec.requires_host_codegen and not spec.requires_device_compile
    c = create_backend_context("c", execution_backend=None).target
    assert spec.supports_target(c)
    if "cuda" in registered_backends():
        cuda = registered_backends()["cuda"]
        assert [s.name for s in cuda.execution_backends][-1] == "cython"
        spec = cuda.spec("cython")
        assert not spec.requires_host_codegen and not spec.requires_device_compile


def test_auto_still_prefers_tvm_ffi() -> None:
    assert create_backend_context("c").execution_backend.name == "tvm_ffi"
    assert create_backend_context("c", execution_backend="cython").execution_backend.name == "cython"


def test_import_tilelang_does_not_import_cython_or_a_compiler() -> None:
    code = (
        "import sys, tilelang\n"
        "from tilelang.backend.registry import REGISTRY\n"
        "assert 'cython' in REGISTRY.execution_backends\n"
        "print(sorted(m for m in ('Cython', 'torch', 'tvm', 'numpy') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_backends_list_json_shows_cython() -> None:
    out = subprocess.run([sys.executable, "-m", "tilelang", "backends", "list", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    entry = next(e for e in data["execution_backends"] if e["name"] == "cython")
    assert entry["distribution"] == DIST and "cpu" in entry["used_by"]
    why = toolchain.unavailable_reason()
    assert (entry["status"], entry["reason"]) == (("available", None) if why is None else ("unavailable", why))
    plugin = next(p for p in data["plugins"] if p["name"] == "cython")
    assert plugin["status"] == "loaded" and plugin["distribution"] == DIST


def test_cpu_direct_call_variant_is_a_bare_c_function() -> None:
    context = create_backend_context("c", execution_backend="cython")
    artifact = lower(row_softmax_sum(19), context, out_idx=[-1])
    (launch,) = artifact.launches
    assert launch.args == ("param:0", "param:2", "M", "scale")
    assert launch.arg_types == ("handle", "handle", "int32", "float32")
    assert launch.grid == launch.block == ("1", "1", "1")
    source = artifact.host_source
    assert f"int32_t {launch.symbol}(float* A_ptr, float* S_ptr, int32_t M, float scale)" in source
    # no packed entry, no TVM runtime call: scratch buffers live on the stack
    assert "__tvm_ffi_main" not in source and "TVMBackend" not in source and "TVMFFI" not in source
    assert "float row_max_ptr[1];" in source


def test_tvm_ffi_keeps_the_packed_entry() -> None:
    context = create_backend_context("c", execution_backend="tvm_ffi")
    artifact = lower(row_softmax_sum(19), context, out_idx=[-1])
    assert "__tvm_ffi_main" in artifact.host_source and artifact.launches == ()
    llvm = lower(row_softmax_sum(19), create_backend_context("llvm", execution_backend="tvm_ffi"), out_idx=[-1])
    assert llvm.launches == () and llvm.host_module is not None
