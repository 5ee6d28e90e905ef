"""The Git plumbing of a publication (docs/architecture.md, "Admission and publication"): the
compare-and-swap of the branch ref, bringing the root's index and work tree to the new head,
trees built and merged in scratch indexes, commits made with ``commit-tree``, blob ids.

The supervisor decides *when* each step runs (under ``memory.lock``, for which operation);
this module only knows *how*, over one repository. The marker ``.runtime/publishing.json`` is
written here too: it names the commits of a CAS in flight so the lock's next holder can finish
the work-tree sync a dead publisher started (``recovery.repair``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import git
from gitdb.base import IStream

from rmtui.engine.errors import ConflictError, OperationFailed, UsageError
from rmtui.engine.gitutil import IDENTITY
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes.admission import BranchMoved, commit_changes
from rmtui.engine.writes.faults import crashpoint, crashpoint_in_git, die_inside_git

TRAILER = "RightMemory-Operation"
#: kind -> (root, message, parent, tree) -> message with a signature trailer over that exact
#: commit; writers that authenticate their own commits register here (the Pursuit editor).
COMMIT_SIGNERS: dict[str, Callable[[MemoryRoot, str, str, str], str]] = {}
PIN_PREFIX = "refs/rightmemory/operations/"
#: Left under ``.runtime/`` by every section that holds ``memory.lock`` exclusively (see the
#: supervisor's module doc).
MARKER = "publishing.json"

#: Per thread and root: how deep the sections under ``memory.lock`` nest (any Supervisor
#: instance), and whether a work-tree sync is pending (the marker must then stay).
_sections = threading.local()


def section(lock_path: Path) -> dict:
    table = getattr(_sections, "table", None)
    if table is None:
        table = _sections.table = {}
    return table.setdefault(str(Path(lock_path).resolve()), {"depth": 0, "pending": False})


def pin_ref(op_id: str) -> str:
    """The ref that keeps an operation's candidate commit alive until it is final."""
    return PIN_PREFIX + hashlib.sha256(op_id.encode()).hexdigest()


def blob_id(data: bytes, like: str) -> str:
    """The Git object id of a blob with ``data`` (SHA-1, or SHA-256 in such a repository)."""
    h = hashlib.sha256() if len(like) == 64 else hashlib.sha1()  # noqa: S324 - Git's object ids
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def file_blob(path: Path, like: str) -> str | None:
    """The blob id of a regular file's content; None if there is nothing, ``"?"`` if not a file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "?"
    return blob_id(path.read_bytes(), like)


def write_file(target: Path, data: bytes, tmpdir: Path) -> None:
    """Replace ``target`` with ``data`` in one rename (the half-written file stays under ``tmpdir``)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmpdir.mkdir(parents=True, exist_ok=True)
    tmp = tmpdir / f"sync-{os.getpid()}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666), "wb") as f:
        f.write(data)
    os.replace(tmp, target)


