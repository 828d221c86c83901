"""Every example, as a test at small sizes (results are checked inside each run())."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


from tilelang.testing.pytest_plugin import private_kernel_cache  # noqa: F401 - autouse fixture


@pytest.mark.parametrize("name,kwargs", [
    ("elementwise_add", {"M": 70, "N": 33}),
    ("softmax", {"N": 40}),
    ("gemm", {"M": 96, "N": 80, "K": 40, "bM": 32, "bN": 32, "bK": 16}),
    ("rmsnorm", {"M": 20, "N": 64}),
    ("flash_attention", {"batch": 1, "heads": 2, "seq_len": 64, "dim": 32}),
])
def test_example(name, kwargs):
    described = importlib.import_module(name).run(**kwargs)
    assert "target backend" in described
