"""``rmtui chat --role R``: talk with a role in the terminal (prompt-toolkit), the one
interactive command that runs without ``--headless``.

Enter sends, Esc-Enter (or Alt-Enter) starts a new line, Up/Down walk the history kept in
``.runtime/chat/``, Ctrl-D leaves. With a pipe instead of a terminal, each input line is
one message (so the command also works in scripts). The chat itself (the conversation, a
writer's operation and its landing) is the engine's :mod:`rmtui.engine.roles.chat`; this
module only reads lines and prints answers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from rmtui.commands import Result
from rmtui.commands.core import root_of
from rmtui.engine.errors import EngineError
from rmtui.engine.memory.roots import MemoryRoot


def register(sub, common) -> None:
    p = sub.add_parser("chat", parents=[common], help="talk with a role in the terminal (Ctrl-D leaves)")
    p.add_argument("--role", required=True, help="retrieve, update, historian, pruner, insight, ...")
    p.set_defaults(handler=cmd_chat, front_ok=True)


def cmd_chat(args) -> Result:
    out = chat_main(root_of(args), args.role)
    return Result(out, "")


def _describe_close(out: dict) -> str:
    if "error" in out:
        return f"not landed: {out['error']['message']}"
    r = out.get("receipt")
    if not r:
        return "bye"
    if r["landed_commit"]:
        return f"landed {r['landed_commit'][:12]}: {', '.join(r['changed_paths'])}"
    return "no memory change"


def _print_line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run_chat(root: MemoryRoot, role: str, *, executor=None, input=None, output=None,
             write: Callable[[str], None] | None = None, lines: Iterable[str] | None = None) -> dict:
    """Run the interactive loop until Ctrl-D (or end of piped input); returns the outcome."""
    from rmtui.engine.retrieval.chat import open_chat

    say = write or _print_line
    chat = open_chat(root, role, executor=executor)
    say(f"rmtui chat with {role} ({chat.executor.describe}; {chat.mode}). "
        "Enter sends, Esc-Enter adds a line, Ctrl-D leaves.")
    sent = 0
    try:
        for text in (lines if lines is not None else _prompt_lines(root, role, input, output)):
            if not text.strip():
                continue
            sent += 1
            try:
                say(chat.send(text).rstrip())
            except EngineError as exc:
                say(f"error: {exc.message}")
    finally:
        out = chat.close().to_json()
    out["messages"] = sent
    say(_describe_close(out))
    return out


def _prompt_lines(root: MemoryRoot, role: str, input=None, output=None):
    """Messages typed at a prompt-toolkit prompt, with history and multi-line editing."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    hist_dir = root.ensure_runtime() / "chat"
    hist_dir.mkdir(parents=True, exist_ok=True)
    kb = KeyBindings()

    @kb.add("enter")
    def _send(event) -> None:
        event.current_buffer.validate_and_handle()

    @kb.add("escape", "enter")
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    session: PromptSession[str] = PromptSession(history=FileHistory(str(hist_dir / f"history-{role}")), multiline=True,
                            key_bindings=kb, prompt_continuation=lambda width, *_: "." * (width - 1) + " ",
                            input=input, output=output)
    while True:
        try:
            yield session.prompt(f"{role}> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            return


def piped_lines(stream=None):
    for line in (stream or sys.stdin):
        yield line.rstrip("\n")


def chat_main(root: MemoryRoot, role: str) -> dict:
    from rmtui.engine.memory import role_table

    role_table.role_spec(role)  # an unknown role fails before anything reads stdin
    lines = None if sys.stdin.isatty() else piped_lines()
    return run_chat(root, role, lines=lines)
