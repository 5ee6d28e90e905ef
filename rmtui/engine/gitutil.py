"""Small Git helpers shared by every part of the engine."""

from __future__ import annotations

from pathlib import Path

#: The author and committer of every commit rmtui makes (and of its reflog entries).
IDENTITY = {
    "GIT_AUTHOR_NAME": "rmtui", "GIT_AUTHOR_EMAIL": "rmtui@localhost",
    "GIT_COMMITTER_NAME": "rmtui", "GIT_COMMITTER_EMAIL": "rmtui@localhost",
}


def head_commit(path: Path) -> str | None:
    """HEAD's commit, read from the ref files (a warm retrieve must not pay GitPython's
    import); GitPython answers the unusual layouts the plain read does not cover."""
    path = Path(path)
    gitdir = path / ".git"
    try:
        if gitdir.is_file():
            gitdir = (path / gitdir.read_text().split("gitdir:", 1)[1].strip()).resolve()
        head = (gitdir / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[4:].strip()
        common = gitdir
        if (gitdir / "commondir").exists():
            common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
        for base in (gitdir, common):
            f = base / ref
            if f.exists():
                return f.read_text().strip() or None
        packed = common / "packed-refs"
        if packed.exists():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
        return None  # an unborn branch
    except (OSError, IndexError):
        import git

        try:
            return git.Repo(path).head.commit.hexsha
        except (ValueError, git.GitError):
            return None
