"""launcher.pyx is translated by Cython once (toolchain.translated_launcher): a second
kernel's launcher runs only the C compiler, and the module name written into the shared
translation is the kernel's own (its extension imports under that name and works)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
from tilelang.jit.adapter.cython import toolchain
from tilelang.testing.kernels import row_softmax_sum

pytest.importorskip("Cython")


def test_a_second_launcher_runs_only_the_c_compiler(monkeypatch):
    ran = []
    real = toolchain._run

    def recording(command, what, kernel, cwd):
        ran.append(what)
        return real(command, what, kernel, cwd)

    monkeypatch.setattr(toolchain, "_run", recording)
    kernels = [tilelang.compile(row_softmax_sum(n), out_idx=[-1], target="c", execution_backend="cython")
               for n in (7, 9)]
    assert ran == ["Cython", "the C compiler", "the C compiler"]
    for kernel, n in zip(kernels, (7, 9)):
        module = type(kernel.launcher).__module__
        assert module.startswith(toolchain.MODULE_PREFIX) and toolchain.PLACEHOLDER not in module
        a = np.linspace(-1, 1, 3 * n, dtype="float32").reshape(3, n)
        expected = 2.0 * np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)
        np.testing.assert_allclose(kernel(a, 2.0), expected, rtol=1e-5)
    assert type(kernels[0].launcher).__module__ != type(kernels[1].launcher).__module__


def test_the_translation_names_the_placeholder_only():
    text = toolchain.translated_launcher(toolchain.template("launcher.pyx"), "test")
    assert toolchain.PLACEHOLDER in text
    name = toolchain.MODULE_PREFIX + "0123456789abcdef" * 2
    written = text.replace(toolchain.PLACEHOLDER, name)
    assert f"PyInit_{name}" in written and "T" * 32 not in written


def test_a_module_name_of_another_length_is_refused(tmp_path):
    with pytest.raises(tilelang.CompileError, match=r"kernel 'k': launcher module name '_tl_cython_ab' is not "
                                                     r"43 characters long"):
        toolchain._compile({"launcher.pyx": "x"}, toolchain.MODULE_PREFIX + "ab", ["cc"], "k", tmp_path)
