"""``import tilelang.language`` imports no TVM: the language's names load on first use (PEP
562, tilelang.language._surface), so a kernel module written the upstream way (``import
tilelang.language as T`` at its top, a ``@tilelang.jit`` builder) gets its kernel from the
disk cache in a new process without importing TVM (tilelang.jit.request_key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tilelang.errors import LanguageError
from tilelang.jit.request_key import REQUEST_CACHE_ENV

UPSTREAM_STYLE = textwrap.dedent(
    """
    import tilelang
    import tilelang.language as T


    @tilelang.jit(out_idx=[-1], target="cpu", execution_backend={backend!r})
    def scaled_add(M, N, block_M=8, dtype="float32"):
        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=8) as bx:
                for i, j in T.Parallel(block_M, N):
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] * 3.0 + B[bx * block_M + i, j]

        return main
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {folder!r})
    import upstream_style
    after_import = "tvm" in sys.modules
    kernel = upstream_style.scaled_add(16, 8)
    tvm_at_hit = "tvm" in sys.modules
    import numpy as np
    a = np.arange(128, dtype="float32").reshape(16, 8)
    ok = bool(np.array_equal(kernel(a, a), a * 4))
    print(json.dumps({{"after_import": after_import, "from_cache": kernel.from_cache,
                      "tvm_at_hit": tvm_at_hit, "ok": ok}}))
    """
)


def run(code: str, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["tvm_ffi", "cython"])
def test_an_upstream_style_kernel_module_hits_the_cache_without_tvm(tmp_path: Path, backend: str) -> None:
    if backend == "cython":
        pytest.importorskip("Cython")
    (tmp_path / "upstream_style.py").write_text(UPSTREAM_STYLE.format(backend=backend))
    # no bytecode: the module is written once, but a stale .pyc must not stand in for it
    env = {"TILELANG_CACHE_DIR": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1",
           REQUEST_CACHE_ENV: "1"}
    child = CHILD.format(folder=str(tmp_path))
    cold = run(child, env)
    hit = run(child, env)
    assert cold == {"after_import": False, "from_cache": False, "tvm_at_hit": True, "ok": True}
    assert hit == {"after_import": False, "from_cache": True, "tvm_at_hit": False, "ok": True}


def test_names_load_on_first_use_and_become_plain_attributes() -> None:
    result = run(textwrap.dedent(
        """
        import json, sys
        import tilelang.language as T
        before = "tvm" in sys.modules
        kernel = T.Kernel
        from tilelang.language.kernel import Kernel
        print(json.dumps({"before": before, "after": "tvm" in sys.modules, "same": kernel is Kernel,
                          "published": "Kernel" in vars(T) and "float16" in vars(T),
                          "tirx": callable(T.int32) and callable(T.evaluate),
                          "dir": {"Kernel", "gemm", "prim_func"} <= set(dir(T))}))
        """))
    assert result == {"before": False, "after": True, "same": True, "published": True, "tirx": True,
                      "dir": True}


def test_a_dunder_probe_loads_nothing() -> None:
    result = run(textwrap.dedent(
        """
        import json, sys
        import tilelang.language as T
        probes = [hasattr(T, name) for name in ("__wrapped__", "__version__", "__torch_function__")]
        print(json.dumps({"probes": probes, "tvm": "tvm" in sys.modules}))
        """))
    assert result == {"probes": [False, False, False], "tvm": False}


def test_star_import_and_unknown_names_behave_as_before() -> None:
    import tilelang.language as T

    namespace: dict[str, object] = {}
    exec("from tilelang.language import *", namespace)  # noqa: S102 - a star import needs a namespace
    assert set(T.__all__) <= set(namespace)
    assert namespace["gemm"] is T.gemm and T.__cos is namespace["__cos"]
    with pytest.raises(LanguageError, match=r"T\.tma_load is a Hopper \(sm_90\) primitive .* T\.Pipelined"):
        T.tma_load  # noqa: B018
    with pytest.raises(AttributeError, match=r"module 'tilelang.language' has no attribute 'no_such_name'"):
        T.no_such_name  # noqa: B018
    assert not hasattr(T, "no_such_name")
