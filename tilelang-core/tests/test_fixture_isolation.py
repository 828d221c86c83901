"""Every compile in these tests goes to a cache under pytest's temporary folder, those of
module-scoped fixtures too (they are set up before a test's own private cache fixture):
a test must neither fill the user's cache nor pass on a kernel some other run left there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache_dir_of_a_module_fixture() -> str | None:
    return os.environ.get("TILELANG_CACHE_DIR")


def test_a_module_fixture_compiles_into_a_temporary_cache(cache_dir_of_a_module_fixture: str | None,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    assert cache_dir_of_a_module_fixture is not None, "TILELANG_CACHE_DIR is unset: the user's cache"
    assert Path(cache_dir_of_a_module_fixture).is_relative_to(tmp_path_factory.getbasetemp())


def test_each_test_has_its_own_cache(cache_dir_of_a_module_fixture: str | None,
                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    own = os.environ["TILELANG_CACHE_DIR"]
    assert own != cache_dir_of_a_module_fixture
    assert Path(own).is_relative_to(tmp_path_factory.getbasetemp())
