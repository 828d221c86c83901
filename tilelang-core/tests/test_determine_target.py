"""tilelang.backend.target.determine_target: upstream's helper for the target a compilation
uses (docs/get_started/targets.md upstream)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
from tilelang.backend.target import determine_target
from tilelang.errors import BackendNotFoundError


def test_auto_and_aliases_resolve_as_a_compilation_does() -> None:
    auto = determine_target("auto", return_object=True)
    assert isinstance(auto, tvm.target.Target)
    if auto.kind.name == "llvm":  # a machine without a GPU
        assert determine_target() == determine_target("cpu")
    config = determine_target({"kind": "cuda", "arch": "sm_90"})
    assert config["kind"] == "cuda" and config["arch"] == "sm_90" and isinstance(config["keys"], list)
    assert str(tvm.target.Target(config)) == str(determine_target({"kind": "cuda", "arch": "sm_90"},
                                                                  return_object=True))
    with tvm.target.Target("c"):
        assert determine_target()["kind"] == "c"
    with pytest.raises(BackendNotFoundError, match="cannot parse target 'cuda9'"):
        determine_target("cuda9")


def test_the_config_compiles() -> None:
    @T.prim_func
    def double(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i] * 2.0

    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    tilelang.compile(double, target=determine_target("cpu"))(a, b)
    np.testing.assert_allclose(b, 2 * a)
