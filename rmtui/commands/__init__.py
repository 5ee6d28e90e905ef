"""Headless commands: thin fronts that parse arguments, call the engine, shape output.

Each module here exposes ``register(sub, common)``; handlers return a :class:`Result`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    """What a command answers: ``data`` for ``--json``, ``text`` for people."""

    data: Any
    text: str = ""
    exit_code: int = 0
    extra: dict = field(default_factory=dict)


COMMAND_MODULES = [
    "rmtui.commands.core",
    "rmtui.commands.ops",
    "rmtui.commands.assistant",
    "rmtui.commands.retrieve",
    "rmtui.commands.update",
    "rmtui.commands.sync",
    "rmtui.commands.views",
    "rmtui.commands.chat",
    "rmtui.commands.tui_commands",
    "rmtui.commands.cycles",  # after "update": it adds `update correct`
]
