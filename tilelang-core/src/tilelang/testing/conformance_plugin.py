"""The conformance suite as a pytest plugin, registered for every pytest run through
tilelang-core's ``pytest11`` entry point (it only adds options until one is given):

    pytest --tilelang-backend=acme                       # the suite on target "acme", plus the tests collected here
    pytest --tilelang-backend=cpu --tilelang-execution-backend=cython --pyargs tilelang.testing.conformance_tests
    pytest '--tilelang-backend={"kind": "cuda", "arch": "sm_90"}' --tilelang-conformance=compile ...  # no GPU: nvcc only

``--tilelang-backend`` takes whatever ``tilelang.compile(target=...)`` takes (a backend alias,
a TVM kind, or a target dict written as JSON); ``--tilelang-execution-backend`` an execution backend name (default: auto).
Importing this module imports neither tilelang nor TVM: pytest loads it in every session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).with_name("conformance_tests.py").resolve()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tilelang", "TileLang backend conformance")
    group.addoption("--tilelang-backend", metavar="TARGET", default=None,
                    help="run TileLang's conformance suite on this target (a backend alias or TVM kind)")
    group.addoption("--tilelang-execution-backend", metavar="NAME", default="auto",
                    help="the execution backend for the conformance suite (default: auto)")
    group.addoption("--tilelang-conformance", choices=("run", "compile"), default="run",
                    help="run: compile, run and compare with numpy (default); compile: lower and "
                         "compile the device code only, for a backend this machine cannot run")


def _names_the_suite(arg: str) -> bool:
    path = arg.split("::")[0]
    return path == "tilelang.testing.conformance_tests" or (Path(path).is_file() and Path(path).resolve() == TESTS)


def pytest_configure(config: pytest.Config) -> None:
    # the suite lives in this package, not in the project under test: collect it too
    if config.getoption("tilelang_backend") is not None and not any(map(_names_the_suite, config.args)):
        config.args.append(str(TESTS))
