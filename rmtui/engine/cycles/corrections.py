"""Corrections of a landing (docs/formats.md, "Corrections"): a person sends a landed Update back.

``correct_landing(root, receipt, comment)`` finds the receipt of a landed Update (role
``update`` or ``update-correction``), opens a supervisor operation of kind ``correction`` at
the *current* head and runs the ``update-correction`` role there with the original commit
(message and diff), its evidence, the person's comment and the earlier rounds. The role may
fix Memory (and Pursuit references) and record the lesson in ``corrections.md``; admission
checks it like any Update. It must end with exactly
``{"status": "applied"|"no_change"|"needs_input", "message": …}``:

- ``applied``: its commits land (one commit, ``RightMemory-Operation: <correction op>``);
- ``no_change``: nothing lands;
- ``needs_input``: a question back to the person; the operation is abandoned (nothing lands)
  and the question waits on the receipt until the person answers with another comment.

The status actually stored follows what landed (``applied`` only with a landed change). The
result is stored on the original receipt (``Receipt.correction``) with the history of rounds.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rmtui.engine.cycles import common
from rmtui.engine.errors import ConflictError, EngineError, OperationFailed, UsageError
from rmtui.engine.memory.roots import MemoryRoot

if TYPE_CHECKING:
    from rmtui.engine.writes.operations import Receipt

ROLE = "update-correction"
KIND = "correction"
NAME = "correction"
STATUSES = ("applied", "no_change", "needs_input")
CORRECTABLE_ROLES = ("update", "update-correction")
MAX_COMMENT_CHARS = 8000
MAX_DIFF_CHARS = 40000
RESULT_SHAPE = '{"status": "applied" | "no_change" | "needs_input", "message": "…"}'


@dataclass(frozen=True)
class CorrectionRound:
    """One correction round's result: ``status`` (``applied``, ``no_change``, ``needs_input``,
    or ``failed`` with the ``failure``), the role's ``message`` (the error's when failed), the
    correcting operation and what it landed, and ``receipt``: the corrected landing's operation
    id (set once the round is recorded on it)."""

    status: str
    message: str
    operation_id: str
    landed_commit: str | None = None
    changed_paths: list[str] = field(default_factory=list)
    #: the correcting operation's own receipt (None for ``needs_input``: it was abandoned)
    correction_receipt: Receipt | None = None
    receipt: str | None = None
    failure: common.Failure | None = None

    @property
    def exit_code(self) -> int:
        return self.failure.exit_code if self.failure is not None else 0

    def to_json(self) -> dict[str, Any]:
        own = self.correction_receipt.to_json() if self.correction_receipt else None
        if self.failure is not None:
            out = {**self.failure.to_json(), "status": "failed", "operation_id": self.operation_id,
                   "correction_receipt": own}
        elif self.status == "needs_input":
            out = {"status": self.status, "message": self.message, "operation_id": self.operation_id,
                   "landed_commit": None}
        else:
            out = {"status": self.status, "message": self.message, "operation_id": self.operation_id,
                   "landed_commit": self.landed_commit, "changed_paths": self.changed_paths,
                   "correction_receipt": own}
        if self.receipt is not None:
            out["receipt"] = self.receipt
        return out


def find_receipt(store: Any, ref: str) -> Any:
    """A receipt by any form of its operation id or its batch id (``OperationStore.resolve_receipt``)."""
    return store.receipt(store.resolve_receipt(ref))


def _is_text(value: str) -> bool:
    """Valid Unicode (a JSON ``\\ud800`` escape is not: it could be neither stored nor shown)."""
    from rmtui.engine.evidence.queue import check_text

    try:
        check_text(value, "message")
    except UsageError:
        return False
    return True


def parse_result(text: str) -> dict[str, str] | None:
    """The role's result object: the last JSON object in its answer with exactly the two keys."""
    candidates = [text.strip()] + [m.group(0) for m in re.finditer(r"\{[^{}]*\}", text, re.DOTALL)][::-1]
    fence = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidates = fence[::-1] + candidates
    for raw in candidates:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # a host's text: nested too deep is no result either
            continue
        if (isinstance(data, dict) and set(data) == {"status", "message"} and data["status"] in STATUSES
                and isinstance(data["message"], str) and _is_text(data["message"])):
            return {"status": data["status"], "message": data["message"].strip()}
    return None


