"""The conformance suite's tests (collected when ``--tilelang-backend`` is given; see
``conformance_plugin``): every case of ``tilelang.testing.conformance`` on the requested
target and execution backend, each compiled into a private kernel cache (or, with ``--tilelang-conformance=compile``,
lowered and compiled by the backend's device toolchain only)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tilelang.testing.conformance import CASES, ConformanceCase, compile_case, run_case
from tilelang.testing.pytest_plugin import private_kernel_cache  # noqa: F401 - an autouse fixture


@pytest.fixture(scope="module")
def conformance_target(request: pytest.FixtureRequest) -> tuple[Any, str]:
    target = request.config.getoption("tilelang_backend")
    if target is None:
        pytest.skip("the conformance suite runs with --tilelang-backend=<target>")
    if target.lstrip().startswith("{"):  # a target dict in JSON: '{"kind": "cuda", "arch": "sm_90"}'
        target = json.loads(target)
    return target, request.config.getoption("tilelang_execution_backend")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_conformance(case: ConformanceCase, conformance_target: tuple[Any, str],
                     request: pytest.FixtureRequest) -> None:
    target, execution_backend = conformance_target
    if request.config.getoption("tilelang_conformance") == "compile":
        if compile_case(case, target) is None:
            pytest.skip(f"target {target!r}: no device toolchain that works here; the sources were generated")
        return
    kernel = run_case(case, target=target, execution_backend=execution_backend)
    if execution_backend != "auto":
        assert kernel.context.execution_backend.name == execution_backend
