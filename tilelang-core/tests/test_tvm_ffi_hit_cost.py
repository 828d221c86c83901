"""What a tvm_ffi disk-cache hit in a new process does, pinned where it is cheap to lose:

- in a torch program, the hit and a call with torch tensors import two modules of
  tilelang's (the request key and the C ABI caller) and nothing else: no ``tvm``, not even
  ``tvm_ffi`` (the library is called through libtvm_ffi's C ABI), no language, engine or
  transform module; the kernel computes what the cold one did, and a numpy call imports
  tvm_ffi;
- the request key reads two remembered fingerprints, one for the compiler's sources and one
  for every plugin distribution together (``distributions_fingerprint``), not one per plugin;
- ``distributions_fingerprint`` changes when an editable plugin's source or a wheel
  plugin's RECORD changes, and names a distribution that is not installed.

Why a hit does not import tvm_ffi is in architecture note 66.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_plugins import dist_info
from tilelang.jit import fingerprint

KERNELS = textwrap.dedent(
    """
    import tilelang
    import tilelang.language as T  # at module level, as upstream kernels import it


    @tilelang.jit(out_idx=[-1], target="cpu", execution_backend="tvm_ffi")
    def add(M, N, block_M=32, dtype="float32"):
        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=32) as bx:
                for i, j in T.Parallel(block_M, N):
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]

        return main
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import torch  # a torch program: tvm_ffi's own import of torch is paid already
    sys.path.insert(0, {folder!r})
    import kernels
    from tilelang.cache import integrity

    reads = []
    read_file = integrity.read_file

    def counting(path, *args, **kwargs):
        reads.append(path.parent.name)
        return read_file(path, *args, **kwargs)

    integrity.read_file = counting  # tree_fingerprint imports it at each call
    before = set(sys.modules)
    kernel = kernels.add(64, {cols})
    a = torch.arange(64 * {cols}, dtype=torch.float32).reshape(64, {cols})
    ok = bool(torch.equal(kernel(a, a), a + a))
    new = [name for name in sys.modules if name not in before]
    # a call the fast binder does not take (numpy arrays) goes through tvm_ffi, imported for it
    n = a.numpy()
    numpy_ok = bool(np.array_equal(kernel(n, n), n + n)) and "tvm_ffi" in sys.modules
    print(json.dumps({{"from_cache": kernel.from_cache, "ok": ok, "new": new, "numpy_ok": numpy_ok,
                      "fingerprint_reads": reads.count("fingerprints")}}))
    """
)


def run(folder: Path, cols: int = 16) -> dict:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TILELANG_JIT_REQUEST_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", CHILD.format(folder=str(folder), cols=cols)], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_tvm_ffi_hit_imports_the_request_key_and_the_c_abi_caller_only(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "kernels.py").write_text(KERNELS)
    for attempt in range(3):  # others editing this checkout change the request key: compiled again
        cols = 16 * (attempt + 1)  # a kernel no earlier attempt compiled, so the first run is cold
        cold, hit = run(tmp_path, cols), run(tmp_path, cols)
        if hit["from_cache"]:
            break
    assert cold["ok"] and not cold["from_cache"] and "tvm" in cold["new"], cold
    assert hit["from_cache"] and hit["ok"] and hit["numpy_ok"], hit
    third_party = sorted({name.partition(".")[0] for name in hit["new"]} - set(sys.stdlib_module_names)
                         - {"tilelang"})
    assert not third_party, (
        f"a tvm_ffi hit and its call with torch tensors imported {third_party}: the library is loaded "
        "and called through libtvm_ffi's C ABI (tilelang.jit.adapter.tvm_ffi.direct), and anything "
        "else is imported where a compile needs it, not where a cached kernel is loaded")
    ours = [name for name in hit["new"] if name.startswith("tilelang")]
    assert set(ours) <= {"tilelang.jit.request_key", "tilelang.jit.adapter.tvm_ffi.direct"}, (
        f"a tvm_ffi hit imported {ours}: a hit needs the request key (tilelang.jit.request_key) and "
        "the C ABI caller (tilelang.jit.adapter.tvm_ffi.direct) only; "
        "import the others where the compile path uses them")
    assert hit["fingerprint_reads"] <= 2, (
        f"the request key read {hit['fingerprint_reads']} remembered fingerprints: one for the compiler "
        "and one for all plugins together (fingerprint.distributions_fingerprint) are enough")


# -- distributions_fingerprint -------------------------------------------------------------


def fresh(*names: str) -> str:
    return fingerprint.distributions_fingerprint.__wrapped__(frozenset(names))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An editable 'acme-edit' (sources through a .pth) and a wheel-installed 'acme-whl'."""
    site = tmp_path / "site"
    source = tmp_path / "project" / "src" / "acme_edit" / "passes.py"
    source.parent.mkdir(parents=True)
    source.write_text("def acme_pass(func):\n    return func\n")
    site.mkdir()
    (site / "_acme_edit.pth").write_text(f"{tmp_path / 'project' / 'src'}\n")
    dist_info(site, "acme-edit", ["_acme_edit.pth,,"],
              {"dir_info": {"editable": True}, "url": (tmp_path / "project").as_uri()})
    (site / "acme_whl").mkdir()
    (site / "acme_whl" / "passes.py").write_text("X = 1\n")
    dist_info(site, "acme-whl", ["acme_whl/passes.py,sha256=AAAA,6"])
    monkeypatch.syspath_prepend(str(site))
    return site