class Publisher:
    """Git plumbing over the active root's repository (shared with the supervisor that owns it)."""

    def __init__(self, root: MemoryRoot, repo: git.Repo) -> None:
        self.root = root
        self.repo = repo

    # -- reading the repository ----------------------------------------------
    @property
    def git_dir(self) -> Path:
        return Path(self.repo.common_dir)

    def head(self) -> str:
        return self.repo.git.rev_parse("HEAD")

    def head_or_none(self) -> str | None:
        try:
            return self.head()
        except git.GitCommandError:
            return None

    def branch_ref(self) -> str:
        try:
            return self.repo.git.symbolic_ref("-q", "HEAD")
        except git.GitCommandError:
            raise UsageError("the active root is on a detached HEAD; check out its branch first") from None

    def current_branch(self) -> str | None:
        """The ref HEAD names, read from the file (``git symbolic-ref`` would do too, lock or not)."""
        try:
            text = (self.git_dir / "HEAD").read_text().strip()
        except OSError:
            return None
        return text[len("ref: "):] if text.startswith("ref: refs/") else None

    def is_ancestor(self, a: str, b: str) -> bool:
        # GitPython annotates is_ancestor() as taking Commit objects; it hands any rev to `git merge-base`
        return self.repo.is_ancestor(a, b)  # type: ignore[arg-type]

    def message_of(self, commit: str) -> str:
        message = self.repo.commit(commit).message
        return message.decode("utf-8", "replace") if isinstance(message, bytes) else message

    def tree(self, commit: str) -> str:
        return self.repo.git.rev_parse(f"{commit}^{{tree}}")

    def index_tree(self) -> str | None:
        try:
            return self.repo.git.write_tree()
        except git.GitCommandError:
            return None  # unmerged entries: certainly not our synced candidate

    def staged(self, head: str) -> list[str]:
        """Paths where the root's index differs from ``head`` (none when the root is in step)."""
        out = self.repo.git.diff_index("--cached", "--name-only", "--no-renames", "-z", head)
        return [p for p in out.split("\0") if p]

    def check_in_step(self, ref: str, head: str, staged: list[str] | None = None) -> None:
        """The branch must be at the commit the root's index holds: a branch moved from a worktree
        (which shares the root's refs) leaves the index behind, and is refused, never built on."""
        staged = self.staged(head) if staged is None else staged
        if staged:
            short = ref.removeprefix("refs/heads/")
            raise BranchMoved(
                f"{short} is at {head[:10]} but the root's index holds other content for "
                f"{', '.join(staged[:5])}{' …' if len(staged) > 5 else ''}: the branch was moved without its work "
                f"tree (e.g. `git update-ref` from a worktree) or changes are staged in the root. Nothing was "
                f"published; put the branch back (see `git reflog {short}`) or commit or unstage the changes",
                details={"head": head, "paths": staged})

    # -- the marker --------------------------------------------------------------
    @property
    def marker(self) -> Path:
        return self.root.runtime / MARKER

    def write_marker(self, **fields) -> None:
        path = self.marker
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), **fields}))
        os.replace(tmp, path)

    # -- building trees and commits -------------------------------------------
    @contextmanager
    def scratch_index(self, name: str) -> Iterator[dict]:
        """A private index file (env for git) so trees are built without touching the root's index."""
        idx = self.root.runtime / f"{name}.index"
        try:
            yield {**IDENTITY, "GIT_INDEX_FILE": str(idx)}
        finally:
            idx.unlink(missing_ok=True)
            Path(str(idx) + ".lock").unlink(missing_ok=True)

    def tree_with_file(self, tree: str, rel: str, data: bytes, scratch: str) -> str:
        """``tree`` plus the regular file ``rel`` holding ``data``, built in a scratch index."""
        blob = self.repo.odb.store(IStream("blob", len(data), io.BytesIO(data))).hexsha.decode()
        with self.scratch_index(scratch) as env:
            self.repo.git.read_tree(tree, env=env)
            self.repo.git.update_index("--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
            return self.repo.git.write_tree(env=env).strip()

    def merge_trees(self, base: str, ours: str, theirs: str) -> str | None:
        """Three-way merge of trees in a scratch index; None when a path changed on both sides.

        Plain ``read-tree -m`` (works on every Git, unlike ``merge-tree --merge-base``):
        a path changed on one side only takes that side; any overlap is a conflict.
        """
        with self.scratch_index(f"merge-{os.getpid()}") as env:
            try:
                self.repo.git.read_tree("-i", "-m", "--aggressive", base, ours, theirs, env=env)
                return self.repo.git.write_tree(env=env).strip()
            except git.GitCommandError:
                return None

    def combined_message(self, commits: list[str]) -> str:
        """One message for a writer's commits: the first subject, then a list of the others."""
        subjects = [self.message_of(c).strip() for c in commits]
        subjects = [s for s in subjects if s]
        if not subjects:
            return ""
        return subjects[0] if len(subjects) == 1 else subjects[0].splitlines()[0] + "\n\n" + "\n".join(
            "- " + s.splitlines()[0] for s in subjects[1:])

    def commit_tree(self, tree: str, parent: str, message: str, trailer_id: str, *, kind: str = "") -> str:
        body = message.rstrip() + f"\n\n{TRAILER}: {trailer_id}\n"
        signer = COMMIT_SIGNERS.get(kind)
        if signer is not None:  # a trailer over the exact parent and tree (a rebase signs again)
            body = signer(self.root, body, parent, tree)
        return self.repo.git.commit_tree(tree, "-p", parent, "-m", body, env=IDENTITY).strip()

    # -- moving the branch and the work tree ------------------------------------
    def advance(self, ref: str, head: str, new: str, op_id: str | None = None) -> list[str]:
        """CAS the branch from ``head`` to ``new``, then bring the root's index and work tree to it;
        returns the paths left as a person changed them meanwhile.

        The marker names both commits first, so a death anywhere in between is finished by the
        next holder of the lock; the work tree is never ahead of the ref.
        """
        self.write_marker(op=op_id, branch=ref, **{"from": head, "to": new})
        crashpoint("before-cas")
        self.cas(ref, head, new)  # a refusal here has changed nothing
        state = section(self.root.lock_path)
        state["pending"] = True
        crashpoint("after-cas")
        try:
            left = self.sync(head, new)
        except (git.GitCommandError, OSError) as exc:  # the ref moved: the lock's next holder finishes the sync
            why = exc.stderr.strip() if isinstance(exc, git.GitCommandError) and isinstance(exc.stderr, str) else exc
            raise OperationFailed(f"published {new[:10]}, but bringing the work tree to it failed ({why}); "
                                  "`recover` finishes it") from None
        crashpoint("after-worktree-sync")
        self.write_marker(op=op_id)
        state["pending"] = False
        return left

    def cas(self, ref: str, expected: str, new: str) -> None:
        args = ["update-ref", "-m", "rmtui publish", ref, new, expected]
        if crashpoint_in_git("during-cas"):  # die while git holds the ref's (and HEAD's) lock
            die_inside_git("during-cas", self.root.path, ["update-ref", "-m", "rmtui publish", "--stdin"],
                           f"start\nupdate {ref} {new} {expected}\nprepare\n".encode(),
                           env={**os.environ, **IDENTITY}, answer=b"prepare: ok")
        try:
            self.repo.git.update_ref(*args[1:])
        except git.GitCommandError as exc:
            err = exc.stderr.strip() if isinstance(exc.stderr, str) else str(exc)
            if ".lock" in err and "exists" in err:
                raise ConflictError(f"cannot move {ref}: a Git lock is held ({err}); another git command is "
                                    "running in the root, or died holding it (`recover` clears what a dead "
                                    "rmtui left)") from None
            raise ConflictError(f"branch moved during publication: {err}") from None

    def _git_input(self, args: list[str], data: bytes) -> str:
        proc = subprocess.run(["git", *args], cwd=self.root.path, input=data, capture_output=True,
                              env={**os.environ, **IDENTITY})
        if proc.returncode != 0:
            raise git.GitCommandError(["git", *args], proc.returncode, proc.stderr, proc.stdout)
        return proc.stdout.decode("utf-8", "surrogateescape")

    def sync(self, old: str, new: str, *, force: bool = False) -> list[str]:
        """Bring the root's index and work tree from ``old`` to ``new`` (the ref is already there).

        Only the paths that differ are touched: index entries first, then the files (written from
        Git objects), then a stat refresh. Without ``force`` a file holding neither side's
        content (a person's edit made meanwhile) is left as it is; the paths left are returned.
        """
        changes = commit_changes(self.repo, old, new)
        records = b"".join(
            f"{c.new_mode} {c.new_blob}\t".encode() + c.path.encode("utf-8", "surrogateescape") + b"\0"
            for c in changes)
        args = ["update-index", "-z", "--index-info"]
        if crashpoint_in_git("during-sync"):
            die_inside_git("during-sync", self.root.path, args, records[: len(records) // 2],
                           env={**os.environ, **IDENTITY}, lock=self.git_dir / "index.lock")
        if records:
            self._git_input(args, records)
        left = []
        tmpdir = self.root.runtime
        for c in changes:
            target = self.root.path / c.path
            gone = c.status == "D" or c.new_mode == "000000"
            current = file_blob(target, c.new_blob)
            old_id = None if c.old_mode == "000000" else c.old_blob
            new_id = None if gone else c.new_blob
            if current == "?" or (not force and current not in (old_id, new_id)):
                left.append(c.path)
                continue
            if current == new_id:
                continue
            if gone:
                target.unlink(missing_ok=True)
                parent = target.parent
                while parent != self.root.path and parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
                    parent = parent.parent
            else:
                write_file(target, self.repo.odb.stream(bytes.fromhex(c.new_blob)).read(), tmpdir)
        self.repo.git.update_index("-q", "--refresh", with_exceptions=False)
        return left
