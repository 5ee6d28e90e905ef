"""What an operation changed, file by file: its landed (or candidate) diff, or for a running
operation that has not committed yet, its worktree against its base so far.

One reading for every front (headless ``diff``, the workbench's diff screen), so a running
operation's work shows the same everywhere. Fronts import the dataclasses at start-up, so
Git and the supervisor load only when a diff is read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from rmtui.engine.memory.roots import MemoryRoot


@dataclass
class FileDiff:
    """One file of a unified diff, with its lines and the count of added/removed lines."""

    path: str
    lines: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class OperationDiff:
    """An operation's header fields and its diff; ``live`` when read from a running worktree."""

    id: str
    kind: str
    role: str
    phase: str
    final: bool  # committed, failed, ...: nothing will change any more
    base: str
    landed: str | None  # the commit published to the root, once landed
    candidate: str | None  # the commit admission checks, before landing
    summary: str
    error: str | None
    live: bool
    text: str
    files: list[FileDiff] = field(default_factory=list)

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("text", "files")}
        return {**out, "added": self.added, "removed": self.removed, "diff": self.text,
                "files": [f.to_json() for f in self.files]}


def parse_diff(text: str) -> list[FileDiff]:
    """Split a unified Git diff into files, counting added and removed lines."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            rest = line[len("diff --git "):]
            path = rest.split(" b/", 1)[1] if " b/" in rest else rest
            current = FileDiff(path=path)
            files.append(current)
        if current is None:
            continue
        current.lines.append(line)
        if line.startswith("+") and not line.startswith("+++"):
            current.added += 1
        elif line.startswith("-") and not line.startswith("---"):
            current.removed += 1
    return files


def worktree_diff(worktree: Path, base: str) -> str:
    """What a running operation has changed so far: its worktree against its base commit,
    committed or not, new files included (read-only: nothing is staged)."""
    import git

    repo = git.Repo(worktree)
    try:
        text = repo.git.diff(base)
        untracked = repo.git.ls_files("--others", "--exclude-standard", "-z").split("\0")
        for rel in filter(None, untracked):
            # --no-index exits 1 when the files differ, which is the point here
            _code, out, _err = repo.git.execute(["git", "diff", "--no-index", "--", "/dev/null", rel],
                                                with_extended_output=True, with_exceptions=False)
            if out:
                text += ("\n" if text else "") + out
    finally:
        repo.close()
    return text


def operation_diff(root: MemoryRoot, op_id: str) -> OperationDiff:
    """The diff of an operation (or receipt) by any form of its id (``OperationStore.resolve``);
    raises UsageError for an unknown or ambiguous one."""
    from rmtui.engine.writes.supervisor import Supervisor

    with Supervisor(root) as sup:
        op = sup.store.get(sup.store.resolve(op_id))
        text = sup.diff(op.id)
    live = False
    if not text and not op.final and Path(op.worktree).is_dir():
        text, live = worktree_diff(Path(op.worktree), op.base_commit), True
    return OperationDiff(id=op.id, kind=op.kind, role=op.role, phase=op.phase, final=op.final, base=op.base_commit,
                         landed=op.landed_commit, candidate=op.candidate_commit, summary=op.summary,
                         error=op.error, live=live, text=text, files=parse_diff(text))
