"""Role executors behind one interface (docs/architecture.md, "Executors").

``make_executor(config, role)`` picks the configured one: Anthropic Messages, OpenAI Chat
Completions (any compatible endpoint), or a ``claude``/``codex`` CLI subprocess.
SDKs are imported only when their executor is built.
"""

from rmtui.engine.roles.executors.base import (
    AbortTurn,
    Conversation,
    Executor,
    ExecutorSettings,
    ToolError,
    ToolSpec,
    TurnResult,
)
from rmtui.engine.roles.executors.config import build_executor, make_executor, resolve_role_executor
from rmtui.engine.roles.executors.trace import DebugTrace

__all__ = [
    "AbortTurn", "Conversation", "DebugTrace", "Executor", "ExecutorSettings", "ToolError", "ToolSpec",
    "TurnResult", "build_executor", "make_executor", "resolve_role_executor",
]
