"""Recovery (docs/architecture.md, "Operations and receipts"): every unfinished operation taken
to a final phase by its record alone, and what dead writers left cleared — Git lock files in
the root and on an operation's refs and worktree, an interrupted work-tree sync, finished
operations' worktrees, branches and pins, scratch files, and a killed sync's staging worktree.

Nothing here guesses about a live process: a lock file is cleared only when the rmtui lock
that fences its writer is held by us (``memory.lock`` or the operation's lock), and a root Git
lock no rmtui process can own is named, never touched.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import git

from rmtui.engine.errors import ConflictError
from rmtui.engine.locks import file_lock, try_lock
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes import worktrees
from rmtui.engine.writes.admission import AdmissionRefused, BranchMoved, StaleBase
from rmtui.engine.writes.operations import Operation, OperationStore, Receipt, owner_alive, pid_alive
from rmtui.engine.writes.publication import MARKER, PIN_PREFIX, Publisher, pin_ref

#: Root-level Git lock files a publisher takes (the branch's own lock is added by name).
ROOT_GIT_LOCKS = ("index.lock", "HEAD.lock", "packed-refs.lock")


class Supervisor(Protocol):
    """What recovery drives: the supervisor's lifecycle (``writes/supervisor.py``), named here
    so that recovery does not import the module that calls it."""

    root: MemoryRoot
    repo: git.Repo
    store: OperationStore
    publisher: Publisher
    repaired: list[str]

    def exclusive(self, op_id: str | None = None) -> AbstractContextManager[None]: ...
    def publish(self, op: Operation) -> Receipt: ...
    def fail(self, op: Operation, error: str) -> Receipt: ...
    def abandon(self, op: Operation, reason: str) -> Receipt: ...
    def write_receipt(self, op: Operation) -> Receipt: ...
    def run_effects(self, op: Operation) -> Operation: ...


def recover(sup: Supervisor) -> dict:
    """Finish or abandon every unfinished operation by its record; clean leftovers.

    A running operation whose owner died is abandoned (its evidence released); a
    prepared one is published without re-running its writer (failed if it went stale);
    a final one with pending effects gets them retried. First, what a holder of
    ``memory.lock`` or a lander that died left is repaired: Git lock files, an unfinished
    work-tree sync (``repaired``).
    """
    done: dict[str, list[str]] = {"repaired": [], "published": [], "abandoned": [], "failed": [], "effects": [],
                                  "cleaned": [], "kept": [], "errors": []}
    sup.repaired = []
    with sup.exclusive():
        done["repaired"] += clear_dead_landings(sup)
    for op in sup.store.list(unfinished=True):
        try:
            if op.phase == "running":
                if owner_alive(op.lease):
                    continue
                sup.abandon(op, "owner process died before the candidate was prepared")
                done["abandoned"].append(op.id)
            elif op.phase == "prepared" and op.external_finalizer:
                continue  # landed through the shared queue by its driver, never here
            elif op.phase == "prepared":
                if op.lease and op.lease.get("until") is None and op.lease.get("pid") != os.getpid() \
                        and owner_alive(op.lease):
                    continue  # its owner is alive and will publish it
                try:
                    sup.publish(op)
                    done["published"].append(op.id)
                except (StaleBase, AdmissionRefused) as exc:
                    sup.fail(sup.store.get(op.id), f"recovery could not publish: {exc}")
                    done["failed"].append(op.id)
            else:
                with sup.exclusive(op.id):
                    if sup.store.find_receipt(op.id) is None:
                        sup.write_receipt(op)
                    sup.run_effects(op)
                done["effects"].append(op.id)
        except Exception as exc:  # noqa: BLE001 - one stuck operation must not stop the others' recovery
            done["errors"].append(f"{op.id}: {exc}")
    # first what a killed sync left: a half-written worktree entry fails every `git worktree`
    # command, the listing the leftovers' cleanup starts with among them
    try:
        done["cleaned"] = dead_syncs(sup.root, sup.publisher.git_dir)
    except Exception as exc:  # noqa: BLE001 - one step failing must not stop the rest of recovery
        done["errors"].append(f"cleaning what a killed sync left: {exc}")
    try:
        with sup.exclusive():
            done["cleaned"] += _clean_leftovers(sup, done["kept"])
            done["errors"] += _foreign_locks(sup)
            ref, head = sup.publisher.current_branch(), sup.publisher.head_or_none()
            if ref and head and not any(BranchMoved.rule in e for e in done["errors"]):
                try:  # a branch moved behind the root's back blocks every landing: say so
                    sup.publisher.check_in_step(ref, head)
                except BranchMoved as exc:
                    done["errors"].append(exc.message)
    except Exception as exc:  # noqa: BLE001 - one step failing must not stop the rest of recovery
        done["errors"].append(f"cleaning leftovers: {exc}")
    done["repaired"] = [*sup.repaired, *done["repaired"]]
    return done


def dead_syncs(root: MemoryRoot, git_dir: Path) -> list[str]:
    """What a killed sync left (:func:`worktrees.prune_dead_sync`), pruned only while no sync
    runs: its lock is free (a live sync prunes for itself when it starts)."""
    git_worktrees = git_dir / "worktrees"
    names = [p.name for p in (*worktrees.existing(root), *(git_worktrees.iterdir() if git_worktrees.is_dir() else ()))]
    if not any(n.startswith("sync-") for n in names):
        return []  # nothing a sync made (and no lock file made for a root that never syncs)
    try:
        with file_lock(worktrees.sync_lock_path(root), timeout=0):
            return worktrees.prune_dead_sync(root)
    except ConflictError:
        return []


def repair(pub: Publisher) -> list[str]:
    """After a holder of ``memory.lock`` died inside its section: clear the Git locks it left
    in the root (and on its operation's refs), finish a work-tree sync its CAS started."""
    path = pub.marker
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    done = [f"cleared {p}" for p in clear_locks(root_lock_files(pub, data.get("branch")))]
    if data.get("op"):
        done += [f"cleared {p}" for p in clear_locks(op_lock_files(pub.git_dir, str(data["op"]), None, admin=False))]
    old, new = data.get("from"), data.get("to")
    if old and new and pub.head_or_none() == new:
        skipped = pub.sync(old, new, force=True)
        done.append(f"finished the work-tree sync to {new[:10]} of an interrupted publication")
        done += [f"left {p}: not a file" for p in skipped]
    path.unlink(missing_ok=True)
    return done


def clear_dead_landings(sup: Supervisor) -> list[str]:
    """Landing markers whose lander is dead (the op lock is free): clear its worktree's Git locks."""
    done: list[str] = []
    folder = sup.root.runtime / "oplocks"
    for marker in sorted(folder.glob("*.landing")) if folder.is_dir() else ():
        op_id = marker.name[: -len(".landing")]
        fd = try_lock(folder / f"{op_id}.lock")
        if fd is None:
            continue  # a lander is at work
        try:
            op = sup.store.find(op_id)
            done += [f"cleared {p}" for p in clear_locks(
                op_lock_files(sup.publisher.git_dir, op_id, op.worktree if op else None))]
            marker.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return done


def root_lock_files(pub: Publisher, branch: str | None = None) -> list[Path]:
    names = [*ROOT_GIT_LOCKS]
    for ref in {branch, pub.current_branch()} - {None}:
        names.append(f"{ref}.lock")
    return [pub.git_dir / n for n in names]


def _admin_dir(git_dir: Path, worktree: str | Path | None, name: str) -> Path | None:
    """The ``.git/worktrees/<x>`` folder of a worktree (by its ``gitdir``, else by name)."""
    base = git_dir / "worktrees"
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


def op_lock_files(git_dir: Path, op_id: str, worktree: str | Path | None, *, admin: bool = True) -> list[Path]:
    """Git lock files on an operation's own refs (branch, pin) and, with ``admin``, its worktree."""
    files = [git_dir / f"refs/heads/{worktrees.BRANCH_PREFIX}{op_id}.lock", git_dir / f"{pin_ref(op_id)}.lock"]
    d = _admin_dir(git_dir, worktree, op_id) if admin else None
    if d is not None:
        files += [d / "index.lock", d / "HEAD.lock"]
        locked = d / "locked"  # `worktree add` killed before it finished leaves it "initializing"
        try:
            if "initializing" in locked.read_text():
                files.append(locked)
        except OSError:
            pass
    return files


def clear_locks(files: list[Path]) -> list[str]:
    cleared = []
    for f in files:
        try:
            f.unlink()
        except FileNotFoundError:
            continue
        cleared.append(str(f))
    return cleared


def _clear_finished_op_locks(sup: Supervisor, known: set[str], live: set[str], ours: set[str]) -> list[str]:
    """Git lock files on refs and worktrees of our operations that are no longer live."""
    gd = sup.publisher.git_dir
    files: list[Path] = []
    for lock in (gd / "refs/heads" / worktrees.BRANCH_PREFIX).glob("*.lock"):
        if lock.name[: -len(".lock")] not in live:
            files.append(lock)
    finished_pins = {pin_ref(i).removeprefix(PIN_PREFIX) for i in known - live}
    for lock in (gd / PIN_PREFIX).glob("*.lock"):
        if lock.name[: -len(".lock")] in finished_pins:
            files.append(lock)
    wdir = worktrees.worktrees_dir(sup.root)
    for admin in (gd / "worktrees").iterdir() if (gd / "worktrees").is_dir() else ():
        try:
            where = Path((admin / "gitdir").read_text().strip()).parent
        except OSError:
            where = wdir / admin.name  # `worktree add` died before writing it
        if where.parent == wdir and where.name in (known | ours) and where.name not in live:
            files += [f for f in op_lock_files(gd, where.name, where) if f.parent == admin]
    return clear_locks(files)


def _foreign_locks(sup: Supervisor) -> list[str]:
    """Root Git locks still there although no rmtui publisher holds ``memory.lock`` (this
    process does): a git command someone runs in the root, or one that died. Named, not
    touched — only a person knows whether that command still runs."""
    return [f"{p}: a Git lock no rmtui process holds; if no git command runs in {sup.root.path}, delete it"
            for p in root_lock_files(sup.publisher) if p.exists()]


def _clean_leftovers(sup: Supervisor, kept: list[str]) -> list[str]:
    """Remove worktrees, branches and pins of our own operations that are finished (a removed
    worktree's files outside memory go to ``.runtime/kept/``, said in ``kept``).

    Leftovers are listed before the records are read: ``begin`` saves its record before
    it creates anything, so whatever of ours exists now has a record. ``.runtime/worktrees/``
    is shared with the original tool (its guidance, queue and sync worktrees): a folder
    that is neither an operation of ours on record nor checked out on our branch
    namespace is not ours and is never touched.
    """
    root = sup.root
    paths = worktrees.existing(root)
    branches = worktrees.op_branches(root)
    pins = sup.repo.git.for_each_ref("--format=%(refname)", PIN_PREFIX).split()
    records = sup.store.list()
    known = {o.id for o in records}
    live = {o.id for o in records if not o.final}
    ours = known | worktrees.on_our_branch(root)
    cleaned = _clear_finished_op_locks(sup, known, live, ours)
    for path in paths:
        if path.name in ours and path.name not in live:
            moved = worktrees.remove(root, path, worktrees.BRANCH_PREFIX + path.name)
            cleaned.append(str(path))
            if moved is not None:
                kept.append(moved.message(f"the worktree {path}"))
    gone = {p.name for p in paths}
    for branch in branches:
        name = branch[len(worktrees.BRANCH_PREFIX):]
        if name not in live and name not in gone:  # our branch namespace
            clear_locks(op_lock_files(sup.publisher.git_dir, name, None))
            worktrees.remove(root, None, branch)
            cleaned.append(branch)
    finished_pins = {pin_ref(i) for i in known - live}  # only pins of our own finished records
    for ref in pins:
        if ref in finished_pins:
            sup.repo.git.update_ref("-d", ref)
            cleaned.append(ref)
    oplocks = root.runtime / "oplocks"
    for lock in oplocks.glob("*.lock") if oplocks.is_dir() else ():
        if lock.stem not in live:
            lock.unlink(missing_ok=True)
    for scratch in root.runtime.glob("*.index*"):  # scratch indexes of dead builders
        owner = scratch.name.split(".index")[0]
        kind, _, ident = owner.partition("-")
        dead = (kind == "record" and ident not in live) or (kind == "merge" and ident.isdigit()
                                                           and not pid_alive(int(ident)))
        if dead:
            scratch.unlink(missing_ok=True)
    for tmp in [*root.runtime.glob(f"{MARKER}.*.tmp"), *root.runtime.glob("sync-*.tmp")]:
        pid = tmp.name.removesuffix(".tmp").rsplit(".", 1)[-1].removeprefix("sync-")
        if pid.isdigit() and not pid_alive(int(pid)):  # half-written by a writer that died
            tmp.unlink(missing_ok=True)
    return cleaned
