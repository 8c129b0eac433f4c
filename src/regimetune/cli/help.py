"""Help text as people expect it from a command line: ``TRACE`` and ``--window FLOAT``, not
typer's ``{trace}`` and ``<float>``; flags show no type at all.

Typer (0.29) writes a parameter's Python type between angle brackets and a required argument
between braces, and offers no setting to change that. :class:`Command` and :class:`Group`
give each of their parameters click's conventional metavar when the help or the usage line is
built, so every command registered on the app gets the same help without each option spelling
out a metavar. ``main`` applies them to the whole app.
"""

from __future__ import annotations

import inspect
from pathlib import PurePath
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

_TYPE_NAMES = {bool: "BOOLEAN", int: "INTEGER", float: "FLOAT", str: "TEXT"}


def _type_name(param: TyperArgument | TyperOption) -> str:
    """Click's name for a parameter's value type: ``FLOAT``, ``PATH``, ``[csv|tsv]``."""
    desc = param.type_descriptor
    if desc.is_choice and desc.choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    if desc.is_path:
        return "PATH"
    annotation = desc.annotation
    if desc.is_list:
        args = getattr(annotation, "__args__", (str,))
        annotation = args[0]
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "PATH"
    return _TYPE_NAMES.get(annotation, "VALUE") if isinstance(annotation, type) else "VALUE"


class _Argument(TyperArgument):
    """An argument shown as ``TRACE`` (required) or ``[TRACE]`` (optional), no type column."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.display_name_raw
        piece = name if self.required else f"[{name}]"
        return [piece + ("..." if self.nargs != 1 else "")]


class _Option(TyperOption):
    """An option shown as ``--window FLOAT``; a flag shows no value at all."""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag:
            return None
        return self.metavar if self.metavar is not None else _type_name(self)


def conventional(param: Any) -> Any:
    """Give ``param`` click's help conventions (idempotent). The class is switched in place
    because typer builds its parameters itself and takes no parameter class."""
    if type(param) is TyperArgument:
        param.__class__ = _Argument
        if param.metavar is None:
            param.metavar = param.name.upper()
    elif type(param) is TyperOption:
        param.__class__ = _Option
    return param


class Command(TyperCommand):
    """A typer command whose help and usage follow click's conventions."""

    def get_params(self, ctx: Any) -> list[Any]:
        return [conventional(p) for p in super().get_params(ctx)]


class Group(TyperGroup):
    """The root group: same conventions for its own options (``--version``, ``--help``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return [conventional(p) for p in super().get_params(ctx)]


def unwrap(doc: str) -> str:
    """A docstring as help text: lines within a paragraph joined (typer's rich help would keep
    the docstring's line breaks mid-sentence), paragraphs kept apart.

    >>> unwrap("Run the service.\\n  Settings come\\n  from --config.\\n\\n  More.")
    'Run the service. Settings come from --config.\\n\\nMore.'
    """
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def apply_conventions(app: typer.Typer) -> None:
    """Use :class:`Command` for every command registered on ``app`` with typer's default class,
    and its docstring, unwrapped, as its help unless it names one."""
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = Command
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = unwrap(info.callback.__doc__)


__all__ = ["Command", "Group", "apply_conventions", "conventional"]
