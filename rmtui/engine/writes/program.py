"""A short write by the program itself (guidance capture, ``config set``, shared-view files):
one operation, the caller's edit in its worktree, one commit, the supervisor's admission and
publication, a few retries when another writer of a semantic path wins the race.

Every such write goes through here, so each settles the same way: an operation begun is
finished or failed, never left running, and one whose commit already reached the branch is
left for ``recover`` to finish rather than failed after the fact.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import git

from rmtui.engine.errors import ConflictError
from rmtui.engine.gitutil import IDENTITY
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes.admission import StaleBase
from rmtui.engine.writes.operations import Receipt
from rmtui.engine.writes.supervisor import Supervisor

ATTEMPTS = 5


def settle(sup: Supervisor, op_id: str, why: str) -> None:
    """Fail ``op_id`` after an error, unless its commit is already on the branch (recovery
    then only finishes its record)."""
    op = sup.store.get(op_id)
    if op.final:
        return
    if op.phase == "prepared" and op.candidate_commit and sup.publisher.is_ancestor(op.candidate_commit, sup.head()):
        return
    sup.fail(op, why)


def program_write(root: MemoryRoot, kind: str, role: str, edit: Callable[[Path], list[str]], message: str, *,
                  summary: str | None = None, force_add: bool = False, attempts: int = ATTEMPTS,
                  what: str = "the change") -> Receipt:
    """Land ``edit(worktree)`` (it writes its files and returns the paths it touched) as one
    commit ``message`` of the ``role`` writer; nothing staged lands nothing. ``force_add``
    stages paths the root's allow-list ``.gitignore`` does not list."""
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            time.sleep(0.05 * attempt)
        with Supervisor(root) as sup:
            op = sup.begin(kind, role)
            try:
                paths = edit(Path(op.worktree))
                wt = git.Repo(op.worktree)
                try:
                    wt.git.add(*(["-f"] if force_add else []), "--", *paths)
                    if wt.git.diff("--cached", "--name-only"):
                        wt.git.commit("-q", "-m", message, env=IDENTITY)
                finally:
                    wt.close()
                return sup.finish(op, summary=summary or message, message=message)
            except StaleBase as exc:  # another writer landed first: do it again on theirs
                sup.fail(sup.store.get(op.id), str(exc))
                last = exc
            except BaseException as exc:
                settle(sup, op.id, f"{type(exc).__name__}: {exc}")
                raise
    raise ConflictError(f"{what} kept racing with other writers: {last}")
