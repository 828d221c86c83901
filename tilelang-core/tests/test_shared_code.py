"""Shared code (engine, JIT, cache, backend plumbing) never dispatches on target kinds."""

from __future__ import annotations

import re
from pathlib import Path

import tilelang

ROOT = Path(tilelang.__file__).parent
SHARED = ["engine", "jit", "cache", "backend", "language", "plugins", "transform", "cli", "testing"]
# kind names of every backend this project ships or plans
KINDS = r"(cuda|hip|rocm|c|llvm|metal|webgpu|opencl|cutedsl|vulkan)"
PATTERNS = [
    re.compile(r"kind\.name\s*(==|!=|\bin\b)"),
    re.compile(rf"""(==|!=)\s*["']{KINDS}["']"""),
    re.compile(rf"""["']{KINDS}["']\s*(==|!=)"""),
    re.compile(r"is_(cuda|hip|rocm|cpu|metal)_target"),
]
# the install-hint table maps names to pip extras; it is data, not dispatch
ALLOWED = {ROOT / "backend" / "hints.py"}


def shared_files():
    for package in SHARED:
        for path in sorted((ROOT / package).rglob("*.py")):
            # execution-backend adapters are backend code that lives under jit/adapter
            if "adapter" in path.relative_to(ROOT).parts[:2] and path.parts[-3] != "jit":
                continue
            if path not in ALLOWED:
                yield path


def test_scan_covers_the_shared_packages():
    files = list(shared_files())
    assert any(p.name == "lower.py" for p in files) and any(p.name == "kernel.py" for p in files)


def test_no_target_kind_dispatch_in_shared_code():
    hits = []
    for path in shared_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(p.search(line) for p in PATTERNS):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "target-kind dispatch in shared code (ask the manifest):\n" + "\n".join(hits)


def test_the_scan_would_catch_dispatch(tmp_path):
    bad = 'if target.kind.name == "cuda":\n    pass\n'
    assert any(p.search(line) for line in bad.splitlines() for p in PATTERNS)
