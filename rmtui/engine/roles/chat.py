"""A chat with a role: the conversation, and for a writer role the operation it works in.

Fronts (the terminal chat in :mod:`rmtui.commands.chat`) only read lines and print answers;
what the role may do follows the role table: read roles converse with read-only tools over
the live root; writer roles work in a supervisor worktree, and what they committed goes
through admission and publication when the chat closes (or the operation fails with a
receipt). The retrieve role answers differently: see :mod:`rmtui.engine.retrieval.chat`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from rmtui.engine.errors import EngineError
from rmtui.engine.memory import role_table
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.roles.executors import Conversation, DebugTrace, make_executor
from rmtui.engine.roles.prompts import role_instructions
from rmtui.engine.roles.tools import RoleTools
from rmtui.engine.writes.operations import Operation, Receipt
from rmtui.engine.writes.supervisor import Supervisor

CHAT_PREAMBLE = ("You are in an interactive chat with a person through rmtui. Answer their messages in plain "
                 "text; use your tools to look things up. Your role's instructions follow.\n\n")


@dataclass
class ChatClosed:
    """How a chat ended: a writer's receipt (landed, no change, or failed) and the refusal."""

    role: str
    session: str
    receipt: Receipt | None = None
    error: EngineError | None = None

    def to_json(self) -> dict:
        out: dict = {"role": self.role, "session": self.session}
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.receipt is not None:
            out["receipt"] = self.receipt.to_json()
        return out


class RoleChat:
    """One chat with a conversational role; ``close`` ends it exactly once."""

    def __init__(self, root: MemoryRoot, role: str, *, executor=None) -> None:
        self.root = root
        self.role = role
        self.spec = role_table.role_spec(role)  # an unknown role is a UsageError before anything starts
        self.config = root.config()
        self.executor = executor or make_executor(self.config, role)
        self.session = f"chat-{uuid.uuid4().hex[:12]}"
        self.sup: Supervisor | None = None
        self.op: Operation | None = None
        self.conv: Conversation | None = None
        self.closed: ChatClosed | None = None
        self.start()

    @property
    def mode(self) -> str:
        """What the role's answers do, in a few words for a banner."""
        return "writes land when you leave" if self.spec.writer else "read-only"

    def start(self) -> None:
        """Begin the writer's operation (if any) and the conversation in its worktree."""
        where: Path | str = self.root.path
        if self.spec.writer:
            self.sup = Supervisor(self.root)
            self.op = self.sup.begin("chat", self.role)
            where = self.op.worktree
        try:
            tools = RoleTools(where, self.role).specs()
            trace = DebugTrace.for_role(self.root.runtime, self.role, enabled=bool(self.config.get("debug.trace")))
            self.conv = self.executor.start(system=CHAT_PREAMBLE + role_instructions(self.role), tools=tools,
                                            cwd=str(where), trace=trace)
        except BaseException as exc:  # no chat: the operation must not stay running
            self._end_operation(f"the chat could not start: {exc}")
            raise

    def send(self, text: str) -> str:
        assert self.conv is not None  # start() opened it, or raised
        return self.conv.send(text).text

    def close(self) -> ChatClosed:
        """End the chat; a writer's committed work goes through admission and publication."""
        if self.closed is not None:
            return self.closed
        out = ChatClosed(self.role, self.session)
        try:
            if self.conv is not None:
                self.conv.close()
        finally:
            if self.sup is not None and self.op is not None:
                try:
                    out.receipt = self.sup.finish(self.op, summary=f"chat with {self.role}")
                except EngineError as exc:
                    out.error = exc
                    out.receipt = self.sup.fail(self.op, f"{exc.kind}: {exc.message}")
                finally:
                    self.sup.close()
        self.closed = out
        return out

    def _end_operation(self, error: str) -> None:
        if self.sup is None:
            return
        try:
            if self.op is not None:
                self.sup.fail(self.op, error)
        finally:
            self.sup.close()
            self.sup = None

    def __enter__(self) -> RoleChat:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
