"""The supervisor: nothing reaches the active root except through here (DESIGN.md 4-5).

``begin`` records an operation and gives its writer an isolated worktree at the current
head; ``finish`` admits the writer's commits, records ``prepared``, and publishes under
``memory.lock`` with a compare-and-swap of the branch ref and a fast-forward of the work
tree. Landed work is one commit carrying ``RightMemory-Operation: <id>``. ``recover`` takes
every unfinished operation to a final phase by its record alone.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import git
from gitdb.base import IStream

from rmtui.engine import worktrees
from rmtui.engine.admission import (
    AdmissionRefused,
    DirtyActiveRoot,
    StaleBase,
    changed_paths,
    check_clean,
    check_commits,
    check_tree,
    dirty_paths,
    is_semantic,
)
from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.locks import file_lock
from rmtui.engine.operations import (
    Effect,
    Operation,
    OperationStore,
    Receipt,
    new_operation_id,
    owner_alive,
    process_identity,
)
from rmtui.engine.roots import MemoryRoot

TRAILER = "RightMemory-Operation"
PIN_PREFIX = "refs/rightmemory/operations/"
IDENTITY = {
    "GIT_AUTHOR_NAME": "rmtui", "GIT_AUTHOR_EMAIL": "rmtui@localhost",
    "GIT_COMMITTER_NAME": "rmtui", "GIT_COMMITTER_EMAIL": "rmtui@localhost",
}


def crashpoint(name: str) -> None:
    """Fault injection for recovery tests: die here, as a kill -9 would, when asked to."""
    if os.environ.get("RMTUI_CRASHPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def pin_ref(op_id: str) -> str:
    return PIN_PREFIX + hashlib.sha256(op_id.encode()).hexdigest()


EffectFn = Callable[["Supervisor", Operation], None]
#: Post-commit effects by name; each is retried until done (also by ``recover``).
EFFECTS: dict[str, EffectFn] = {}
#: Effects every operation gets after it reaches a final phase, by phase.
DEFAULT_EFFECTS = {"committed": ("cleanup",), "no_change": ("cleanup",), "failed": ("release_evidence", "cleanup"),
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

    def _tree(self, commit: str) -> str:
        return self.repo.git.rev_parse(f"{commit}^{{tree}}")

    # -- lifecycle ---------------------------------------------------------
    def begin(self, kind: str, role: str, *, batch_id: str | None = None, candidate_uids: list[str] | None = None,
              lease: dict | None = None, allow_rebase: bool = True, effects: tuple[str, ...] = ()) -> Operation:
        """Record ``running`` and create the writer's worktree at the current head."""
        op_id = new_operation_id(kind)
        with file_lock(self.root.lock_path):
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

    def finish(self, op: Operation, *, summary: str = "", message: str | None = None) -> Receipt:
        """Admit the worktree's commits, record ``prepared``, publish; returns the receipt."""
        op = self.store.get(op.id)
        if op.final:
            return self.store.receipt(op.id)
        if op.phase == "running":
            self.prepare(op, summary=summary, message=message)
        return self.publish(op)

    def _op_lock(self, op_id: str):
        """Serialises the phase changes of one operation (prepare, fail, abandon) across processes.

        Without it a slow second ``prepare`` could overwrite a record another process had
        already published, or an ``abandon`` could release evidence of a landing operation.
        """
        return file_lock(self.root.runtime / "oplocks" / f"{op_id}.lock")

    def prepare(self, op: Operation, *, summary: str = "", message: str | None = None) -> Operation:
        """Admission steps 1-3; a refusal is recorded on the (still running) operation."""
        with self._op_lock(op.id):
            op = self.store.get(op.id)
            if op.phase != "running":
                return op  # another process prepared (or ended) it meanwhile
            return self._prepare(op, summary=summary, message=message)

    def _prepare(self, op: Operation, *, summary: str, message: str | None) -> Operation:
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
            if active != base and self.repo.is_ancestor(active, candidate):
                base = active  # the writer already brought its work onto the current head
            result = check_commits(self.repo, base, candidate, op.role)
            check_tree(wt_path, op.role, result.dropped_refs)
        except AdmissionRefused as exc:
            op.error = str(exc)
            self.store.save(op)
            raise
        op.base_commit = base
        op.summary = summary or op.summary
        op.changed_paths = result.changed_paths
        if self._tree(candidate) == self._tree(base):
            op.candidate_commit = None
        else:
            msg = message or self._message(result.commits) or f"{op.kind}: {op.role} operation"
            op.candidate_commit = self._commit_tree(self._tree(candidate), base, msg, op.id)
            self.repo.git.update_ref(pin_ref(op.id), op.candidate_commit)
        op.phase = "prepared"
        op.error = None
        self.store.save(op)
        crashpoint("after-prepared")
        return op

    def _message(self, commits: list[str]) -> str:
        subjects = [self.repo.commit(c).message.strip() for c in commits]
        subjects = [s for s in subjects if s]
        if not subjects:
            return ""
        return subjects[0] if len(subjects) == 1 else subjects[0].splitlines()[0] + "\n\n" + "\n".join(
            "- " + s.splitlines()[0] for s in subjects[1:])

    def _commit_tree(self, tree: str, parent: str, message: str, op_id: str) -> str:
        body = message.rstrip() + f"\n\n{TRAILER}: {op_id}\n"
        return self.repo.git.commit_tree(tree, "-p", parent, "-m", body, env=IDENTITY).strip()

    def publish(self, op: Operation) -> Receipt:
        """Under the lock: fence the semantic base, CAS the ref, fast-forward the work tree."""
        with file_lock(self.root.lock_path):
            op = self.store.get(op.id)
            if op.final:
                return self.store.receipt(op.id)
            if op.phase != "prepared":
                raise UsageError(f"operation {op.id} is {op.phase}, not prepared")
            head = self.head()
            cand = op.candidate_commit
            if cand is None:
                return self._final(op, "no_change")
            if head == cand or self.repo.is_ancestor(cand, head):
                op.landed_commit = cand  # published before a crash; only the record was missing
                return self._final(op, "committed")
            if head == op.base_commit and self._index_tree() == self._tree(cand):
                self._cas(head, cand)  # crashed between the work-tree sync and the CAS: finish it
                op.landed_commit = cand
                return self._final(op, "committed")
            if head != op.base_commit:
                cand = self._rebase(op, head)
            self._check_active_clean(op)
            self._advance(head, cand, crashpoints=True)
            op.landed_commit = cand
            return self._final(op, "committed")

    def _index_tree(self) -> str | None:
        try:
            return self.repo.git.write_tree()
        except git.GitCommandError:
            return None  # unmerged entries: certainly not our synced candidate

    def _advance(self, head: str, new: str, *, crashpoints: bool = False) -> None:
        """Fast-forward the active index and work tree from ``head`` to ``new``, then CAS the ref."""
        self.repo.git.update_index("-q", "--refresh", with_exceptions=False)
        self.repo.git.read_tree("-m", "-u", head, new)
        if crashpoints:
            crashpoint("after-worktree-sync")
        try:
            self._cas(head, new)
        except ConflictError:
            try:  # someone moved the branch outside the lock: put the work tree back
                self.repo.git.read_tree("-m", "-u", new, head)
            except git.GitCommandError:
                pass
            raise
        if crashpoints:
            crashpoint("after-publish")

    def _cas(self, expected: str, new: str) -> None:
        try:
            self.repo.git.update_ref("-m", "rmtui publish", self.branch_ref(), new, expected)
        except git.GitCommandError as exc:
            raise ConflictError(f"branch moved during publication: {exc.stderr.strip()}") from None

    def _check_active_clean(self, op: Operation) -> None:
        protected = [p for p in dirty_paths(self.repo) if is_semantic(p) or p in op.changed_paths or p.startswith("update_records/")]
        if protected:
            raise DirtyActiveRoot(
                f"the active root has uncommitted changes to protected paths: {', '.join(protected[:5])}",
                details={"paths": protected})

    def _rebase(self, op: Operation, head: str) -> str:
        """Head moved: rebase onto it if only non-semantic paths changed, else refuse as stale."""
        moved = changed_paths(self.repo, op.base_commit, head)
        semantic = [p for p in moved if is_semantic(p)]
        if semantic or not op.allow_rebase:
            why = f"semantic paths changed since {op.base_commit[:10]}: {', '.join(semantic[:5])}" if semantic else \
                f"the active head moved from the captured {op.base_commit[:10]} to {head[:10]}"
            self._to_running(op, f"{StaleBase.rule}: {why}")
            raise StaleBase(f"memory changed since the operation began ({why})",
                            details={"operation": op.id, "paths": semantic, "head": head})
        tree = self._merge_trees(op.base_commit, head, op.candidate_commit)
        if tree is None:
            self._to_running(op, f"{StaleBase.rule}: rebase onto {head[:10]} conflicts")
            raise StaleBase(f"rebase of {op.id} onto {head[:10]} conflicts",
                            details={"operation": op.id, "head": head})
        msg = self.repo.commit(op.candidate_commit).message.split(f"\n\n{TRAILER}:")[0]
        new = self._commit_tree(tree, head, msg, op.id)
        if Path(op.worktree).is_dir():
            wt = git.Repo(op.worktree)
            try:  # the candidate is fixed since prepare: later scribbles in the worktree do not count
                wt.git.checkout("--quiet", "--force", "--detach", new)
            finally:
                wt.close()
        else:
            self.repo.git.worktree("prune")
            self.repo.git.worktree("add", "--quiet", "--detach", op.worktree, new)
        try:
            check_tree(Path(op.worktree), op.role)  # re-validate the rebased tree
        except AdmissionRefused as exc:
            self._to_running(op, str(exc))
            raise
        op.base_commit = head
        op.candidate_commit = new
        op.changed_paths = changed_paths(self.repo, head, new)
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
        with self._op_lock(op.id), file_lock(self.root.lock_path):
            op = self.store.get(op.id)
            if op.final:
                return self.store.receipt(op.id)
            return self._final(op, phase, error)

    # -- recovery ----------------------------------------------------------
    def recover(self) -> dict:
        """Finish or abandon every unfinished operation by its record; clean leftovers.

        A running operation whose owner died is abandoned (its evidence released); a
        prepared one is published without re-running its writer (failed if it went stale);
        a final one with pending effects gets them retried.
        """
        done: dict[str, list[str]] = {"published": [], "abandoned": [], "failed": [], "effects": [], "cleaned": [],
                                      "errors": []}
        for op in self.store.list(unfinished=True):
            try:
                if op.phase == "running":
                    if owner_alive(op.lease):
                        continue
                    self.abandon(op, "owner process died before the candidate was prepared")
                    done["abandoned"].append(op.id)
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
                    if self.store.find_receipt(op.id) is None:
                        self._receipt(op)
                    self.run_effects(op)
                    done["effects"].append(op.id)
            except Exception as exc:  # one stuck operation must not stop the others' recovery
                done["errors"].append(f"{op.id}: {exc}")
        done["cleaned"] = self._clean_leftovers()
        return done

    def _clean_leftovers(self) -> list[str]:
        """Remove worktrees, branches and pins no unfinished operation owns.

        Leftovers are listed before the records are read: ``begin`` saves its record before
        it creates anything, so whatever exists now either has a live record or is orphaned.
        """
        paths = worktrees.existing(self.root)
        branches = worktrees.op_branches(self.root)
        pins = self.repo.git.for_each_ref("--format=%(refname)", PIN_PREFIX).split()
        live = {o.id for o in self.store.list() if not o.final}
        cleaned: list[str] = []
        for path in paths:
            if path.name not in live:
                worktrees.remove(self.root, path, worktrees.BRANCH_PREFIX + path.name)
                cleaned.append(str(path))
        gone = {p.name for p in paths}
        for branch in branches:
            name = branch[len(worktrees.BRANCH_PREFIX):]
            if name not in live and name not in gone:
                worktrees.remove(self.root, None, branch)
                cleaned.append(branch)
        live_pins = {pin_ref(i) for i in live}
        for ref in pins:
            if ref not in live_pins:
                self.repo.git.update_ref("-d", ref)
                cleaned.append(ref)
        oplocks = self.root.runtime / "oplocks"
        for lock in oplocks.glob("*.lock") if oplocks.is_dir() else ():
            if lock.stem not in live:
                lock.unlink(missing_ok=True)
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
    from rmtui.engine.queue import EvidenceQueue

    with EvidenceQueue(sup.root) as q:
        q.release(op.candidate_uids, op.batch_id)