def landing_text(shown: str, commit: str) -> str:
    """The landed commit as the role reads it: whole, or cut with the way to read the rest using
    a tool the role has (``git_diff`` over the commit's own range, one path at a time)."""
    if len(shown) <= MAX_DIFF_CHARS:
        return shown
    return (shown[:MAX_DIFF_CHARS] + f"\n[cut at {MAX_DIFF_CHARS} of {len(shown)} characters; the stat above lists "
            f"every changed path: read the rest of one with `git_diff` and rev `{commit}^..{commit}` and its path]")


def correction_prompt(worktree: str, receipt: Any, original: str, evidence: list[tuple[str, str]],
                      comment: str, history: list[dict]) -> str:
    parts = [
        f"Correction of a landed Update: operation {receipt.operation_id}"
        + (f" (batch {receipt.batch_id})" if receipt.batch_id else "")
        + f", landed as {str(receipt.landed_commit)[:12]}, changed {', '.join(receipt.changed_paths)}.",
        f"Your isolated worktree is {worktree}, at the current head (later changes included); every tool path "
        "is relative to it. Rework the landing there: fix what the person's comment shows to be wrong, record "
        "the correction in corrections.md only with a real Memory fix, validate_memory, then git_add and "
        "git_commit once. Commit nothing if nothing should change, or if you need the person's answer first.",
        "The landed commit:\n<landing>\n" + original + "\n</landing>",
    ]
    for uid, text in evidence:
        parts.append(f"<candidate uid=\"{uid}\">\n{text.rstrip()}\n</candidate>")
    for past in history:
        parts.append(f"Earlier round: the person wrote \"{past.get('comment')}\"; the result was "
                     f"{past.get('status')}: {past.get('message')}")
    parts.append(f"The person's comment now:\n<comment>\n{comment.strip()}\n</comment>")
    parts.append("End your final answer with exactly one JSON object and nothing after it: " + RESULT_SHAPE +
                 ". applied: you committed the fix; no_change: the landing stands (say why); needs_input: ask the "
                 "person one question (commit nothing).")
    return "\n\n".join(parts)


@dataclass
class Round:
    """One correction round's input: the landed receipt, its commit (message and diff), its
    evidence, the person's comment and the earlier rounds. The model path and a host's task
    read the same."""

    receipt: Any
    comment: str
    original: str
    evidence: list[tuple[str, str]]
    history: list[dict]

    def prompt(self, worktree: str) -> str:
        return correction_prompt(worktree, self.receipt, self.original, self.evidence, self.comment, self.history)


def load_round(root: MemoryRoot, receipt_ref: str, comment: str) -> Round:
    """Check the comment and that the receipt is a landed Update, and read what the role gets."""
    import git

    from rmtui.engine.evidence.queue import EvidenceQueue
    from rmtui.engine.writes.operations import OperationStore

    comment = (comment or "").strip()
    if not comment:
        raise UsageError("the comment must not be blank")
    if len(comment) > MAX_COMMENT_CHARS or "\x00" in comment:
        raise UsageError(f"the comment must be text of at most {MAX_COMMENT_CHARS} characters")
    with OperationStore(root) as store:
        receipt = find_receipt(store, receipt_ref)
        op = store.find(receipt.operation_id)
    if op is None or op.role not in CORRECTABLE_ROLES:
        raise UsageError(f"{receipt.operation_id} is not an Update; only a landed Update can be corrected")
    if receipt.phase != "committed" or not receipt.landed_commit or not receipt.changed_paths:
        raise UsageError(f"{receipt.operation_id} is {receipt.phase} and changed no memory; only a landed "
                         "Update can be corrected")
    repo = git.Repo(root.path)
    try:
        original = repo.git.show("--no-color", "--stat", "--patch", receipt.landed_commit)
    except git.GitCommandError as exc:
        raise ConflictError(f"the landed commit {receipt.landed_commit[:12]} is not in this root") from exc
    finally:
        repo.close()
    original = landing_text(original, receipt.landed_commit)
    evidence: list[tuple[str, str]] = []
    with EvidenceQueue(root) as q:
        for uid in receipt.candidate_uids:
            try:
                evidence.append((uid, q.get(uid).text))
            except UsageError:
                continue
    history = list(((receipt.correction or {}).get("history")) or [])
    return Round(receipt, comment, original, evidence, history)


