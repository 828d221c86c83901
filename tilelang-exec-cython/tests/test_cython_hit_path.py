"""What loading a cached launcher costs a new process: only the runtime libraries its
extension names (a CUDA launcher: none; a host kernel's: libtvm_ffi, loaded when the
dynamic loader asks for it), and no numpy.ma until an ndarray subclass arrives, while
masked arrays stay refused. Shared libraries are read from /proc/self/maps (Linux)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tilelang.jit.adapter.cython import toolchain
from tilelang.testing.kernels import row_softmax_sum

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")

PROBE = textwrap.dedent("""
    import json, sys

    def report(**extra):
        maps = open("/proc/self/maps").read()
        print(json.dumps({"tvm": "tvm" in sys.modules, "numpy.ma": "numpy.ma" in sys.modules,
                          "libtvm_ffi": "libtvm_ffi." in maps, "libtvm_runtime": "libtvm_runtime." in maps,
                          **extra}))
""")

HOST_HIT = PROBE + textwrap.dedent("""
    import numpy as np
    import tilelang
    from tilelang.errors import ArgumentError
    from tilelang.testing.kernels import row_softmax_sum

    masked_before = "numpy.ma" in sys.modules  # numpy's own import may bring it
    kernel = tilelang.jit(out_idx=[-1], target="c", execution_backend="cython")(row_softmax_sum)(23)
    loaded = {"from_cache": kernel.from_cache, "masked_before": masked_before, "ma_at_load": "numpy.ma" in sys.modules}
    a = np.linspace(-1, 1, 5 * 23, dtype="float32").reshape(5, 23)
    expected = 0.5 * np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)
    view = a.view(type("Subclass", (np.ndarray,), {}))  # an ndarray subclass, not a masked array
    subclass_ok = bool(np.allclose(kernel(view, 0.5), expected, rtol=1e-5))
    try:
        kernel(np.ma.masked_array(a, mask=a < 0), 0.5)
        refused = None
    except ArgumentError as err:
        refused = str(err)
    plain_ok = bool(np.allclose(kernel(a, 0.5), expected, rtol=1e-5))
    report(**loaded, subclass_ok=subclass_ok, refused=refused, plain_ok=plain_ok)
""")


def child(code: str, cache: Path) -> dict:
    env = dict(os.environ, TILELANG_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_host_kernel_hit_loads_tvm_ffi_on_demand_and_numpy_ma_on_a_subclass(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    child(HOST_HIT, cache)  # compiles, or finds it
    for _ in range(3):  # others editing the checkout change the request key: compiled again
        hit = child(HOST_HIT, cache)
        if hit["from_cache"]:
            break
    assert hit["from_cache"], hit
    if hit["masked_before"]:
        pytest.skip("this numpy imports numpy.ma itself")
    assert not hit["tvm"] and not hit["ma_at_load"], hit
    assert hit["libtvm_ffi"], hit  # its launcher raises compute errors through TVM FFI
    assert hit["subclass_ok"] and hit["plain_ok"], hit
    assert hit["refused"] is not None and "a numpy masked array is refused" in hit["refused"], hit
    assert hit["numpy.ma"], hit


LOAD_ENTRY = PROBE + textwrap.dedent("""
    import os
    if LAZY_BINDING:
        sys.setdlopenflags(os.RTLD_LAZY)
    from pathlib import Path
    from tilelang.cache.validate import load_artifact
    from tilelang.errors import BackendUnavailableError
    from tilelang.jit.adapter.cython.backend import CythonExecutionBackend

    entry = Path(ENTRY)
    artifact = load_artifact((entry / "artifact.json").read_text())
    try:
        CythonExecutionBackend().load(artifact, entry, None)
    except BackendUnavailableError:  # no CUDA driver here: the extension loaded all the same
        pass
    report()
""")


def cuda_entry(folder: Path) -> Path:
    """A kernel cache entry's files for a CUDA kernel through cython: its launcher (built
    without a GPU, header or driver), artifact and a cubin (only read at the first call)."""
    pytest.importorskip("tilelang.cuda")
    from tilelang.backend import create_backend_context
    from tilelang.engine.lower import lower_with_context as lower
    from tilelang.jit.adapter.cython.backend import (
        CUBIN,
        CUDA_DEVICE,
        extension_sources,
    )

    context = create_backend_context({"kind": "cuda", "arch": "sm_90"}, execution_backend=None)
    artifact = lower(row_softmax_sum(96), context, out_idx=[-1])
    name, data = toolchain.build_extension(extension_sources(artifact, CUDA_DEVICE), artifact.kernel_name)
    entry = folder / "entry"
    entry.mkdir()
    (entry / name).write_bytes(data)
    (entry / CUBIN).write_bytes(b"not a cubin")
    (entry / "artifact.json").write_text(artifact.to_json())
    return entry


@pytest.mark.parametrize("lazy", [False, True], ids=["immediate binding", "lazy binding"])
def test_a_cuda_launcher_loads_no_tvm_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lazy: bool) -> None:
    """With lazy binding every library comes first: a missing symbol would surface at its
    first call, too late to load its library."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    code = LOAD_ENTRY.replace("ENTRY", repr(str(cuda_entry(tmp_path)))).replace("LAZY_BINDING", str(lazy))
    loaded = child(code, tmp_path / "cache")
    assert not loaded["tvm"] and not loaded["numpy.ma"], loaded
    assert loaded["libtvm_ffi"] == lazy and loaded["libtvm_runtime"] == lazy, loaded