def test_an_edited_editable_plugin_changes_the_distributions_fingerprint(site: Path, tmp_path: Path) -> None:
    first = fresh("acme-edit", "acme-whl")
    assert fresh("acme-whl", "acme-edit") == first  # stable, whatever the order
    (tmp_path / "project" / "src" / "acme_edit" / "passes.py").write_text("def acme_pass(func):\n    return 1\n")
    assert fresh("acme-edit", "acme-whl") != first


def test_a_reinstalled_wheel_plugin_changes_the_distributions_fingerprint(site: Path) -> None:
    first = fresh("acme-edit", "acme-whl")
    record = next(site.glob("acme_whl-*.dist-info")) / "RECORD"
    record.write_text(record.read_text().replace("AAAA", "BBBB"))
    assert fresh("acme-edit", "acme-whl") != first


def test_a_plugin_that_is_not_installed_is_named(site: Path) -> None:
    assert fresh("acme-whl") != fresh("acme-whl", "no-such-distribution-here")
    assert fresh("no-such-distribution-here") != fresh("another-missing-one")


def test_a_distribution_without_a_record_hashes_as_distribution_fingerprint(site: Path) -> None:
    (next(site.glob("acme_whl-*.dist-info")) / "RECORD").unlink()
    first = fresh("acme-whl")
    (site / "acme_whl-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-whl\nVersion: 2.0\n")
    fingerprint.distribution_fingerprint.cache_clear()
    assert fresh("acme-whl") != first


def test_a_fresh_request_key_lists_each_folder_once_plugins_included(monkeypatch: pytest.MonkeyPatch) -> None:
    """Core's folders and every editable plugin's (``distributions_fingerprint``) in one walk:
    no folder listed twice, and the plugins' folders listed at all when their fingerprints
    are computed afresh (the per-process caches emptied)."""
    from tilelang.backend.registry import REGISTRY, origin
    from tilelang.jit.request_key import request_key

    def builder(M: int) -> int:
        return M

    request_key(builder, (4,), {}, {"target": "cpu"})
    plugins = {origin("execution", name)[0] for name in REGISTRY.execution_backends} - {"tilelang-core"}
    roots = [root for name in plugins
             for root in fingerprint.editable_source_roots(fingerprint_dist(name)) or ()]
    listed: list[str] = []
    scandir = os.scandir

    def counting(path: str) -> object:
        listed.append(path)
        return scandir(path)

    for cached in (fingerprint.compiler_fingerprint, fingerprint.distributions_fingerprint):
        cached.cache_clear()
    monkeypatch.setattr(fingerprint.os, "scandir", counting)
    request_key(builder, (4,), {}, {"target": "cpu"})
    assert listed and len(listed) == len(set(listed)), sorted(p for p in listed if listed.count(p) > 1)
    assert all(str(root) in listed for root in roots), (roots, listed)


def fingerprint_dist(name: str) -> object:
    import importlib_metadata

    return importlib_metadata.distribution(name)