def correct_landing(root: MemoryRoot, receipt_ref: str, comment: str, *, executor: Any = None) -> CorrectionRound:
    """Run one correction round (``status`` ``failed`` when the round itself failed)."""
    rnd = load_round(root, receipt_ref, comment)
    with common.cycle_lock(root, NAME):
        common.refuse_if_hosted(root, KIND)
        out = _round(root, rnd, executor)  # raises only before its operation began
        return record_round(root, rnd.receipt.operation_id, rnd.comment, out)


def record_round(root: MemoryRoot, receipt_id: str, comment: str, out: CorrectionRound) -> CorrectionRound:
    """Store the round's result on the original receipt and as the cycle's outcome."""
    _store(root, receipt_id, comment, out)
    out = replace(out, receipt=receipt_id)
    common.record_outcome(root, NAME, out.to_json(), failed=out.status == "failed")
    return out


def begin_round(sup: Any, *, lease: dict[str, Any] | None = None) -> Any:
    """Open the correction operation at the current head."""
    return common.begin_operation(sup, KIND, ROLE, lease=lease)


def finish_round(sup: Any, op: Any, result: dict[str, str], summary: str) -> CorrectionRound:
    """Apply the role's result: ``needs_input`` abandons the operation (nothing lands);
    otherwise the supervisor admits and lands its commits. The status stored follows what
    landed (``applied`` only with a landed change)."""
    if result["status"] == "needs_input":
        sup.abandon(sup.store.get(op.id), "the correction needs the person's input")
        return CorrectionRound("needs_input", result["message"], op.id)
    landing = sup.finish(op, summary=summary)
    landed = bool(landing.landed_commit and landing.changed_paths)
    status, message = result["status"], result["message"]
    if status == "applied" and not landed:
        status, message = "no_change", f"{message} (nothing changed: the role committed no fix)"
    elif status == "no_change" and landed:
        status, message = "applied", f"{message} (the role's commit landed)"
    return CorrectionRound(status, message, op.id, landing.landed_commit, landing.changed_paths, landing)


def _round(root: MemoryRoot, rnd: Round, executor: Any) -> CorrectionRound:
    from rmtui.engine.writes.supervisor import Supervisor

    cfg = root.config()
    if executor is None:
        from rmtui.engine.roles.executors import make_executor

        executor = make_executor(cfg, ROLE)
    with Supervisor(root) as sup:
        op = begin_round(sup)
        try:
            result, summary = _converse(root, op, executor, cfg, rnd)
            return finish_round(sup, op, result, summary)
        except EngineError as exc:
            failed = sup.fail(sup.store.get(op.id), f"{exc.kind}: {exc.message}")
            return CorrectionRound("failed", exc.message, op.id, correction_receipt=failed,
                                   failure=common.error_outcome(exc))


def _converse(root: MemoryRoot, op: Any, executor: Any, cfg: Any, rnd: Round) -> tuple[dict[str, str], str]:
    with common.RoleSession(root, executor, ROLE, op.worktree, cfg=cfg, operation=op.id,
                            correcting=rnd.receipt.operation_id) as session:
        text = session.send(rnd.prompt(op.worktree))
        result = parse_result(text)
        if (result is None or result["status"] != "needs_input") and session.dirty():
            text = session.remind_uncommitted()
            result = parse_result(text) or result
        if result is None:  # one bounded reminder of the result's shape
            text = session.send("End with exactly one JSON object and nothing after it: " + RESULT_SHAPE)
            result = parse_result(text)
    if result is None:
        raise OperationFailed("the update-correction role did not answer with " + RESULT_SHAPE,
                              details={"answer": text[-500:]})
    return result, text


def _store(root: MemoryRoot, operation_id: str, comment: str, out: CorrectionRound) -> None:
    """The round's result on the original receipt (the last one, with every round so far)."""
    from rmtui.engine.writes.operations import OperationStore

    entry = {"status": out.status, "message": out.message, "comment": comment,
             "operation_id": out.operation_id, "landed_commit": out.landed_commit, "at": time.time()}
    with OperationStore(root) as store:
        receipt = store.receipt(operation_id)
        history = list(((receipt.correction or {}).get("history")) or []) + [entry]
        receipt.correction = {**entry, "history": history}
        store.save_receipt(receipt)
