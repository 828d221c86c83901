"""``tl.emit_line_directives``: C source whose statements name the kernel's .py lines
(``#line N "file"``), as upstream TileLang's codegen writes them; nothing without the config."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.transform.source_lines import MARKER, line_directives

N = 64
ON = {"tl.emit_line_directives": True}


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


@T.prim_func
def add_one(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):  # mark: def
    S = T.alloc_local((N,), "float32")
    T.copy(A, S)  # mark: copy
    for i in T.Parallel(N):  # mark: loop
        B[i] = S[i] + 1.0  # mark: store


def _directives(source: str) -> list[tuple[int, str]]:
    return [(int(n), f) for n, f in re.findall(r'^#line (\d+) "(.*)"$', source, re.MULTILINE)]


def test_the_c_source_names_the_kernels_lines() -> None:
    source = tilelang.lower(add_one, target="c", pass_configs=ON).kernel_source
    directives = _directives(source)
    assert {f for _, f in directives} == {__file__}
    lines = {n for n, _ in directives}
    for mark in ("def", "copy", "loop", "store"):
        assert _line_of(f"# mark: {mark}") in lines, (mark, sorted(lines))
    assert MARKER not in source  # every marker became a directive, its declaration gone
    # the directive sits right before the statement it names
    at = source.splitlines().index(f'#line {_line_of("# mark: store")} "{__file__}"')
    assert "B[i" in source.splitlines()[at + 1]


def test_without_the_config_the_source_has_no_directives() -> None:
    source = tilelang.lower(add_one, target="c").kernel_source
    assert "#line" not in source and MARKER not in source
    off = tilelang.lower(add_one, target="c", pass_configs={"tl.emit_line_directives": False}).kernel_source
    assert off == source


def test_a_kernel_compiled_with_directives_computes_the_same() -> None:
    kernel = tilelang.compile(add_one, target="c", pass_configs=ON)
    a = np.arange(N, dtype=np.float32)
    b = np.zeros(N, dtype=np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1)  # exact: one float32 addition


@pytest.mark.parametrize("path", ['/tmp/a "quoted" name.py', "C:\\kernels\\k.py"])
def test_a_path_is_written_as_a_c_string(path: str) -> None:
    marker = f"  {MARKER}{path.encode().hex()}(12);"
    declaration = f"int32_t {MARKER}{path.encode().hex()}(int32_t);"
    out = line_directives(f"{declaration}\nvoid f() {{\n{marker}\n  x = 1;\n}}\n")
    escaped = path.replace("\\", "\\\\").replace('"', '\\"')
    assert out == f'void f() {{\n#line 12 "{escaped}"\n  x = 1;\n}}\n'


@T.macro
def _increment(B, i):
    B[i] = B[i] + 1.0


@T.prim_func
def with_macro(A: T.Tensor((N,), "float32")):
    for i in T.serial(N):
        _increment(A, i)  # mark: macro call


def test_a_macros_statements_name_the_line_that_calls_it() -> None:
    lines = {n for n, _ in _directives(tilelang.lower(with_macro, target="c", pass_configs=ON).kernel_source)}
    assert _line_of("# mark: macro call") in lines


def test_a_kernel_moved_in_its_file_is_compiled_again_with_its_new_lines(tmp_path, monkeypatch) -> None:
    """The cache keys kernels by their printed IR, which has no lines: with the directives on,
    the same kernel two lines lower must not come back from the cache with the old lines."""
    import importlib
    import sys

    body = ('import tilelang.language as T\n\n@T.prim_func\ndef k(A: T.Tensor((8,), "float32")):\n'
            '    for i in T.serial(8):\n        A[i] = A[i] + 1.0\n')
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    sources = []
    for name, prefix in (("moved_a", ""), ("moved_b", "\n\n")):
        (tmp_path / f"{name}.py").write_text(prefix + body)
        module = importlib.import_module(name)
        sources.append(tilelang.compile(module.k, target="c", pass_configs=ON).get_kernel_source())
        sys.modules.pop(name)
    lines = [{n for n, _ in _directives(s)} for s in sources]
    assert lines[1] == {n + 2 for n in lines[0]} and lines[0]
