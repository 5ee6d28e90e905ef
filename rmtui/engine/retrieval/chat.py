"""Chats for every role, the retrieve role included.

The retrieve role does not converse: each message is a need, answered with rendered memory
by agent retrieval under one chat session id (so the delivery history spans the chat). It
lives here rather than in :mod:`rmtui.engine.roles.chat` because retrieval sits above roles.
"""

from __future__ import annotations

from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.retrieval.agent_retrieve import agent_retrieve
from rmtui.engine.roles.chat import ChatClosed, RoleChat

__all__ = ["ChatClosed", "RetrieveChat", "RoleChat", "open_chat"]


class RetrieveChat(RoleChat):
    """A chat with the retrieve role: no conversation, no operation."""

    @property
    def mode(self) -> str:
        return "each message is a need; answers are rendered memory"

    def start(self) -> None:
        pass

    def send(self, text: str) -> str:
        return agent_retrieve(self.root, self.session, text, executor=self.executor).text


def open_chat(root: MemoryRoot, role: str, *, executor=None) -> RoleChat:
    """Start a chat with ``role`` (a UsageError for a role the table does not know)."""
    cls = RetrieveChat if role == "retrieve" else RoleChat
    return cls(root, role, executor=executor)
