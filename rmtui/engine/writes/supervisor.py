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

This module keeps the lifecycle (begin, prepare, publish, finish, fail, abandon and the
final phase); the Git plumbing is in ``publication``, recovery and lock clearing in
``recovery``, post-commit effects in ``effects``, fault injection in ``faults``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import git

from rmtui.engine.errors import EngineError, OperationFailed, UsageError
from rmtui.engine.errors.storage import StorageError
from rmtui.engine.evidence import records
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.role_table import RECORDS, matches
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes import recovery, worktrees
from rmtui.engine.writes.admission import (
    AdmissionRefused,
    BranchMoved,
    DirtyActiveRoot,
    FileLimits,
    StaleBase,
    changed_paths,
    check_clean,
    check_commits,
    check_tree_object,
    dirty_paths,
    is_semantic,
)
from rmtui.engine.writes.effects import DEFAULT_EFFECTS, EFFECTS
from rmtui.engine.writes.faults import crashpoint
from rmtui.engine.writes.operations import (
    Effect,
    Operation,
    OperationStore,
    Receipt,
    new_operation_id,
    process_identity,
)
from rmtui.engine.writes.publication import TRAILER, Publisher, pin_ref, section


class Supervisor:
    def __init__(self, root: MemoryRoot) -> None:
        self.root = root
        self.repo = git.Repo(root.path)
        self.store = OperationStore(root)
        self.publisher = Publisher(root, self.repo)
        #: What the sections under ``memory.lock`` found and repaired after a dead holder.
        self.repaired: list[str] = []

    def close(self) -> None:
        self.store.close()
        self.repo.close()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def head(self) -> str:
        return self.publisher.head()

    @contextmanager
    def exclusive(self, op_id: str | None = None) -> Iterator[None]:
        """Hold ``memory.lock`` exclusively; the outermost section repairs what a dead holder
        left (see the module doc) and leaves its own marker until it ends."""
        with file_lock(self.root.lock_path):
            state = section(self.root.lock_path)
            outer = state["depth"] == 0
            if outer:
                self.repaired.extend(recovery.repair(self.publisher))
                state["pending"] = False
                self.publisher.write_marker(op=op_id)
            state["depth"] += 1
            try:
                yield
            finally:
                state["depth"] -= 1
                if outer and not state["pending"]:
                    self.publisher.marker.unlink(missing_ok=True)

    def begin(self, kind: str, role: str, *, batch_id: str | None = None, candidate_uids: list[str] | None = None,
              lease: dict | None = None, allow_rebase: bool = True, effects: tuple[str, ...] = (),
              op_id: str | None = None) -> Operation:
        """Record ``running`` and create the writer's worktree at the current head (``op_id``: a
        writer whose operation id the original fixes, e.g. the Pursuit editor's 32 hex)."""
        op_id = op_id or new_operation_id(kind)
        with self.exclusive():
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
        except Exception as exc:  # whatever stopped it, the operation is closed, then the error goes on
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
        with self.exclusive(op.id):
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
            if active != base and self.publisher.is_ancestor(active, candidate):
                base = self._rebased_base(base, candidate)
            result = check_commits(self.repo, base, candidate, op.role, limits=FileLimits.of(self.root.config()))
            tree = self.publisher.tree(candidate)
            if op.records_batch:  # the update record lands in the same commit (record-only if no change)
                tree = self._with_update_record(tree, op)
            # exactly the tree that will be published, from Git objects (not the writer's files)
            check_tree_object(self.repo, tree, op.role, changed=result.changed_paths, dropped_refs=result.dropped_refs,
                              base=base)
        except (AdmissionRefused, BranchMoved) as exc:
            op.error = str(exc)
            self.store.save(op)
            raise
        op.base_commit = base
        op.summary = summary or op.summary
        op.changed_paths = result.changed_paths
        if tree == self.publisher.tree(base) and not (allow_empty and message):
            op.candidate_commit = None
        else:
            msg = message or self.publisher.combined_message(result.commits) or (
                f"{op.kind}: {op.role} operation" if op.changed_paths else f"update: record {op.trailer_id}")
            op.candidate_commit = self.publisher.commit_tree(tree, base, msg, op.trailer_id, kind=op.kind)
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
        with self.exclusive():
            active = self.head()
            if active == base or not self.publisher.is_ancestor(active, candidate):
                return base
            if not self.publisher.is_ancestor(base, active):
                return base  # not a newer head of ours: admission checks base..candidate as it is
            self.publisher.check_in_step(self.publisher.current_branch() or "HEAD", active)
            return active

    def _with_update_record(self, tree: str, op: Operation) -> str:
        """``tree`` plus ``update_records/<batch id>.json`` (docs/formats.md, "Update records"),
        built in a scratch index."""
        from rmtui.engine.evidence.queue import EvidenceQueue

        with EvidenceQueue(self.root) as q:
            candidates = [q.get(uid).candidate() for uid in op.candidate_uids]
        rel, data = records.update_record(candidates)
        if rel != f"{records.RECORDS_DIR}/{op.batch_id}.json":
            raise OperationFailed(f"batch {op.batch_id} does not match its candidates (they give {rel})")
        return self.publisher.tree_with_file(tree, rel, data, f"record-{op.id}")

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
        with self.exclusive(op.id):
            op = self.store.get(op.id)
            if op.final:
                return self.store.receipt(op.id)
            if op.phase != "prepared":
                raise UsageError(f"operation {op.id} is {op.phase}, not prepared")
            ref = self.publisher.branch_ref()  # a detached HEAD is refused before anything moves
            crashpoint("after-lock")
            head = self.head()
            cand = op.candidate_commit
            staged = self.publisher.staged(head)
            if (cand is not None and head == op.base_commit and staged
                    and self.publisher.index_tree() == self.publisher.tree(cand)):
                # an older rmtui synced the work tree before its CAS and died in between: finish it
                self.publisher.cas(ref, head, cand)
                op.landed_commit = cand
                return self._final(op, self._landed_phase(op))
            self.publisher.check_in_step(ref, head, staged)  # never build on a branch moved behind the root's back
            if cand is None:
                return self._final(op, "no_change")
            if head == cand or self.publisher.is_ancestor(cand, head):
                op.landed_commit = cand  # published before a crash; only the record was missing
                return self._final(op, self._landed_phase(op))
            if head != op.base_commit:
                cand = self._rebase(op, head)
            self._check_active_clean(op)
            left = self.publisher.advance(ref, head, cand, op.id)
            if left:
                self.repaired.append(f"kept changes made in the root meanwhile to: {', '.join(left)}")
            crashpoint("after-publish")
            op.landed_commit = cand
            return self._final(op, self._landed_phase(op))

    @staticmethod
    def _landed_phase(op: Operation) -> str:
        """A landed record-only commit (an Update batch that changed no memory) is ``no_change``."""
        return "committed" if op.changed_paths else "no_change"

    def _check_active_clean(self, op: Operation) -> None:
        protected = [p for p in dirty_paths(self.repo)
                     if is_semantic(p) or p in op.changed_paths or p.startswith("update_records/")]
        if protected:
            raise DirtyActiveRoot(
                f"the active root has uncommitted changes to protected paths: {', '.join(protected[:5])}",
                details={"paths": protected})

    def _rebase(self, op: Operation, head: str) -> str:
        """Head moved: rebase onto it if only non-semantic paths changed, else refuse as stale."""
        if not self.publisher.is_ancestor(op.base_commit, head):
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
        tree = self.publisher.merge_trees(op.base_commit, head, cand_before)
        if tree is None:
            self._to_running(op, f"{StaleBase.rule}: rebase onto {head[:10]} conflicts")
            raise StaleBase(f"rebase of {op.id} onto {head[:10]} conflicts",
                            details={"operation": op.id, "head": head})
        msg = self.publisher.message_of(cand_before).split(f"\n\n{TRAILER}:")[0]
        try:  # re-validate the rebased tree, from Git objects like every candidate
            check_tree_object(self.repo, tree, op.role, changed=changed_paths(self.repo, head, tree), base=head)
        except AdmissionRefused as exc:
            self._to_running(op, str(exc))
            raise
        new = self.publisher.commit_tree(tree, head, msg, op.trailer_id, kind=op.kind)
        op.base_commit = head
        op.candidate_commit = new
        op.changed_paths = [p for p in changed_paths(self.repo, head, new) if not matches(p, RECORDS)]
        self.repo.git.update_ref(pin_ref(op.id), new)
        self.store.save(op)
        return new

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
        receipt = None
        try:
            self.store.save(op)
            receipt = self.write_receipt(op)
            crashpoint("after-final")
            warned = len(op.warnings)
            self.run_effects(op)
            # an effect's warning (a kept stray file, a failed push) is in the stored receipt
            return self.store.receipt(op.id) if len(op.warnings) != warned else receipt
        except StorageError as exc:
            if not op.landed_commit:
                raise  # nothing was published: the record as it stood is the truth, the disk the error
            # Published: the branch holds the commit. Say so, and which bookkeeping the disk refused;
            # recovery (or completing again) finishes it from the records once there is space.
            step = "recording the landing" if receipt is None else "its post-commit effects"
            pending = [e.name for e in op.effects if e.state != "done"]
            cause = exc.details.get("cause") or exc.message
            op.warnings.append(f"published as {op.landed_commit[:12]}, but {step} failed: {cause}; "
                               f"`rmtui --headless recover` finishes it ({', '.join(pending) or 'the record'})"
                               " once there is space")
            return self._receipt_of(op, receipt.created_at if receipt is not None else None)

    def _receipt_of(self, op: Operation, created_at: float | None = None) -> Receipt:
        return Receipt(operation_id=op.id, kind=op.kind, phase=op.phase, batch_id=op.batch_id,
                       candidate_uids=op.candidate_uids, base_commit=op.base_commit, landed_commit=op.landed_commit,
                       changed_paths=op.changed_paths if op.landed_commit else [], summary=op.summary,
                       sync="local", warnings=list(op.warnings), error=op.error,
                       created_at=time.time() if created_at is None else created_at)

    def write_receipt(self, op: Operation) -> Receipt:
        return self.store.save_receipt(self._receipt_of(op))

    def run_effects(self, op: Operation) -> Operation:
        warned = len(op.warnings)
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
            except Exception as exc:  # noqa: BLE001 - an effect failing must not undo publication
                eff.state, eff.error = "failed", str(exc)
                op.warnings.append(f"effect {eff.name} failed: {exc}")
            else:
                eff.state, eff.error = "done", None
            self.store.save(op)
        if any(e.state != "done" for e in op.effects) or len(op.warnings) != warned:
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
        with self._op_lock(op.id), self.exclusive(op.id):
            op = self.store.get(op.id)
            if op.final:
                return self.store.receipt(op.id)
            return self._final(op, phase, error)


    def recover(self) -> dict:
        """Finish or abandon every unfinished operation by its record (see :func:`recovery.recover`)."""
        return recovery.recover(self)

    def diff(self, op_id: str) -> str:
        op = self.store.get(op_id)
        target = op.landed_commit or op.candidate_commit
        if target is None:
            return ""
        return self.repo.git.diff(op.base_commit, target)
