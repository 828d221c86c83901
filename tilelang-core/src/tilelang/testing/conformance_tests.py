"""The conformance suite's tests (collected when ``--tilelang-backend`` is given; see
``conformance_plugin``): every case of ``tilelang.testing.conformance`` on the requested
target and execution backend, each compiled into a private kernel cache."""

from __future__ import annotations

import pytest

from tilelang.testing.conformance import CASES, ConformanceCase, run_case
from tilelang.testing.pytest_plugin import private_kernel_cache  # noqa: F401 - an autouse fixture


@pytest.fixture(scope="module")
def conformance_target(request: pytest.FixtureRequest) -> tuple[str, str]:
    target = request.config.getoption("tilelang_backend")
    if target is None:
        pytest.skip("the conformance suite runs with --tilelang-backend=<target>")
    return target, request.config.getoption("tilelang_execution_backend")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_conformance(case: ConformanceCase, conformance_target: tuple[str, str]) -> None:
    target, execution_backend = conformance_target
    kernel = run_case(case, target=target, execution_backend=execution_backend)
    if execution_backend != "auto":
        assert kernel.context.execution_backend.name == execution_backend
