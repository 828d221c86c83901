"""tilelang-acme installed next to tilelang's own distributions, with nothing denied: the
acme target backend by its alias and by target="auto" when the device is present, the CPU
unchanged, acme_log serving both, and Acme's scratchpad pass with its pass config."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import CompileError
from tilelang.plugins import plugin_records
from tilelang.testing.kernels import elementwise_add

A = np.arange(64 * 32, dtype="float32").reshape(64, 32)


def names(kernel: tilelang.JITKernel) -> tuple[str, str]:
    return kernel.context.module.name, kernel.context.execution_backend.name


def test_both_plugins_load_and_nothing_is_denied() -> None:
    assert not os.environ.get("TILELANG_PLUGINS_DENY")
    records = {r.name: r for r in plugin_records() if r.distribution == "tilelang-acme"}
    assert sorted(records) == ["acme", "acme_log"]
    assert [(r.status, r.error) for r in records.values()] == [("loaded", None)] * 2
    assert records["acme"].backends == ("acme",) and records["acme_log"].execution_backends == ("acme_log",)


def test_target_acme_compiles_and_runs_with_launches_logged(caplog: pytest.LogCaptureFixture) -> None:
    kernel = tilelang.compile(elementwise_add(64, 32), out_idx=[-1], target="acme")
    assert names(kernel) == ("acme", "acme_log")  # the manifest's first execution backend
    with caplog.at_level(logging.INFO, logger="tilelang_acme.launches"):
        np.testing.assert_array_equal(kernel(A, A), 2 * A)
    assert "launch main on acme [(64, 32), (64, 32)]" in caplog.messages


def test_target_auto_picks_acme_when_its_device_is_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_DEVICE", "1")
    kernel = tilelang.compile(elementwise_add(64, 32), out_idx=[-1], target="auto")
    assert names(kernel)[0] == "acme"
    np.testing.assert_array_equal(kernel(A, A), 2 * A)
    monkeypatch.delenv("ACME_DEVICE")
    assert names(tilelang.compile(elementwise_add(64, 32), out_idx=[-1], target="auto"))[0] == "cpu"


@pytest.mark.parametrize("target", ["cpu", "llvm"])
def test_the_cpu_is_unchanged(target: str) -> None:
    kernel = tilelang.compile(elementwise_add(64, 32), out_idx=[-1], target=target)
    assert names(kernel) == ("cpu", "tvm_ffi")  # acme's priority -1 leaves the bare kind to the CPU
    np.testing.assert_array_equal(kernel(A, A), 2 * A)


def test_acme_log_serves_the_cpu_too(caplog: pytest.LogCaptureFixture) -> None:
    kernel = tilelang.compile(elementwise_add(64, 32), out_idx=[-1], target="cpu", execution_backend="acme_log")
    assert names(kernel) == ("cpu", "acme_log")
    with caplog.at_level(logging.INFO, logger="tilelang_acme.launches"):
        np.testing.assert_array_equal(kernel(A, A), 2 * A)
    assert "launch main on cpu [(64, 32), (64, 32)]" in caplog.messages


def big_tiles(n: int = 128):
    @T.prim_func
    def main(X: T.Tensor((n, n), "float32"), Y: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128) as _:
            tile = T.alloc_shared((n, n), "float32")  # 64 KiB for n=128
            T.copy(X, tile)
            T.copy(tile, Y)

    return main


def test_acmes_pass_refuses_tiles_beyond_the_scratchpad_and_its_config_lifts_the_limit() -> None:
    with pytest.raises(CompileError, match=r"acme: kernel 'main' needs 65536 bytes of shared memory \(tile "
                       r"\(65536 B\)\); Acme's scratchpad holds 49152\. Use smaller tiles, or "
                       r"pass_configs=\{'acme.scratchpad_bytes': <bytes>\}"):
        tilelang.compile(big_tiles(), out_idx=[-1], target="acme")
    kernel = tilelang.compile(big_tiles(), out_idx=[-1], target="acme",
                              pass_configs={"acme.scratchpad_bytes": 1 << 17})
    x = np.random.default_rng(0).standard_normal((128, 128)).astype("float32")
    np.testing.assert_array_equal(kernel(x), x)
    # the CPU has no scratchpad: the same kernel compiles there as it is
    np.testing.assert_array_equal(tilelang.compile(big_tiles(), out_idx=[-1], target="cpu")(x), x)


def test_the_carver_ranks_tiles_for_acmes_device() -> None:
    """get_arch asks the backend that owns the target (its manifest's device_model)."""
    from tilelang import carver
    from tilelang.carver.arch import get_arch

    acme = get_arch("acme")
    assert (acme.platform, acme.smem_cap, acme.compute_max_core) == ("Acme", 49152, 4)
    assert get_arch("cpu").platform == "CPU"  # the CPU keeps its own description
    hints = carver.GEMVTemplate(N=4096, K=4096, in_dtype="float32", out_dtype="float32",
                                accum_dtype="float32").with_arch(acme).recommend_hints(topk=4)
    assert hints and all(h.smem_bytes <= 49152 and set(h.thread) == {1} for h in hints)
    assert all(h.vectorize["B"] == 8 for h in hints)  # 32-byte vectors of float32
