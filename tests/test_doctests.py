"""Run the doctests of every module of the package (and so import every module)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import regimetune

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(regimetune.__path__, prefix="regimetune.") if not m.ispkg
)


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
