"""The supervisor: nothing reaches the active root but through it (docs/architecture.md, "Admission and publication").

``begin`` records an operation and gives its writer an isolated worktree at the current
head; ``finish`` admits the writer's commits (read from Git objects, never the writer's
files), records ``prepared``, and publishes under ``memory.lock`` with a compare-and-swap of
the branch ref, then brings the root's index and work tree up to it (never ahead of it).
Landed work is one commit carrying ``RightMemory-Operation: <id>``. ``recover`` takes every
unfinished operation to a final phase by its record alone.

Every section under ``memory.lock`` leaves ``.runtime/publishing.json`` while it runs: found
by the next holder, it proves the last one died inside (the lock is free, so no rmtui
publisher is alive); the Git lock files it may have left in the root are cleared and an
interrupted work-tree sync is finished before anything else happens.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import git
from gitdb.base import IStream

from rmtui.engine.errors import ConflictError, EngineError, OperationFailed, UsageError
from rmtui.engine.evidence import records
from rmtui.engine.locks import file_lock, try_lock
from rmtui.engine.memory.role_table import RECORDS, matches
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes import worktrees
from rmtui.engine.writes.admission import (
    AdmissionRefused,
    BranchMoved,
    DirtyActiveRoot,
    StaleBase,
    changed_paths,
    check_clean,
    check_commits,
    check_tree_object,
    commit_changes,
    dirty_paths,
    is_semantic,
)
from rmtui.engine.writes.operations import (
    Effect,
    Operation,
    OperationStore,
    Receipt,
    new_operation_id,
    owner_alive,
    pid_alive,
    process_identity,
)

TRAILER = "RightMemory-Operation"
#: kind -> (root, message, parent, tree) -> message with a signature trailer over that exact
#: commit; writers that authenticate their own commits register here (the Pursuit editor).
COMMIT_SIGNERS: dict[str, Callable[[MemoryRoot, str, str, str], str]] = {}
PIN_PREFIX = "refs/rightmemory/operations/"
IDENTITY = {
    "GIT_AUTHOR_NAME": "rmtui", "GIT_AUTHOR_EMAIL": "rmtui@localhost",
    "GIT_COMMITTER_NAME": "rmtui", "GIT_COMMITTER_EMAIL": "rmtui@localhost",
}


#: Left under ``.runtime/`` by every section that holds ``memory.lock`` exclusively (see the module doc).
MARKER = "publishing.json"
#: Root-level Git lock files a publisher takes (the branch's own lock is added by name).
ROOT_GIT_LOCKS = ("index.lock", "HEAD.lock", "packed-refs.lock")

#: Per thread and root: how deep the sections under ``memory.lock`` nest (any Supervisor
#: instance), and whether a work-tree sync is pending (the marker must then stay).
_sections = threading.local()


def _section(lock_path: Path) -> dict:
    table = getattr(_sections, "table", None)
    if table is None:
        table = _sections.table = {}
    return table.setdefault(str(Path(lock_path).resolve()), {"depth": 0, "pending": False})


def crashpoint(name: str) -> None:
    """Fault injection for recovery tests: die here, as a kill -9 would, when asked to."""
    if os.environ.get("RMTUI_CRASHPOINT") == name:
        _die(name)


def crashpoint_in_git(name: str) -> bool:
    """Whether the caller should run its Git child for fault injection (see :func:`_die_inside_git`)."""
    return os.environ.get("RMTUI_CRASHPOINT") == name


def _die(name: str, child: subprocess.Popen | None = None) -> None:
    """Die with the whole process group (Git children included), as ``kill -9`` of a group does.

    With ``RMTUI_CRASHPOINT_READY`` naming a file, the point is written there and the process
    waits for the test to kill its group itself.
    """
    ready = os.environ.get("RMTUI_CRASHPOINT_READY")
    if ready:
        tmp = Path(ready + ".tmp")
        tmp.write_text(name)
        os.replace(tmp, ready)
        time.sleep(120)
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    if child is not None:
        child.kill()
    os.kill(os.getpid(), signal.SIGKILL)


def _die_inside_git(name: str, cwd: Path, args: list[str], feed: bytes, *, answer: bytes | None = None,
                    lock: Path | None = None) -> None:
    """Fault injection: start ``git args``, feed it, and die with it while it holds its locks
    (after it printed ``answer``, or once ``lock`` exists) — what killing a publisher's process
    group in the middle of a Git command leaves behind."""
    proc = subprocess.Popen(["git", *args], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**os.environ, **IDENTITY})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(feed)
    proc.stdin.flush()
    if answer is not None:
        seen = b""
        while answer not in seen:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
    deadline = time.monotonic() + 10
    while lock is not None and not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    _die(name, proc)


def _blob_id(data: bytes, like: str) -> str:
    """The Git object id of a blob with ``data`` (SHA-1, or SHA-256 in such a repository)."""
    h = hashlib.sha256() if len(like) == 64 else hashlib.sha1()  # noqa: S324 - Git's object ids
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def _file_blob(path: Path, like: str) -> str | None:
    """The blob id of a regular file's content; None if there is nothing, ``"?"`` if not a file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "?"
    return _blob_id(path.read_bytes(), like)