@effect("evidence_consumed")
def _evidence_consumed(sup: Supervisor, op: Operation) -> None:
    if not op.candidate_uids:
        return
    from rmtui.engine.queue import EvidenceQueue

    with EvidenceQueue(sup.root) as q:
        q.consume(op.candidate_uids, op.batch_id)


@effect("update_record")
def _update_record(sup: Supervisor, op: Operation) -> None:
    """Commit the immutable provenance record ``update_records/<op>.json`` (program path)."""
    rel = f"update_records/{op.id}.json"
    record = {
        "operation_id": op.id, "batch_id": op.batch_id, "candidate_uids": op.candidate_uids,
        "base_commit": op.base_commit, "landed_commit": op.landed_commit, "changed_paths": op.changed_paths,
        "summary": op.summary, "phase": op.phase,
    }
    data = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
    with file_lock(sup.root.lock_path):
        head = sup.head()
        try:
            existing = sup.repo.git.show(f"{head}:{rel}")
        except git.GitCommandError:
            existing = None
        if existing is not None:
            return  # already landed before a crash
        blob = sup.repo.odb.store(IStream("blob", len(data), io.BytesIO(data))).hexsha.decode()
        with sup._scratch_index(f"record-{op.id}") as env:  # HEAD plus the record; the root's index untouched
            sup.repo.git.read_tree(head, env=env)
            sup.repo.git.update_index("--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
            tree = sup.repo.git.write_tree(env=env).strip()
        commit = sup._commit_tree(tree, head, f"update: record {op.id}", op.id)
        sup._advance(head, commit)

