"""``rmtui chat --role R``: talk with a role in the terminal (prompt-toolkit).

Enter sends, Esc-Enter (or Alt-Enter) starts a new line, Up/Down walk the history kept in
``.runtime/chat/``, Ctrl-D leaves. With a pipe instead of a terminal, each input line is
one message (so the command also works in scripts).

What the role may do follows the role table: ``retrieve`` answers each message with a
rendered selection (agent retrieval, one chat session id for the delivery history); read
roles converse with read-only tools over the live root; writer roles work in a supervisor
worktree, and what they committed is admitted and published when the chat ends.
"""

from __future__ import annotations

import sys
import uuid
from typing import Callable, Iterable

from rmtui.engine import roles
from rmtui.engine.errors import EngineError, UsageError
from rmtui.engine.roots import MemoryRoot

CHAT_PREAMBLE = ("You are in an interactive chat with a person through rmtui. Answer their messages in plain "
                 "text; use your tools to look things up. Your role's instructions follow.\n\n")


class RoleChat:
    """One chat: a conversation with the role, plus the operation a writer role works in."""

    def __init__(self, root: MemoryRoot, role: str, *, executor=None) -> None:
        from rmtui.engine.executors import DebugTrace, make_executor

        self.root = root
        self.role = role
        self.spec = roles.role_spec(role)
        cfg = root.config()
        self.executor = executor or make_executor(cfg, role)
        self.session = f"chat-{uuid.uuid4().hex[:12]}"
        self.sup = None
        self.op = None
        self.conv = None
        if role == "retrieve":
            return
        from rmtui.engine.prompts import role_instructions
        from rmtui.engine.tools import RoleTools

        where = root.path
        if self.spec.writer:
            from rmtui.engine.supervisor import Supervisor

            self.sup = Supervisor(root)
            self.op = self.sup.begin("chat", role)
            where = self.op.worktree
        tools = RoleTools(where, role).specs()
        trace = DebugTrace.for_role(root.runtime, role, enabled=bool(cfg.get("debug.trace")))
        self.conv = self.executor.start(system=CHAT_PREAMBLE + role_instructions(role), tools=tools,
                                        cwd=str(where), trace=trace)

    @property
    def banner(self) -> str:
        how = {"retrieve": "each message is a need; answers are rendered memory",
               }.get(self.role, "writes land when you leave" if self.spec.writer else "read-only")
        return (f"rmtui chat with {self.role} ({self.executor.describe}; {how}). "
                "Enter sends, Esc-Enter adds a line, Ctrl-D leaves.")

    def send(self, text: str) -> str:
        if self.role == "retrieve":
            from rmtui.engine.agent_retrieve import agent_retrieve

            return agent_retrieve(self.root, self.session, text, executor=self.executor).text
        return self.conv.send(text).text

    def close(self) -> dict:
        """End the chat; a writer's committed work goes through admission and publication."""
        out: dict = {"role": self.role, "session": self.session}
        if self.conv is not None:
            self.conv.close()
        if self.sup is not None and self.op is not None:
            try:
                receipt = self.sup.finish(self.op, summary=f"chat with {self.role}")
                out["receipt"] = receipt.to_json()
            except EngineError as exc:
                out["error"] = exc.to_json()
                out["receipt"] = self.sup.fail(self.op, f"{exc.kind}: {exc.message}").to_json()
            finally:
                self.sup.close()
        return out


def _describe_close(out: dict) -> str:
    if "error" in out:
        return f"not landed: {out['error']['message']}"
    r = out.get("receipt")
    if not r:
        return "bye"
    if r["landed_commit"]:
        return f"landed {r['landed_commit'][:12]}: {', '.join(r['changed_paths'])}"
    return "no memory change"


def run_chat(root: MemoryRoot, role: str, *, executor=None, input=None, output=None,
             write: Callable[[str], None] | None = None, lines: Iterable[str] | None = None) -> dict:
    """Run the interactive loop until Ctrl-D (or end of piped input); returns the outcome."""
    write = write or (lambda s: (sys.stdout.write(s + "\n"), sys.stdout.flush()))
    chat = RoleChat(root, role, executor=executor)
    write(chat.banner)
    sent = 0
    try:
        for text in (lines if lines is not None else _prompt_lines(root, role, input, output)):
            if not text.strip():
                continue
            sent += 1
            try:
                write(chat.send(text).rstrip())
            except EngineError as exc:
                write(f"error: {exc.message}")
    finally:
        out = chat.close()
    out["messages"] = sent
    write(_describe_close(out))
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

    session = PromptSession(history=FileHistory(str(hist_dir / f"history-{role}")), multiline=True,
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
    if role not in roles.ROLE_TABLE:
        raise UsageError(f"unknown role {role!r} (one of {', '.join(roles.ROLE_TABLE)})")
    lines = None if sys.stdin.isatty() else piped_lines()
    return run_chat(root, role, lines=lines)
