"""Launch metadata expressions printed as C evaluate like the Python expressions they come
from (floor division and modulo of negative numbers included): a C program built with the
runtime's helpers prints their values, compared with Python's ``eval``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tilelang.errors import CompileError
from tilelang.jit.adapter.cython import toolchain
from tilelang.jit.adapter.cython.c_expr import CExpr, c_expression

EXPRESSIONS = [
    "((M + 31) // 32)",
    "((a // b) * b + (a % b))",
    "(a // b)",
    "(a % b)",
    "(-a // 3)",
    "min(a, b)",
    "max(a, 3)",
    "int(x)",
    "(float(a) * 0.5)",
    "(a if (a < b) else b)",
    "(x if (a >= 0) else 2)",
    "(x // 2.0)",
    "(x % 1.5)",
    "((M * 4) + 0)",
    "((a == b) + (a != b) + (a <= b))",
    "(1 < a <= M)",
    "(not (a > 0) or (b > 0))",
    "(1099511627776 * a)",
]
VALUES = [(7, 2, 3.7, 100), (-7, 2, -3.7, 1), (7, -2, 2.5, 0), (-9, -4, -0.5, 33), (0, 5, 0.0, 4096)]
NAMES = {"a": CExpr("a", False), "b": CExpr("b", False), "M": CExpr("M", False), "x": CExpr("x", True)}


def _helpers() -> str:
    """The runtime's expression helpers (the part of tl_runtime.h c_expr.py relies on)."""
    text = toolchain.template("tl_runtime.h")
    return text[text.index("/* ---- integer helpers"):text.index("/* ---- the launcher's state")]


def test_c_expressions_match_python(tmp_path: Path) -> None:
    command = toolchain._compiler_command()
    if command is None:
        pytest.skip("no C compiler")
    printed = [c_expression(e, NAMES, "test") for e in EXPRESSIONS]
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <string.h>", "#include <math.h>",
             _helpers(), "int main(void) {", "  int64_t a, b, M; double x;",
             '  while (scanf("%lld %lld %lf %lld", (long long*)&a, (long long*)&b, &x, (long long*)&M) == 4) {']
    for expr in printed:
        fmt = "%.17g" if expr.is_float else "%lld"
        cast = "(double)" if expr.is_float else "(long long)"
        lines.append(f'    printf("{fmt}\\n", {cast}({expr.code}));')
    lines += ["  }", "  return 0;", "}"]
    (tmp_path / "expr.c").write_text("\n".join(lines))
    subprocess.run([*command, "-O1", "-o", str(tmp_path / "expr"), str(tmp_path / "expr.c"), "-lm"],
                   check=True, capture_output=True)
    stdin = "\n".join(f"{a} {b} {x!r} {m}" for a, b, x, m in VALUES)
    out = subprocess.run([str(tmp_path / "expr")], input=stdin, capture_output=True, text=True, check=True)
    got = iter(out.stdout.split())
    for a, b, x, m in VALUES:
        for text, expr in zip(EXPRESSIONS, printed):
            want = eval(text, {"min": min, "max": max, "int": int, "float": float},
                        {"a": a, "b": b, "x": x, "M": m})
            value = next(got)
            if expr.is_float:
                assert float(value) == pytest.approx(float(want), rel=1e-15), (text, a, b, x, m)
            else:
                assert int(value) == int(want), (text, a, b, x, m, expr.code)


@pytest.mark.parametrize("text,why", [
    ("__import__('os')", "call of '__import__'"),
    ("A.data_ptr()", "only min, max, int and float may be called"),
    ("N + 1", "unknown name 'N'"),
    ("'abc'", "is not a number"),
    ("a / b", "operator Div is not allowed"),
    ("[a]", "List is not allowed"),
    ("a +", "invalid syntax"),
])
def test_expressions_outside_the_grammar_are_compile_errors(text: str, why: str) -> None:
    with pytest.raises(CompileError, match=r"kernel 'k', grid extent: .* cannot be evaluated in the "
                                           r"generated C wrapper \(.*" + why.replace("(", r"\(")):
        c_expression(text, NAMES, "kernel 'k', grid extent")