def _write_file(target: Path, data: bytes, tmpdir: Path) -> None:
    """Replace ``target`` with ``data`` in one rename (the half-written file stays under ``tmpdir``)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmpdir.mkdir(parents=True, exist_ok=True)
    tmp = tmpdir / f"sync-{os.getpid()}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666), "wb") as f:
        f.write(data)
    os.replace(tmp, target)


def pin_ref(op_id: str) -> str:
    return PIN_PREFIX + hashlib.sha256(op_id.encode()).hexdigest()


EffectFn = Callable[["Supervisor", Operation], None]
#: Post-commit effects by name; each is retried until done (also by ``recover``).
EFFECTS: dict[str, EffectFn] = {}
#: Effects every operation gets after it reaches a final phase, by phase.
DEFAULT_EFFECTS = {"committed": ("cleanup", "sync_push", "insight_points"), "no_change": ("cleanup", "sync_push"), "failed": ("release_evidence", "cleanup"),
                   "abandoned": ("release_evidence", "cleanup")}


def effect(name: str) -> Callable[[EffectFn], EffectFn]:
    def deco(fn: EffectFn) -> EffectFn:
        EFFECTS[name] = fn
        return fn
    return deco


class Supervisor:
    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.repo = git.Repo(root.path)
        self.store = OperationStore(root)
        #: What the sections under ``memory.lock`` found and repaired after a dead holder.
        self.repaired: list[str] = []

    def close(self) -> None:
        self.store.close()
        self.repo.close()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers -----------------------------------------------------------
    def head(self) -> str:
        return self.repo.git.rev_parse("HEAD")

    def branch_ref(self) -> str:
        try:
            return self.repo.git.symbolic_ref("-q", "HEAD")
        except git.GitCommandError:
            raise UsageError("the active root is on a detached HEAD; check out its branch first") from None

    @contextmanager
    def _scratch_index(self, name: str) -> Iterator[dict]:
        """A private index file (env for git) so trees are built without touching the root's index."""
        idx = self.root.runtime / f"{name}.index"
        try:
            yield {**IDENTITY, "GIT_INDEX_FILE": str(idx)}
        finally:
            idx.unlink(missing_ok=True)
            Path(str(idx) + ".lock").unlink(missing_ok=True)

    def _is_ancestor(self, a: str, b: str) -> bool:
        # GitPython annotates is_ancestor() as taking Commit objects; it hands any rev to `git merge-base`
        return self.repo.is_ancestor(a, b)  # type: ignore[arg-type]

    def _message_of(self, commit: str) -> str:
        message = self.repo.commit(commit).message
        return message.decode("utf-8", "replace") if isinstance(message, bytes) else message

    def _tree(self, commit: str) -> str:
        return self.repo.git.rev_parse(f"{commit}^{{tree}}")

    # -- memory.lock sections and their crash repair ---------------------------
    @property
    def git_dir(self) -> Path:
        return Path(self.repo.common_dir)

    def _marker(self) -> Path:
        return self.root.runtime / MARKER

    def _write_marker(self, **fields) -> None:
        path = self._marker()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), **fields}))
        os.replace(tmp, path)

    @contextmanager
    def _exclusive(self, op_id: str | None = None) -> Iterator[None]:
        """Hold ``memory.lock`` exclusively; the outermost section repairs what a dead holder
        left (see the module doc) and leaves its own marker until it ends."""
        with file_lock(self.root.lock_path):
            state = _section(self.root.lock_path)
            outer = state["depth"] == 0
            if outer:
                self._repair()
                state["pending"] = False
                self._write_marker(op=op_id)
            state["depth"] += 1
            try:
                yield
            finally:
                state["depth"] -= 1
                if outer and not state["pending"]:
                    self._marker().unlink(missing_ok=True)

    def _repair(self) -> list[str]:
        """After a holder of ``memory.lock`` died inside its section: clear the Git locks it left
        in the root (and on its operation's refs), finish a work-tree sync its CAS started."""
        path = self._marker()
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        done = [f"cleared {p}" for p in self._clear_locks(self._root_lock_files(data.get("branch")))]
        if data.get("op"):
            done += [f"cleared {p}" for p in self._clear_locks(self._op_lock_files(str(data["op"]), None, admin=False))]
        old, new = data.get("from"), data.get("to")
        if old and new and self._head_or_none() == new:
            skipped = self._sync(old, new, force=True)
            done.append(f"finished the work-tree sync to {new[:10]} of an interrupted publication")
            done += [f"left {p}: not a file" for p in skipped]
        path.unlink(missing_ok=True)
        self.repaired.extend(done)
        return done

    def _head_or_none(self) -> str | None:
        try:
            return self.head()
        except git.GitCommandError:
            return None

    def _current_branch(self) -> str | None:
        """The ref HEAD names, read from the file (``git symbolic-ref`` would do too, lock or not)."""
        try:
            text = (self.git_dir / "HEAD").read_text().strip()
        except OSError:
            return None
        return text[len("ref: "):] if text.startswith("ref: refs/") else None

    def _root_lock_files(self, branch: str | None = None) -> list[Path]:
        names = [*ROOT_GIT_LOCKS]
        for ref in {branch, self._current_branch()} - {None}:
            names.append(f"{ref}.lock")
        return [self.git_dir / n for n in names]

    def _admin_dir(self, worktree: str | Path | None, name: str) -> Path | None:
        """The ``.git/worktrees/<x>`` folder of a worktree (by its ``gitdir``, else by name)."""
        base = self.git_dir / "worktrees"
        if worktree:
            want = Path(worktree)
            for d in base.iterdir() if base.is_dir() else ():
                try:
                    if Path((d / "gitdir").read_text().strip()).parent == want:
                        return d
                except OSError:
                    continue
        d = base / name
        return d if d.is_dir() else None

    def _op_lock_files(self, op_id: str, worktree: str | Path | None, *, admin: bool = True) -> list[Path]:
        """Git lock files on an operation's own refs (branch, pin) and, with ``admin``, its worktree."""
        files = [self.git_dir / f"refs/heads/{worktrees.BRANCH_PREFIX}{op_id}.lock", self.git_dir / f"{pin_ref(op_id)}.lock"]
        d = self._admin_dir(worktree, op_id) if admin else None
        if d is not None:
            files += [d / "index.lock", d / "HEAD.lock"]
            locked = d / "locked"  # `worktree add` killed before it finished leaves it "initializing"
            try:
                if "initializing" in locked.read_text():
                    files.append(locked)
            except OSError:
                pass
        return files

    @staticmethod
    def _clear_locks(files: list[Path]) -> list[str]:
        cleared = []
        for f in files:
            try:
                f.unlink()
            except FileNotFoundError:
                continue
            cleared.append(str(f))
        return cleared

    def _git_input(self, args: list[str], data: bytes) -> str:
        proc = subprocess.run(["git", *args], cwd=self.root.path, input=data, capture_output=True,
                              env={**os.environ, **IDENTITY})
        if proc.returncode != 0:
            raise git.GitCommandError(["git", *args], proc.returncode, proc.stderr, proc.stdout)
        return proc.stdout.decode("utf-8", "surrogateescape")

    def _staged(self, head: str) -> list[str]:
        """Paths where the root's index differs from ``head`` (none when the root is in step)."""
        out = self.repo.git.diff_index("--cached", "--name-only", "--no-renames", "-z", head)
        return [p for p in out.split("\0") if p]

    def _check_in_step(self, ref: str, head: str, staged: list[str] | None = None) -> None:
        """The branch must be at the commit the root's index holds: a branch moved from a worktree
        (which shares the root's refs) leaves the index behind, and is refused, never built on."""
        staged = self._staged(head) if staged is None else staged
        if staged:
            short = ref.removeprefix("refs/heads/")
            raise BranchMoved(
                f"{short} is at {head[:10]} but the root's index holds other content for "
                f"{', '.join(staged[:5])}{' …' if len(staged) > 5 else ''}: the branch was moved without its work "
                f"tree (e.g. `git update-ref` from a worktree) or changes are staged in the root. Nothing was "
                f"published; put the branch back (see `git reflog {short}`) or commit or unstage the changes",
                details={"head": head, "paths": staged})

    def _sync(self, old: str, new: str, *, force: bool = False) -> list[str]:
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
            _die_inside_git("during-sync", self.root.path, args, records[: len(records) // 2],
                            lock=self.git_dir / "index.lock")
        if records:
            self._git_input(args, records)
        left = []
        tmpdir = self.root.runtime
        for c in changes:
            target = self.root.path / c.path
            gone = c.status == "D" or c.new_mode == "000000"
            current = _file_blob(target, c.new_blob)
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
                _write_file(target, self.repo.odb.stream(bytes.fromhex(c.new_blob)).read(), tmpdir)
        self.repo.git.update_index("-q", "--refresh", with_exceptions=False)
        return left

    # -- lifecycle ---------------------------------------------------------
    def begin(self, kind: str, role: str, *, batch_id: str | None = None, candidate_uids: list[str] | None = None,
              lease: dict | None = None, allow_rebase: bool = True, effects: tuple[str, ...] = ()) -> Operation:
        """Record ``running`` and create the writer's worktree at the current head."""
        op_id = new_operation_id(kind)
        with self._exclusive():
            base = self.head()
        path = worktrees.worktrees_dir(self.root) / op_id
        op = Operation(id=op_id, kind=kind, role=role, phase="running", base_commit=base,
                       branch=worktrees.BRANCH_PREFIX + op_id, worktree=str(path),
                       lease=lease or process_identity(), batch_id=batch_id,
                       candidate_uids=list(candidate_uids or []), allow_rebase=allow_rebase,
                       effects=[Effect(e) for e in effects])
        self.store.save(op)
        crashpoint("after-running")
        try:
            worktrees.create(self.root, op_id, base)
        except Exception as exc:
            self._final(op, "failed", f"could not create the worktree: {exc}")
            raise
        crashpoint("after-worktree")
        return op

    def finish(self, op: Operation, *, summary: str = "", message: str | None = None,
               finalizer: Callable[[Operation], str] | None = None, allow_empty: bool = False) -> Receipt:
        """Admit the worktree's commits, record ``prepared``, publish; returns the receipt.

        With ``finalizer`` (the Git-backed queue) the prepared candidate is landed by it
        instead: it returns the commit that carries the change, which the active root
        already holds when it returns. ``allow_empty`` lands a commit even when the tree is
        unchanged (the Pruner's empty ``prune: checkpoint``, with ``message``).
        """
        op = self.store.get(op.id)
        if op.final:
            return self.store.receipt(op.id)
        if op.phase == "running":
            self.prepare(op, summary=summary, message=message, allow_empty=allow_empty)
        if finalizer is None:
            return self.publish(op)
        op = self.store.get(op.id)
        landed = finalizer(op) if op.candidate_commit else None
        with self._exclusive(op.id):
            op = self.store.get(op.id)
            if op.final:
                return self.store.receipt(op.id)
            op.landed_commit = landed
            return self._final(op, self._landed_phase(op) if landed else "no_change")

    def _op_lock(self, op_id: str):
        """Serialises the phase changes of one operation (prepare, fail, abandon) across processes.

        Without it a slow second ``prepare`` could overwrite a record another process had
        already published, or an ``abandon`` could release evidence of a landing operation.
        """
        return file_lock(self.root.runtime / "oplocks" / f"{op_id}.lock")

    def _landing_marker(self, op_id: str) -> Path:
        return self.root.runtime / "oplocks" / f"{op_id}.landing"

    @contextmanager
    def landing(self, op_id: str) -> Iterator[None]:
        """Hold the operation's lock while a lander (``maintain land``, ``assistant update complete``)
        runs Git in its worktree, with a marker the lock's next holder reads as "the last lander
        died": the Git locks it left in that worktree are then cleared (:meth:`recover`)."""
        with self._op_lock(op_id):
            marker = self._landing_marker(op_id)
            marker.write_text(str(os.getpid()))
            try:
                yield
            finally:
                marker.unlink(missing_ok=True)

    def _clear_dead_landings(self) -> list[str]:
        """Landing markers whose lander is dead (the op lock is free): clear its worktree's Git locks."""
        done: list[str] = []
        folder = self.root.runtime / "oplocks"
        for marker in sorted(folder.glob("*.landing")) if folder.is_dir() else ():
            op_id = marker.name[: -len(".landing")]
            fd = try_lock(folder / f"{op_id}.lock")
            if fd is None:
                continue  # a lander is at work
            try:
                op = self.store.find(op_id)
                done += [f"cleared {p}" for p in self._clear_locks(
                    self._op_lock_files(op_id, op.worktree if op else None))]
                marker.unlink(missing_ok=True)
            finally:
                os.close(fd)
        return done

    def prepare(self, op: Operation, *, summary: str = "", message: str | None = None,
                allow_empty: bool = False) -> Operation:
        """Admission steps 1-3; a refusal is recorded on the (still running) operation."""
        with self._op_lock(op.id):
            op = self.store.get(op.id)
            if op.phase != "running":
                return op  # another process prepared (or ended) it meanwhile
            return self._prepare(op, summary=summary, message=message, allow_empty=allow_empty)

    def _prepare(self, op: Operation, *, summary: str, message: str | None, allow_empty: bool = False) -> Operation:
        wt_path = Path(op.worktree)
        if not wt_path.is_dir():
            raise UsageError(f"worktree of {op.id} is gone: {wt_path}")
        base = op.base_commit
        try:
            check_clean(wt_path)
            wt = git.Repo(wt_path)
            try:
                candidate = wt.head.commit.hexsha
            finally:
                wt.close()
            active = self.head()
            if active != base and self._is_ancestor(active, candidate):
                base = self._rebased_base(base, candidate)
            result = check_commits(self.repo, base, candidate, op.role)
            tree = self._tree(candidate)
            if op.records_batch:  # the update record lands in the same commit (record-only if no change)
                tree = self._with_update_record(tree, op)
            # exactly the tree that will be published, from Git objects (not the writer's files)
            check_tree_object(self.repo, tree, op.role, changed=result.changed_paths, dropped_refs=result.dropped_refs)
        except (AdmissionRefused, BranchMoved) as exc:
            op.error = str(exc)
            self.store.save(op)
            raise
        op.base_commit = base
        op.summary = summary or op.summary
        op.changed_paths = result.changed_paths
        if tree == self._tree(base) and not (allow_empty and message):
            op.candidate_commit = None
        else:
            msg = message or self._message(result.commits) or (
                f"{op.kind}: {op.role} operation" if op.changed_paths else f"update: record {op.trailer_id}")
            op.candidate_commit = self._commit_tree(tree, base, msg, op.trailer_id, kind=op.kind)
            self.repo.git.update_ref(pin_ref(op.id), op.candidate_commit)
        op.phase = "prepared"
        op.error = None
        self.store.save(op)
        crashpoint("after-prepared")
        return op

    def _rebased_base(self, base: str, candidate: str) -> str:
        """The writer brought its work onto a newer head: that head becomes the base, if it is
        one the supervisor can stand on — a descendant of the captured base that the root's
        index holds (a branch moved from a worktree is not; it is refused)."""
        with self._exclusive():
            active = self.head()
            if active == base or not self._is_ancestor(active, candidate):
                return base
            if not self._is_ancestor(base, active):
                return base  # not a newer head of ours: admission checks base..candidate as it is
            self._check_in_step(self._current_branch() or "HEAD", active)
            return active

    def _with_update_record(self, tree: str, op: Operation) -> str:
        """``tree`` plus ``update_records/<batch id>.json`` (COMPAT §4), built in a scratch index."""
        from rmtui.engine.evidence.queue import EvidenceQueue

        with EvidenceQueue(self.root) as q:
            candidates = [q.get(uid).candidate() for uid in op.candidate_uids]
        rel, data = records.update_record(candidates)
        if rel != f"{records.RECORDS_DIR}/{op.batch_id}.json":
            raise OperationFailed(f"batch {op.batch_id} does not match its candidates (they give {rel})")
        blob = self.repo.odb.store(IStream("blob", len(data), io.BytesIO(data))).hexsha.decode()
        with self._scratch_index(f"record-{op.id}") as env:
            self.repo.git.read_tree(tree, env=env)
            self.repo.git.update_index("--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
            return self.repo.git.write_tree(env=env).strip()

    def _message(self, commits: list[str]) -> str:
        subjects = [self._message_of(c).strip() for c in commits]
        subjects = [s for s in subjects if s]
        if not subjects:
            return ""
        return subjects[0] if len(subjects) == 1 else subjects[0].splitlines()[0] + "\n\n" + "\n".join(
            "- " + s.splitlines()[0] for s in subjects[1:])

    def _commit_tree(self, tree: str, parent: str, message: str, trailer_id: str, *, kind: str = "") -> str:
        body = message.rstrip() + f"\n\n{TRAILER}: {trailer_id}\n"
        signer = COMMIT_SIGNERS.get(kind)
        if signer is not None:  # a trailer over the exact parent and tree (a rebase signs again)
            body = signer(self.root, body, parent, tree)
        return self.repo.git.commit_tree(tree, "-p", parent, "-m", body, env=IDENTITY).strip()

    def publish_exact(self, kind: str, role: str, base: str, commit: str, *, changed: list[str],
                      summary: str) -> Receipt:
        """Publish a commit made elsewhere, exactly (sync: the upstream tip or a validated merge),
        under the same lock, clean-root check and compare-and-swap as every landing.

        The caller has validated ``commit``'s tree from Git objects; the operation is recorded
        ``prepared`` first, so a crash is finished by ``recover`` like any other. A head that
        moved since ``base`` is stale: nothing is rebased over an incoming history.
        """
        op = Operation(id=new_operation_id(kind), kind=kind, role=role, phase="prepared", base_commit=base,
                       branch="", worktree="", lease=process_identity(), candidate_commit=commit,
                       changed_paths=changed, summary=summary, allow_rebase=False)
        self.repo.git.update_ref(pin_ref(op.id), commit)
        self.store.save(op)
        try:
            return self.publish(op)
        except EngineError as exc:
            self.fail(self.store.get(op.id), f"{exc.kind}: {exc.message}")
            raise

    def publish(self, op: Operation) -> Receipt:
        """Under the lock: fence the semantic base, CAS the ref, then sync the work tree to it."""
        with self._exclusive(op.id):
            op = self.store.get(op.id)
            if op.final:
                return self.store.receipt(op.id)
            if op.phase != "prepared":
                raise UsageError(f"operation {op.id} is {op.phase}, not prepared")
            ref = self.branch_ref()  # a detached HEAD is refused before anything moves
            crashpoint("after-lock")
            head = self.head()
            cand = op.candidate_commit
            staged = self._staged(head)
            if cand is not None and head == op.base_commit and staged and self._index_tree() == self._tree(cand):
                # an older rmtui synced the work tree before its CAS and died in between: finish it
                self._cas(ref, head, cand)
                op.landed_commit = cand
                return self._final(op, self._landed_phase(op))
            self._check_in_step(ref, head, staged)  # never build on a branch moved behind the root's back
            if cand is None:
                return self._final(op, "no_change")
            if head == cand or self._is_ancestor(cand, head):
                op.landed_commit = cand  # published before a crash; only the record was missing
                return self._final(op, self._landed_phase(op))
            if head != op.base_commit:
                cand = self._rebase(op, head)
            self._check_active_clean(op)
            self._advance(ref, head, cand, op.id)
            op.landed_commit = cand
            return self._final(op, self._landed_phase(op))

    @staticmethod
    def _landed_phase(op: Operation) -> str:
        """A landed record-only commit (an Update batch that changed no memory) is ``no_change``."""
        return "committed" if op.changed_paths else "no_change"

    def _index_tree(self) -> str | None:
        try:
            return self.repo.git.write_tree()
        except git.GitCommandError:
            return None  # unmerged entries: certainly not our synced candidate

    def _advance(self, ref: str, head: str, new: str, op_id: str | None = None) -> None:
        """CAS the branch from ``head`` to ``new``, then bring the root's index and work tree to it.

        The marker names both commits first, so a death anywhere in between is finished by the
        next holder of the lock; the work tree is never ahead of the ref.
        """
        self._write_marker(op=op_id, branch=ref, **{"from": head, "to": new})
        crashpoint("before-cas")
        self._cas(ref, head, new)  # a refusal here has changed nothing
        state = _section(self.root.lock_path)
        state["pending"] = True
        crashpoint("after-cas")
        try:
            left = self._sync(head, new)
        except (git.GitCommandError, OSError) as exc:  # the ref moved: the lock's next holder finishes the sync
            why = exc.stderr.strip() if isinstance(exc, git.GitCommandError) and isinstance(exc.stderr, str) else exc
            raise OperationFailed(f"published {new[:10]}, but bringing the work tree to it failed ({why}); "
                                  "`recover` finishes it") from None
        crashpoint("after-worktree-sync")
        self._write_marker(op=op_id)
        state["pending"] = False
        if left:
            self.repaired.append(f"kept changes made in the root meanwhile to: {', '.join(left)}")
        crashpoint("after-publish")

    def _cas(self, ref: str, expected: str, new: str) -> None:
        args = ["update-ref", "-m", "rmtui publish", ref, new, expected]
        if crashpoint_in_git("during-cas"):  # die while git holds the ref's (and HEAD's) lock
            _die_inside_git("during-cas", self.root.path, ["update-ref", "-m", "rmtui publish", "--stdin"],
                            f"start\nupdate {ref} {new} {expected}\nprepare\n".encode(), answer=b"prepare: ok")
        try:
            self.repo.git.update_ref(*args[1:])
        except git.GitCommandError as exc:
            err = exc.stderr.strip() if isinstance(exc.stderr, str) else str(exc)
            if ".lock" in err and "exists" in err:
                raise ConflictError(f"cannot move {ref}: a Git lock is held ({err}); another git command is "
                                    "running in the root, or died holding it (`recover` clears what a dead "
                                    "rmtui left)") from None
            raise ConflictError(f"branch moved during publication: {err}") from None

    def _check_active_clean(self, op: Operation) -> None:
        protected = [p for p in dirty_paths(self.repo) if is_semantic(p) or p in op.changed_paths or p.startswith("update_records/")]
        if protected:
            raise DirtyActiveRoot(
                f"the active root has uncommitted changes to protected paths: {', '.join(protected[:5])}",
                details={"paths": protected})

    def _rebase(self, op: Operation, head: str) -> str:
        """Head moved: rebase onto it if only non-semantic paths changed, else refuse as stale."""
        if not self._is_ancestor(op.base_commit, head):
            why = f"the active head {head[:10]} does not descend from the captured {op.base_commit[:10]}"
            self._to_running(op, f"{StaleBase.rule}: {why}")
            raise StaleBase(f"memory changed since the operation began ({why})",
                            details={"operation": op.id, "paths": [], "head": head})
        moved = changed_paths(self.repo, op.base_commit, head)
        semantic = [p for p in moved if is_semantic(p)]
        if semantic or not op.allow_rebase:
            why = f"semantic paths changed since {op.base_commit[:10]}: {', '.join(semantic[:5])}" if semantic else \
                f"the active head moved from the captured {op.base_commit[:10]} to {head[:10]}"
            self._to_running(op, f"{StaleBase.rule}: {why}")
            raise StaleBase(f"memory changed since the operation began ({why})",
                            details={"operation": op.id, "paths": semantic, "head": head})
        cand_before = op.candidate_commit
        if cand_before is None:
            raise UsageError(f"operation {op.id} has no candidate to rebase")
        tree = self._merge_trees(op.base_commit, head, cand_before)
        if tree is None:
            self._to_running(op, f"{StaleBase.rule}: rebase onto {head[:10]} conflicts")
            raise StaleBase(f"rebase of {op.id} onto {head[:10]} conflicts",
                            details={"operation": op.id, "head": head})
        msg = self._message_of(cand_before).split(f"\n\n{TRAILER}:")[0]
        try:  # re-validate the rebased tree, from Git objects like every candidate
            check_tree_object(self.repo, tree, op.role, changed=changed_paths(self.repo, head, tree))
        except AdmissionRefused as exc:
            self._to_running(op, str(exc))
            raise
        new = self._commit_tree(tree, head, msg, op.trailer_id, kind=op.kind)
        op.base_commit = head
        op.candidate_commit = new
        op.changed_paths = [p for p in changed_paths(self.repo, head, new) if not matches(p, RECORDS)]
        self.repo.git.update_ref(pin_ref(op.id), new)
        self.store.save(op)
        return new

    def _merge_trees(self, base: str, ours: str, theirs: str) -> str | None:
        """Three-way merge of trees in a scratch index; None when a path changed on both sides.

        Plain ``read-tree -m`` (works on every Git, unlike ``merge-tree --merge-base``):
        a path changed on one side only takes that side; any overlap is a conflict.
        """
        with self._scratch_index(f"merge-{os.getpid()}") as env:
            try:
                self.repo.git.read_tree("-i", "-m", "--aggressive", base, ours, theirs, env=env)
                return self.repo.git.write_tree(env=env).strip()
            except git.GitCommandError:
                return None

    def _to_running(self, op: Operation, error: str) -> None:
        """A refused candidate goes back to its writer; the worktree stays for correction."""
        op.phase = "running"
        op.error = error
        op.candidate_commit = None
        self.store.save(op)
        try:
            self.repo.git.update_ref("-d", pin_ref(op.id))
        except git.GitCommandError:
            pass

    def _final(self, op: Operation, phase: str, error: str | None = None) -> Receipt:
        op.phase = phase
        op.error = error if error is not None else (op.error if phase in ("failed", "abandoned") else None)
        names = [e.name for e in op.effects]
        extra = list(DEFAULT_EFFECTS.get(phase, ()))
        if phase in ("failed", "abandoned"):
            op.effects = [e for e in op.effects if e.state == "done"]  # success-only effects do not apply
            names = [e.name for e in op.effects]
        for n in extra:
            if n not in names:
                op.effects.append(Effect(n))
        self.store.save(op)
        receipt = self._receipt(op)
        crashpoint("after-final")
        self.run_effects(op)
        return receipt

    def _receipt(self, op: Operation) -> Receipt:
        r = Receipt(operation_id=op.id, kind=op.kind, phase=op.phase, batch_id=op.batch_id,
                    candidate_uids=op.candidate_uids, base_commit=op.base_commit, landed_commit=op.landed_commit,
                    changed_paths=op.changed_paths if op.landed_commit else [], summary=op.summary,
                    sync="local", warnings=op.warnings, error=op.error, created_at=time.time())
        return self.store.save_receipt(r)

    def run_effects(self, op: Operation) -> Operation:
        for eff in op.effects:
            if eff.state == "done":
                continue
            fn = EFFECTS.get(eff.name)
            eff.attempts += 1
            if fn is None:
                eff.state, eff.error = "failed", f"no effect named {eff.name}"
                continue
            try:
                fn(self, op)
            except Exception as exc:  # an effect failing must not undo publication
                eff.state, eff.error = "failed", str(exc)
                op.warnings.append(f"effect {eff.name} failed: {exc}")
            else:
                eff.state, eff.error = "done", None
            self.store.save(op)
        if any(e.state != "done" for e in op.effects):
            self.store.save_receipt(self._receipt_update(op))
        return op

    def _receipt_update(self, op: Operation) -> Receipt:
        r = self.store.receipt(op.id)
        r.warnings = list(op.warnings)
        return r

    def fail(self, op: Operation, error: str) -> Receipt:
        return self._end(op, "failed", error)

    def abandon(self, op: Operation, reason: str) -> Receipt:
        return self._end(op, "abandoned", reason)

    def _end(self, op: Operation, phase: str, error: str) -> Receipt:
        """Fail or abandon, fenced against a concurrent prepare (op lock) and publish (memory.lock)."""
        with self._op_lock(op.id), self._exclusive(op.id):
            op = self.store.get(op.id)
            if op.final:
                return self.store.receipt(op.id)
            return self._final(op, phase, error)

    # -- recovery ----------------------------------------------------------
    def recover(self) -> dict:
        """Finish or abandon every unfinished operation by its record; clean leftovers.

        A running operation whose owner died is abandoned (its evidence released); a
        prepared one is published without re-running its writer (failed if it went stale);
        a final one with pending effects gets them retried. First, what a holder of
        ``memory.lock`` or a lander that died left is repaired: Git lock files, an unfinished
        work-tree sync (``repaired``).
        """
        done: dict[str, list[str]] = {"repaired": [], "published": [], "abandoned": [], "failed": [], "effects": [],
                                      "cleaned": [], "errors": []}
        self.repaired = []
        with self._exclusive():
            done["repaired"] += self._clear_dead_landings()
        for op in self.store.list(unfinished=True):
            try:
                if op.phase == "running":
                    if owner_alive(op.lease):
                        continue
                    self.abandon(op, "owner process died before the candidate was prepared")
                    done["abandoned"].append(op.id)
                elif op.phase == "prepared" and op.external_finalizer:
                    continue  # landed through the shared queue by its driver, never here
                elif op.phase == "prepared":
                    if op.lease and op.lease.get("until") is None and op.lease.get("pid") != os.getpid() \
                            and owner_alive(op.lease):
                        continue  # its owner is alive and will publish it
                    try:
                        self.publish(op)
                        done["published"].append(op.id)
                    except (StaleBase, AdmissionRefused) as exc:
                        self.fail(self.store.get(op.id), f"recovery could not publish: {exc}")
                        done["failed"].append(op.id)
                else:
                    with self._exclusive(op.id):
                        if self.store.find_receipt(op.id) is None:
                            self._receipt(op)
                        self.run_effects(op)
                    done["effects"].append(op.id)
            except Exception as exc:  # one stuck operation must not stop the others' recovery
                done["errors"].append(f"{op.id}: {exc}")
        try:
            with self._exclusive():
                done["cleaned"] = self._clean_leftovers()
                done["errors"] += self._foreign_locks()
                ref, head = self._current_branch(), self._head_or_none()
                if ref and head and not any(BranchMoved.rule in e for e in done["errors"]):
                    try:  # a branch moved behind the root's back blocks every landing: say so
                        self._check_in_step(ref, head)
                    except BranchMoved as exc:
                        done["errors"].append(exc.message)
        except Exception as exc:
            done["errors"].append(f"cleaning leftovers: {exc}")
        done["repaired"] = [*self.repaired, *done["repaired"]]
        return done

    def _clear_finished_op_locks(self, known: set[str], live: set[str], ours: set[str]) -> list[str]:
        """Git lock files on refs and worktrees of our operations that are no longer live."""
        gd = self.git_dir
        files: list[Path] = []
        for lock in (gd / "refs/heads" / worktrees.BRANCH_PREFIX).glob("*.lock"):
            if lock.name[: -len(".lock")] not in live:
                files.append(lock)
        finished_pins = {pin_ref(i).removeprefix(PIN_PREFIX) for i in known - live}
        for lock in (gd / PIN_PREFIX).glob("*.lock"):
            if lock.name[: -len(".lock")] in finished_pins:
                files.append(lock)
        wdir = worktrees.worktrees_dir(self.root)
        for admin in (gd / "worktrees").iterdir() if (gd / "worktrees").is_dir() else ():
            try:
                where = Path((admin / "gitdir").read_text().strip()).parent
            except OSError:
                where = wdir / admin.name  # `worktree add` died before writing it
            if where.parent == wdir and where.name in (known | ours) and where.name not in live:
                files += [f for f in self._op_lock_files(where.name, where) if f.parent == admin]
        return self._clear_locks(files)

    def _foreign_locks(self) -> list[str]:
        """Root Git locks still there although no rmtui publisher holds ``memory.lock`` (this
        process does): a git command someone runs in the root, or one that died. Named, not
        touched — only a person knows whether that command still runs."""
        return [f"{p}: a Git lock no rmtui process holds; if no git command runs in {self.root.path}, delete it"
                for p in self._root_lock_files() if p.exists()]

    def _clean_leftovers(self) -> list[str]:
        """Remove worktrees, branches and pins of our own operations that are finished.

        Leftovers are listed before the records are read: ``begin`` saves its record before
        it creates anything, so whatever of ours exists now has a record. ``.runtime/worktrees/``
        is shared with the original tool (its guidance, queue and sync worktrees): a folder
        that is neither an operation of ours on record nor checked out on our branch
        namespace is not ours and is never touched.
        """
        paths = worktrees.existing(self.root)
        branches = worktrees.op_branches(self.root)
        pins = self.repo.git.for_each_ref("--format=%(refname)", PIN_PREFIX).split()
        records = self.store.list()
        known = {o.id for o in records}
        live = {o.id for o in records if not o.final}
        ours = known | worktrees.on_our_branch(self.root)
        cleaned = self._clear_finished_op_locks(known, live, ours)
        for path in paths:
            if path.name in ours and path.name not in live:
                worktrees.remove(self.root, path, worktrees.BRANCH_PREFIX + path.name)
                cleaned.append(str(path))
        gone = {p.name for p in paths}
        for branch in branches:
            name = branch[len(worktrees.BRANCH_PREFIX):]
            if name not in live and name not in gone:  # our branch namespace
                self._clear_locks(self._op_lock_files(name, None))
                worktrees.remove(self.root, None, branch)
                cleaned.append(branch)
        finished_pins = {pin_ref(i) for i in known - live}  # only pins of our own finished records
        for ref in pins:
            if ref in finished_pins:
                self.repo.git.update_ref("-d", ref)
                cleaned.append(ref)
        oplocks = self.root.runtime / "oplocks"
        for lock in oplocks.glob("*.lock") if oplocks.is_dir() else ():
            if lock.stem not in live:
                lock.unlink(missing_ok=True)
        for scratch in self.root.runtime.glob("*.index*"):  # scratch indexes of dead builders
            owner = scratch.name.split(".index")[0]
            kind, _, ident = owner.partition("-")
            dead = (kind == "record" and ident not in live) or (kind == "merge" and ident.isdigit()
                                                               and not pid_alive(int(ident)))
            if dead:
                scratch.unlink(missing_ok=True)
        for tmp in [*self.root.runtime.glob(f"{MARKER}.*.tmp"), *self.root.runtime.glob("sync-*.tmp")]:
            pid = tmp.name.removesuffix(".tmp").rsplit(".", 1)[-1].removeprefix("sync-")
            if pid.isdigit() and not pid_alive(int(pid)):  # half-written by a writer that died
                tmp.unlink(missing_ok=True)
        return cleaned

    def diff(self, op_id: str) -> str:
        op = self.store.get(op_id)
        target = op.landed_commit or op.candidate_commit
        if target is None:
            return ""
        return self.repo.git.diff(op.base_commit, target)


# -- built-in effects ------------------------------------------------------------

@effect("cleanup")
def _cleanup(sup: Supervisor, op: Operation) -> None:
    # the operation is final: a Git lock on its refs or worktree is a dead (or fenced) writer's
    sup._clear_locks(sup._op_lock_files(op.id, op.worktree or None))
    worktrees.remove(sup.root, op.worktree, op.branch)
    try:
        sup.repo.git.update_ref("-d", pin_ref(op.id))
    except git.GitCommandError:
        pass
    (sup.root.runtime / "oplocks" / f"{op.id}.lock").unlink(missing_ok=True)


@effect("release_evidence")
def _release_evidence(sup: Supervisor, op: Operation) -> None:
    """A failed or abandoned batch loses nothing: its evidence goes back to the queue."""
    if not op.candidate_uids:
        return
    from rmtui.engine.evidence.queue import EvidenceQueue

    with EvidenceQueue(sup.root) as q:
        q.release(op.candidate_uids, op.batch_id)


@effect("evidence_consumed")
def _evidence_consumed(sup: Supervisor, op: Operation) -> None:
    if not op.candidate_uids:
        return
    from rmtui.engine.evidence.queue import EvidenceQueue

    with EvidenceQueue(sup.root) as q:
        q.consume(op.candidate_uids, op.batch_id)


@effect("update_record")
def _update_record(sup: Supervisor, op: Operation) -> None:
    """Nothing to do: the record lands in the operation's own commit. Kept so operations
    recorded by an older rmtui, which listed this effect, still finish."""


@effect("insight_points")
def _insight_points(sup: Supervisor, op: Operation) -> None:
    """A landed Memory-changing update transaction adds Insight's points once (COMPAT §7)."""
    from rmtui.engine.memory.role_table import MEMORY_GRAPH
    from rmtui.engine.writes import triggers

    if op.role not in triggers.POINT_ROLES or not op.landed_commit:
        return
    if not any(matches(p, MEMORY_GRAPH) for p in op.changed_paths):
        return
    try:
        points = float(sup.root.config().get("insight.watch.update_candidate_points"))
    except EngineError:
        points = 1.0
    triggers.add_points(sup.root, "insight", op.trailer_id, points)


@effect("sync_push")
def _sync_push(sup: Supervisor, op: Operation) -> None:
    """After a landing, push to the upstream when sync is on: a detached ``sync push`` (its own
    lock; an unreachable upstream is ``offline`` and retried by the next push or pull)."""
    if not op.landed_commit:
        return
    try:
        cfg = sup.root.config()
        if not cfg.get("sync.enabled") or not cfg.get("sync.push_after_landing"):
            return
    except EngineError:
        return
    argv = [sys.executable, "-m", "rmtui", "--headless", "sync", "push", "--quiet", "--root", str(sup.root.path)]
    subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)
