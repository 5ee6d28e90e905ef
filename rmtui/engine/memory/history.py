"""Which commit last changed a piece of memory: blame of an item's lines, plus the log of
the file that backs it (a skill or pursuit file), newest wins."""

from __future__ import annotations

from dataclasses import dataclass

import git

from rmtui.engine.memory.roots import MemoryRoot


@dataclass
class CommitInfo:
    """One commit as fronts show it: ``committed_at`` is seconds since the epoch (UTC)."""

    sha: str
    subject: str
    committed_at: float

    def to_json(self) -> dict:
        return {"sha": self.sha, "subject": self.subject, "committed_at": self.committed_at}


def blame_newest(repo: git.Repo, path: str, start: int, end: int) -> tuple[int, str] | None:
    """(commit time, sha) of the newest commit among lines start..end of ``path`` at HEAD;
    None when the lines are not committed (or HEAD is unborn)."""
    try:
        out = repo.git.blame("--porcelain", "-L", f"{start},{end}", "HEAD", "--", path)
    except git.GitCommandError:
        return None
    best: tuple[int, str] | None = None
    current = None
    for line in out.splitlines():
        parts = line.split(" ")
        if len(parts[0]) == 40 and all(c in "0123456789abcdef" for c in parts[0]):
            current = parts[0]
        elif line.startswith("committer-time ") and current and set(current) != {"0"}:
            t = int(line.split(" ", 1)[1])
            if best is None or t > best[0]:
                best = (t, current)
    return best


def last_commit(root: MemoryRoot, file: str, start: int, end: int, backing: str | None = None) -> CommitInfo | None:
    """The newest commit that changed lines start..end of ``file`` (or the backing file);
    None when none did (uncommitted lines, an unborn branch)."""
    repo = git.Repo(root.path)
    try:
        best = blame_newest(repo, file, max(start, 1), max(end, start, 1))
        if backing:
            try:
                out = repo.git.log("-1", "--format=%ct %H", "HEAD", "--", backing).strip()
            except git.GitCommandError:
                out = ""
            if out:
                t, sha = out.split(" ", 1)
                if best is None or int(t) > best[0]:
                    best = (int(t), sha)
        if best is None:
            return None
        commit = repo.commit(best[1])
        raw = commit.message  # typed str | bytes; GitPython decodes it (errors replaced)
        message = (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw).strip()
        return CommitInfo(sha=commit.hexsha, subject=message.splitlines()[0] if message else "",
                          committed_at=float(commit.committed_date))
    finally:
        repo.close()
