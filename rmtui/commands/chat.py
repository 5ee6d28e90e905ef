"""``rmtui chat --role R``: the one interactive command that runs without ``--headless``."""

from __future__ import annotations

from rmtui.headless import Result
from rmtui.headless.core import root_of


def register(sub, common) -> None:
    p = sub.add_parser("chat", parents=[common], help="talk with a role in the terminal (Ctrl-D leaves)")
    p.add_argument("--role", required=True, help="retrieve, update, historian, pruner, insight, ...")
    p.set_defaults(handler=cmd_chat, front_ok=True)


def cmd_chat(args) -> Result:
    from rmtui.chat import chat_main

    out = chat_main(root_of(args), args.role)
    return Result(out, "")
