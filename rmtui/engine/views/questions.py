"""Answering a question view (MQ#; docs/formats.md, "Shared views"): the provider's retrieve role answers against its
private memory; the memory itself is never handed over, and nothing is written to memory.

With a retrieve model configured (``[retrieve.model]`` or ``[retrieve.agent_cli]``) the
role reads the memory with its read-only tools, follows the view's private
``retriever.md``, and ends by calling ``submit_answer``. Without one the provider's own
retrieval (the embedding host, or BM25) answers with the matching memory text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmtui.engine.errors import EngineError
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files
from rmtui.engine.views.provider import load_question

MAX_QUESTION_CHARS = 4000
MAX_ANSWER_CHARS = 20000
SYSTEM = """You answer one question for someone outside this memory, through a shared question view.
Read the memory with your tools, then call submit_answer exactly once with a short, direct answer.
Answer only from the memory; if it does not hold the answer, say so. Never paste whole files or
private details the question does not need. The view owner's instructions follow.

{instructions}"""


def answer(root: MemoryRoot, view_id: str, question: str) -> QuestionAnswer:
    """``{"view_id", "status": "answered"|"unavailable", "answer"|"reason", "text"}``; never raises
    for a problem the asker should read about (it becomes ``unavailable`` with the reason)."""
    files.check_view_id(view_id)
    question = (question or "").strip()
    try:
        if not question:
            raise _Unavailable("the question is empty")
        if len(question) > MAX_QUESTION_CHARS:
            raise _Unavailable(f"the question is over {MAX_QUESTION_CHARS} characters")
        spec, instructions = load_question(root.path, view_id)
        if not spec.approved:
            raise _Unavailable("this question view is not approved by its owner")
        if spec.provider_role != "retrieve":
            raise _Unavailable(f"provider_role {spec.provider_role!r} is not supported (retrieve only)")
        text = _by_model(root, question, instructions) or _by_retrieval(root, view_id, question)
    except _Unavailable as exc:
        return result(view_id, "unavailable", reason=str(exc))
    except EngineError as exc:
        return result(view_id, "unavailable", reason=exc.message)
    return result(view_id, "answered", answer=text[:MAX_ANSWER_CHARS])


class _Unavailable(Exception):
    pass


@dataclass(frozen=True)
class QuestionAnswer:
    """A question view's answer (``answered``) or why there is none (``unavailable``), as the
    provider serves it and the consumer shows it; ``to_json`` is that JSON, in its key order."""

    view_id: str
    status: str  # answered | unavailable
    answer: str | None = None
    reason: str | None = None

    @property
    def text(self) -> str:
        """The answer as the original prints it."""
        lines = [f"Shared question: {self.view_id}", f"Status: {self.status}"]
        if self.status == "answered":
            lines += ["Answer:", (self.answer or "").rstrip()]
        else:
            lines.append(f"Reason: {self.reason or 'unknown'}")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"view_id": self.view_id, "status": self.status, "text": self.text}
        if self.answer is not None:
            out["answer"] = self.answer
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def result(view_id: str, status: str, *, answer: str | None = None, reason: str | None = None) -> QuestionAnswer:
    return QuestionAnswer(view_id, status, answer, reason)


def _by_model(root: MemoryRoot, question: str, instructions: str) -> str | None:
    from rmtui.engine.roles.executors.base import ToolSpec
    from rmtui.engine.roles.executors.config import build_executor, resolve_role_executor
    from rmtui.engine.roles.tools import RoleTools

    resolved = resolve_role_executor(root.config(), "retrieve")
    if resolved is None:
        return None
    got: dict[str, str] = {}

    def submit_answer(args: dict) -> str:
        text = args.get("answer")
        if not isinstance(text, str) or not text.strip():
            from rmtui.engine.roles.executors.base import ToolError

            raise ToolError("answer must be a non-empty string")
        got["answer"] = text.strip()
        return "accepted"

    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    tools = RoleTools(root.path, "retrieve").specs() + [
        ToolSpec("submit_answer", "Finish: the answer to send to the asker.", schema, submit_answer, terminal=True)]
    executor = build_executor(resolved.settings)
    system = SYSTEM.format(instructions=instructions.strip() or "(none)")
    conv = executor.start(system=system, tools=tools, cwd=str(root.path))
    try:
        message = f"Question: {question}"
        for _ in range(2):
            conv.send(message)
            if "answer" in got:
                return got["answer"]
            message = "Call submit_answer with your answer."
    finally:
        conv.close()
    raise _Unavailable("the provider's retrieve role did not answer")


def _by_retrieval(root: MemoryRoot, view_id: str, question: str) -> str:
    from rmtui.engine.retrieval.retrieve import retrieve

    # memory only: pending evidence is unreviewed and local, never answered to another party
    res = retrieve(root, f"shared-question-{view_id}", question, include_returned=True, record=False,
                   include_pending=False)
    return res.text
