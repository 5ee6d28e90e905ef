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

_CORE, _OPS, _HOST = "rmtui.commands.core", "rmtui.commands.ops", "rmtui.commands.assistant"
_RETRIEVE, _UPDATE, _CYCLES = "rmtui.commands.retrieve", "rmtui.commands.update", "rmtui.commands.cycles"
#: which modules a command needs (a call registers only those: argparse for every command costs
#: a warm ``retrieve`` ~20 ms); ``update`` and ``daemon`` also need ``cycles``, which adds
#: ``update correct`` and the daemon's cycles. tests/test_smoke.py checks it against the modules.
COMMAND_OWNERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("init", "profile", "validate", "outline", "submit", "evidence", "status", "config"), (_CORE,)),
    **dict.fromkeys(("operations", "receipts", "diff", "recover", "maintain"), (_OPS,)),
    **dict.fromkeys(("assistant", "guidance", "mcp", "skills"), (_HOST,)),
    **dict.fromkeys(("retrieve", "embedding-service", "embedding-export", "retrieve-index"), (_RETRIEVE,)),
    **dict.fromkeys(("update", "daemon"), (_UPDATE, _CYCLES)),
    "sync": ("rmtui.commands.sync",),
    "shared-view": ("rmtui.commands.views",),
    "chat": ("rmtui.commands.chat",),
    "demo": ("rmtui.commands.tui_commands",),
    **dict.fromkeys(("prune", "insight", "history", "pursuit"), (_CYCLES,)),
}

