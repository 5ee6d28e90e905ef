"""A command group's argparse tree as data: each subcommand is a row (name, help, handler, arguments).

A group of a dozen subcommands written as ``add_parser``/``add_argument`` calls is one long
function whose shape is hard to see; as a table, each subcommand reads on its own and the
code that turns rows into parsers is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Arg:
    """One argument: its names (``"view"`` or ``"--token-env"``) and ``add_argument``'s keywords."""

    names: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


def arg(*names: str, **options: Any) -> Arg:
    """An :class:`Arg`, written as the ``add_argument`` call it stands for."""
    return Arg(names, options)


@dataclass(frozen=True)
class Sub:
    """One subcommand: the word, its help line, the handler that runs it, its arguments in order."""

    name: str
    help: str
    handler: Callable[[Any], Any]
    args: tuple[Arg, ...] = ()


def add_group(sub, common, name: str, help: str, dest: str, rows: tuple[Sub, ...]) -> None:
    """Register the command ``name`` whose subcommands (stored in ``args.<dest>``) are ``rows``."""
    group = sub.add_parser(name, parents=[common], help=help)
    subs = group.add_subparsers(dest=dest, required=True)
    for row in rows:
        parser = subs.add_parser(row.name, parents=[common], help=row.help)
        for a in row.args:
            parser.add_argument(*a.names, **a.options)
        parser.set_defaults(handler=row.handler)
