"""Launcher caching: the kernel cache stores the built extension (a fresh process loads it
without Cython or a compiler), the extension cache keyed by source hash serves other
kernel cache entries (both live under one cache root), and concurrent builders of one
kernel agree on one file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import tilelang
from tilelang.jit.adapter.cython import toolchain
from tilelang.testing.kernels import row_softmax_sum

# a child process: compile (or load) row_softmax_sum(23) for cython and check one call;
# FORBID_BUILD makes any Cython/C compiler run fail, so a pass proves nothing was built
CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    import tilelang
    from tilelang.jit.adapter.cython import toolchain
    from tilelang.testing.kernels import row_softmax_sum

    if os.environ.get("FORBID_BUILD"):
        def refuse(command, what, kernel, cwd):
            raise AssertionError(f"{what} ran in a process that must not compile")
        toolchain._run = refuse
    kernel = tilelang.compile(row_softmax_sum(23), out_idx=[-1], target="c", execution_backend="cython")
    a = np.linspace(-1, 1, 5 * 23, dtype="float32").reshape(5, 23)
    expected = 0.5 * np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)
    np.testing.assert_allclose(kernel(a, 0.5), expected, rtol=1e-5)
    print("from_cache" if kernel.from_cache else "compiled", type(kernel.launcher).__module__)
""")


def run_child(cache: Path, forbid_build: bool = False) -> list[str]:
    env = dict(os.environ, TILELANG_CACHE_DIR=str(cache))
    if forbid_build:
        env["FORBID_BUILD"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split()


def test_a_fresh_process_loads_the_kernel_without_compiling(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run_child(cache)
    assert first[0] == "compiled" and first[1].startswith(toolchain.MODULE_PREFIX)
    entries = list(cache.glob(f"kernels/*/*/{toolchain.MODULE_PREFIX}*{toolchain.SUFFIX}"))
    assert len(entries) == 1  # the kernel cache holds the launcher itself
    # even with the extension cache gone, the kernel cache entry is enough
    for path in (cache / "cython").iterdir():
        path.unlink()
    assert run_child(cache, forbid_build=True) == ["from_cache", first[1]]


def test_the_extension_cache_serves_a_new_kernel_cache_entry(tmp_path: Path) -> None:
    first = run_child(tmp_path)
    # the kernel cache emptied, the extension cache kept: lowering runs again, the
    # launcher's sources hash to the same extension, which is not compiled again
    shutil.rmtree(tmp_path / "kernels")
    assert run_child(tmp_path, forbid_build=True) == ["compiled", first[1]]


def test_concurrent_builds_of_one_kernel(tmp_path: Path) -> None:
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path))
    children = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [child.communicate(timeout=600) for child in children]
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0, out + err
    modules = {out.split()[1] for out, _ in outputs}
    assert len(modules) == 1
    built = list((tmp_path / "cython").glob(f"{toolchain.MODULE_PREFIX}*{toolchain.SUFFIX}"))
    assert len(built) == 1
    assert not [p for p in (tmp_path / "cython").iterdir() if p.name.startswith(".")]  # no leftovers


def test_build_returns_the_extension_for_the_kernel_cache() -> None:
    kernel = tilelang.compile(row_softmax_sum(23), out_idx=[-1], target="c", execution_backend="cython")
    from tilelang.cache import KernelCache

    hit = KernelCache().lookup(kernel.cache_key)
    assert hit is not None
    names = sorted(p.name for p in hit[1].iterdir())
    launcher = [n for n in names if n.startswith(toolchain.MODULE_PREFIX)]
    assert len(launcher) == 1 and launcher[0].endswith(toolchain.SUFFIX)
    assert (toolchain.extension_cache_dir() / launcher[0]).read_bytes() == (hit[1] / launcher[0]).read_bytes()
    a = np.ones((2, 23), dtype="float32")
    np.testing.assert_allclose(kernel(a, 1.0), [23.0, 23.0])


def test_changed_sources_make_another_extension() -> None:
    sources = {name: toolchain.template(name) for name in toolchain.TEMPLATES}
    sources["tl_kernel.h"] = "/* a */"
    other = dict(sources, **{"tl_kernel.h": "/* b */"})
    command = toolchain._compiler_command()
    assert command is not None
    assert toolchain._build_key(sources, command) != toolchain._build_key(other, command)
    assert toolchain._build_key(sources, command) == toolchain._build_key(dict(sources), command)
