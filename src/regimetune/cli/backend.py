"""Commands of this group are registered here (work in progress)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
