"""The application layer speaks no HTTP and writes no SQL: it imports neither the web
package nor a web framework or database library (it keeps its state through the Store
protocol, which the service's SQL store implements)."""

from __future__ import annotations

import ast
from pathlib import Path

import regimetune.control

FORBIDDEN = ("regimetune.api", "regimetune.cli", "fastapi", "starlette", "sqlalchemy", "alembic", "uvicorn")
SOURCES = sorted(Path(regimetune.control.__file__).parent.glob("*.py"))


def imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.add(node.module)
    return names


def test_the_control_package_imports_no_web_or_sql_code() -> None:
    assert len(SOURCES) >= 10
    for path in SOURCES:
        bad = {n for n in imported(path) if n.startswith(FORBIDDEN)}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    src = tmp_path / "bad.py"
    src.write_text("from regimetune.api.store import SqlStore\nimport sqlalchemy as sa\n")
    assert {n for n in imported(src) if n.startswith(FORBIDDEN)} == {"regimetune.api.store", "sqlalchemy"}


def test_the_package_names_what_it_loads_lazily() -> None:
    import pytest

    c = regimetune.control
    assert sorted(c.__all__) == sorted(c._WHERE)
    assert all(getattr(c, n) is not None for n in c.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = c.nope
