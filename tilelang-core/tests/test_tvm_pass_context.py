"""``tvm.transform.PassContext(config={"tl.<name>": ...})`` (tilelang/tvm_pass_context.py):
TVM 0.27 refuses keys it has not registered; upstream's tests and scripts put TileLang's
keys there around ``tilelang.lower``. The context takes them, shows them in
``PassContext.current().config``, and ``tilelang.lower`` applies them; a compile does not
(as upstream's), and warns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import tvm

CUDA = {"kind": "cuda", "arch": "sm_90"}


def copy_kernel(n: int = 4096):
    @T.prim_func
    def copy(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // 512, threads=128) as bx:
            for i in T.Parallel(512):
                B[bx * 512 + i] = A[bx * 512 + i] + T.float32(1)

    return copy


def test_tilelang_keys_are_taken_and_shown_in_the_current_config() -> None:
    # upstream's test_tilelang_pass_config_disable_tma_lower, both spellings of the key
    with tvm.transform.PassContext(config={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}):
        assert bool(tvm.transform.PassContext.current().config["tl.disable_tma_lower"])
    with tvm.transform.PassContext(config={"tl.disable_tma_lower": True, "tir.disable_vectorize": True}) as ctx:
        current = dict(tvm.transform.PassContext.current().config)
        assert current == {"tl.disable_tma_lower": True, "tirx.disable_vectorize": True}  # tir. -> TVM 0.27's tirx.
        assert dict(ctx.config) == current
        with tvm.transform.PassContext(opt_level=3):  # an inner context has its own configs, as in TVM
            assert dict(tvm.transform.PassContext.current().config) == {}
        assert "tl.disable_tma_lower" in tvm.transform.PassContext.current().config
    assert dict(tvm.transform.PassContext.current().config) == {}


def test_an_unknown_tilelang_key_names_the_nearest() -> None:
    with pytest.raises(AttributeError, match=r"Invalid config option 'tl.disable_tma_lowr': neither TVM nor "
                       r"TileLang \(its installed backends, tilelang.PassConfigKey\) knows it; did you mean "
                       r"'tl.disable_tma_lower'\?"):
        tvm.transform.PassContext(config={"tl.disable_tma_lowr": True})
    with pytest.raises(AttributeError, match="Invalid config option 'nobody.knows'"):  # TVM's own refusal
        tvm.transform.PassContext(config={"nobody.knows": True})


def test_lower_applies_the_enclosing_contexts_keys() -> None:
    func = copy_kernel()
    vectorized = tilelang.lower(func, target=CUDA).device_source
    with tvm.transform.PassContext(config={"tl.disable_vectorize": True}):
        scalar = tilelang.lower(func, target=CUDA).device_source
    assert "float4" in vectorized and "float4" not in scalar
    # the call's own pass_configs win over the context's
    with tvm.transform.PassContext(config={"tl.disable_vectorize": True}):
        again = tilelang.lower(func, target=CUDA, pass_configs={"tl.disable_vectorize": False}).device_source
    assert "float4" in again


def test_compile_does_not_apply_them_and_says_so() -> None:
    func = copy_kernel(1024)
    with tvm.transform.PassContext(config={"tl.disable_vectorize": True}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(func, target="c")
    messages = [str(w.message) for w in caught if "PassContext" in str(w.message)]
    assert messages == [("tilelang.compile does not apply the enclosing tvm.transform.PassContext's configs "
                         "['tl.disable_vectorize'] (nor does upstream TileLang's); pass them to the compile as "
                         "pass_configs={...} (or to @tilelang.jit), or call tilelang.lower inside the context")]
    a = np.arange(1024, dtype=np.float32)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1)
    with tvm.transform.PassContext(config={"tl.disable_vectorize": True}), warnings.catch_warnings():
        warnings.simplefilter("error")  # given to the compile itself: nothing to warn of
        tilelang.compile(func, target="c", pass_configs={"tl.disable_vectorize": True})
