"""The Historian: read-only answers from history (docs/formats.md, "Maintenance cycles";
docs/architecture.md, "Sync, shared views, cycles").

The ``historian`` role works over the live root with read and history tools only (the role
table grants no write tool and it commits nothing): current Memory, ``prune:`` ledgers, and
past versions of memory files through ``git_log``/``git_show``. Every answer is returned
labelled historical, with the head it was read at, and is never written back to memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmtui.engine.cycles import common
from rmtui.engine.errors import UsageError
from rmtui.engine.memory.roots import MemoryRoot

ROLE = "historian"
LABEL = "historical"
MAX_QUESTION_CHARS = 4000
PREAMBLE = ("A person or an agent asks a question about the history of this memory root. Answer it from "
            "history with your read-only tools. Your role's instructions follow.\n\n")


@dataclass(frozen=True)
class HistorianAnswer:
    """The Historian's answer to ``question``, read at ``head`` and always labelled
    historical; ``prune_commits`` is how many ledgers it was shown."""

    question: str
    answer: str
    head: str
    prune_commits: int
    label: str = LABEL

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "question": self.question, "answer": self.answer, "head": self.head,
                "prune_commits": self.prune_commits}


def historian_prompt(question: str, head: str, prunes: list[dict]) -> str:
    lines = [f"Question: {question}", "",
             f"The root's head is {head[:12]}; current memory is what that commit holds."]
    if prunes:
        lines.append(f"{len(prunes)} prune commit(s) hold ledgers of removed items; the newest: " +
                     ", ".join(f"{p['commit'][:12]} ({p['date'][:10]}, {p['subject']})" for p in prunes[:5]) + ".")
    else:
        lines.append("There is no prune commit yet.")
    lines += ["", "Label every historical statement with its commit and date, say plainly where current memory "
                  "differs, and say so when history does not answer the question."]
    return "\n".join(lines)


def ask(root: MemoryRoot, question: str, *, executor: Any = None) -> HistorianAnswer:
    """The Historian's answer to ``question``, labelled historical."""
    import git

    from rmtui.engine.cycles.pruner import prune_history

    question = (question or "").strip()
    if not question:
        raise UsageError("the question must not be empty")
    if len(question) > MAX_QUESTION_CHARS or "\x00" in question:
        raise UsageError(f"the question must be text of at most {MAX_QUESTION_CHARS} characters")
    cfg = root.config()
    if executor is None:
        from rmtui.engine.roles.executors import make_executor

        executor = make_executor(cfg, ROLE)
    repo = git.Repo(root.path)
    try:
        head = repo.git.rev_parse("HEAD")
        prunes = [p.to_json() for p in prune_history(repo, head, limit=20)]
    finally:
        repo.close()
    with common.RoleSession(root, executor, ROLE, root.path, cfg=cfg, preamble=PREAMBLE, head=head) as session:
        answer = session.send(historian_prompt(question, head, prunes))
    return HistorianAnswer(question, answer, head, len(prunes))
