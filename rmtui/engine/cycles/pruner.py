"""The Pruner cycle: expire stale active memory in generations (docs/formats.md,
"Maintenance cycles"; docs/architecture.md, "Sync, shared views, cycles").

Due after ``pruner.generation_commits`` commits touching ``MEMORY.md``/``MEMORY_*.md`` since
the newest commit whose subject starts ``prune:`` (with none, after that many such commits;
the boundary is then the Memory commit that many back). A run opens a supervisor operation
of kind ``prune``; the ``pruner`` role removes expired items in its worktree; the program
checks what was removed against what must stay (ids Pursuit references, items in revival
grace) and composes the commit itself: ``prune: expired active memory`` with the ledger
(``Removed:``, ``Revival grace:`` with ``grace K/N``), or the empty ``prune: checkpoint``.
The supervisor admits (Memory graph paths only) and lands it as one commit.

Revival grace: an item a ledger once listed as removed that is back in Memory has proven its
worth; it survives ``pruner.revival_grace_checkpoints`` (N) due checkpoints. Its K is one more
than the highest ``grace K/N`` recorded for it since its latest removal; when that K reached N
the grace is over and the item may be pruned again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmtui.engine.cycles import common
from rmtui.engine.cycles.ledger import PRUNE_PREFIX, Ledger, compose_message, parse_ledger, reasons_from
from rmtui.engine.errors import ConflictError, EngineError, OperationFailed
from rmtui.engine.memory.roots import MemoryRoot

if TYPE_CHECKING:
    from rmtui.engine.writes.operations import Receipt

ROLE = "pruner"
KIND = "prune"
NAME = "prune"
MEMORY_PATHSPEC = (":(top,glob)MEMORY.md", ":(top,glob)MEMORY_*.md")


@dataclass
class PruneCommit:
    commit: str
    date: str
    subject: str
    ledger: Ledger

    def to_json(self) -> dict:
        return {"commit": self.commit, "date": self.date, "subject": self.subject, **self.ledger.to_json()}


@dataclass(frozen=True)
class PruneStatus:
    """Whether a prune is due and why (what ``prune status`` shows): the Memory commits since
    the last ``prune:`` commit against a generation, the boundary the candidates are compared
    at, the items in revival grace (``id``, ``file``, ``next_checkpoint``, ``of``), the ids
    Pursuit references, and the cycle's last recorded outcome, failures and backoff."""

    due: bool
    memory_commits_since_prune: int
    generation_commits: int
    revival_grace_checkpoints: int
    head: str
    last_prune_commit: str | None
    last_prune_subject: str | None
    boundary: str | None
    revival_grace: list[dict[str, Any]]
    pursuit_referenced: list[str]
    last_outcome: dict[str, Any] | None
    failures: int
    backoff: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PruneRun:
    """One Pruner run: ``idle`` (not due; ``status`` is :func:`prune_status`), ``expired`` or
    ``checkpoint`` (landed as ``landed_commit``), or ``failed``: the ``failure``, or a landing
    the supervisor did not commit (``receipt`` says why)."""

    state: str
    status: PruneStatus | None = None
    operation_id: str | None = None
    landed_commit: str | None = None
    message: str = ""
    removed: list[str] = field(default_factory=list)
    #: each item kept in revival grace: ``id``, ``file``, ``grace`` ("K/N")
    revival_grace: list[dict[str, str]] = field(default_factory=list)
    receipt: Receipt | None = None
    failure: common.Failure | None = None

    @property
    def exit_code(self) -> int:
        if self.failure is not None:
            return self.failure.exit_code
        return 1 if self.state == "failed" else 0

    def to_json(self) -> dict[str, Any]:
        if self.failure is not None:
            return self.failure.to_json()
        if self.state == "idle":
            return {"state": "idle", **(self.status.to_json() if self.status else {})}
        return {"state": self.state, "operation_id": self.operation_id, "landed_commit": self.landed_commit,
                "message": self.message, "removed": self.removed, "revival_grace": self.revival_grace,
                "receipt": self.receipt.to_json() if self.receipt else None,
                "receipt_phase": self.receipt.phase if self.receipt else None}


def _repo(path: Path | str):
    import git

    return git.Repo(path)


def prune_history(repo: Any, rev: str = "HEAD", limit: int | None = None) -> list[PruneCommit]:
    """Every commit reachable from ``rev`` whose subject starts ``prune:``, newest first."""
    args = ["--format=%H%x00%cI%x00%B%x1e", f"--grep=^{PRUNE_PREFIX}"]
    if limit:
        args.append(f"--max-count={limit * 4}")  # --grep also matches body lines; filtered below
    out = repo.git.log(*args, rev)
    found: list[PruneCommit] = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        commit, date, message = record.split("\x00", 2)
        subject = message.split("\n", 1)[0].strip()
        if subject.startswith(PRUNE_PREFIX):
            found.append(PruneCommit(commit.strip(), date, subject, parse_ledger(message)))
            if limit and len(found) >= limit:
                break
    return found


def last_prune_commit(repo: Any, rev: str = "HEAD") -> str | None:
    history = prune_history(repo, rev, limit=1)
    return history[0].commit if history else None


def memory_commits(repo: Any, since: str | None, rev: str = "HEAD") -> list[str]:
    """Commits touching the Memory graph files after ``since`` (all of them without), newest first."""
    args = [rev] + ([f"^{since}"] if since else []) + ["--", *MEMORY_PATHSPEC]
    return repo.git.rev_list(*args).split()


def memory_ids(graph: Any) -> dict[str, str]:
    """Addressable Memory items: id -> the file that holds it, in source order."""
    return {i.id: i.file for i in graph.ordered if i.id and i.domain == "memory"}


def pursuit_references(graph: Any) -> set[str]:
    """Memory ids some Pursuit item has an edge to (the Pruner keeps them)."""
    mem = memory_ids(graph)
    return {e.target for i in graph.ordered if i.domain == "pursuit" for e in i.edges if e.target in mem}


def grace_plan(history: list[PruneCommit], present: dict[str, str], n: int) -> dict[str, tuple[int, int]]:
    """Items present now that a ledger removed and that are still in revival grace:
    id -> (K this checkpoint, N)."""
    plan: dict[str, tuple[int, int]] = {}
    for ident in present:
        removal = next((i for i, pc in enumerate(history) if ident in pc.ledger.removed_ids()), None)
        if removal is None:
            continue
        newer = history[:removal]
        k_prev = max((g[0] for pc in newer if (g := pc.ledger.grace_of(ident))), default=0)
        if k_prev < n:
            plan[ident] = (k_prev + 1, n)
    return plan


def prune_status(root: MemoryRoot) -> PruneStatus:
    """``due``, the Memory commits since the last ``prune:`` commit, the boundary, and the
    cycle's last outcome (what ``prune status`` shows)."""
    from rmtui.engine.memory.graph import load_graph

    cfg = root.config()
    generation = int(cfg.get("pruner.generation_commits"))
    grace_n = int(cfg.get("pruner.revival_grace_checkpoints"))
    repo = _repo(root.path)
    try:
        head = repo.git.rev_parse("HEAD")
        history = prune_history(repo, head)
        last = history[0] if history else None
        commits = memory_commits(repo, last.commit if last else None, head)
        if last is not None:
            boundary: str | None = last.commit
        else:
            boundary = commits[generation - 1] if len(commits) >= generation else None
    finally:
        repo.close()
    graph = load_graph(root.path)
    present = memory_ids(graph)
    grace = grace_plan(history, present, grace_n)
    state = common.load_state(root, NAME)
    return PruneStatus(
        due=len(commits) >= generation, memory_commits_since_prune=len(commits), generation_commits=generation,
        revival_grace_checkpoints=grace_n, head=head, last_prune_commit=last.commit if last else None,
        last_prune_subject=last.subject if last else None, boundary=boundary,
        revival_grace=[{"id": i, "file": present[i], "next_checkpoint": k, "of": n} for i, (k, n) in grace.items()],
        pursuit_referenced=sorted(pursuit_references(graph)), last_outcome=state.get("last_outcome"),
        failures=state.get("failures", 0), backoff=common.backing_off(root, NAME))


def unchanged_since(worktree: Path | str, boundary: str | None) -> list[str]:
    """Memory ids whose block is the same at ``boundary`` as in ``worktree`` now, in source order:
    the prune candidates (what changed during the generation is in use and stays)."""
    import tempfile

    from rmtui.engine.memory.graph import load_graph

    if not boundary:
        return []
    now = {i.id: i.hash for i in load_graph(Path(worktree)).ordered if i.id and i.domain == "memory"}
    repo = _repo(worktree)
    try:
        names = [n for n in repo.git.ls_tree("--name-only", boundary).splitlines()
                 if n.endswith(".md") and n.startswith(("MEMORY", "PURSUIT"))]
        with tempfile.TemporaryDirectory() as tmp:
            for name in names:
                (Path(tmp) / name).write_bytes(repo.git.show(f"{boundary}:{name}", stdout_as_string=False))
            then = {i.id: i.hash for i in load_graph(Path(tmp)).ordered if i.id and i.domain == "memory"}
    finally:
        repo.close()
    return [i for i, h in now.items() if then.get(i) == h]


def prune_prompt(worktree: str, status: PruneStatus, keep_pursuit: set[str],
                 grace: dict[str, tuple[int, int]], candidates: list[str] | None = None) -> str:
    since = (f"the last prune commit {status.last_prune_commit[:12]}" if status.last_prune_commit
             else "the start of history")
    parts = [
        f"Prune run: {status.memory_commits_since_prune} Memory-changing commit(s) since {since} "
        f"(a generation is {status.generation_commits}).",
        f"Your isolated worktree is {worktree}; every tool path is relative to it.",
        "Remove the expired items from the Memory graph files (MEMORY.md, MEMORY_*.md) and drop every edge that "
        "pointed to them; validate_memory; then git_add and git_commit once. In the commit body put one line per "
        "removed item, `- <id>: <reason>`. The program writes the prune ledger (Removed, Revival grace) into the "
        "landed commit from what you actually removed. If nothing should go, change nothing: the program then "
        "records an empty `prune: checkpoint`.",
    ]
    if candidates is not None:
        protected = keep_pursuit | set(grace)
        open_ids = [i for i in candidates if i not in protected]
        parts.append("Prune candidates (unchanged since the generation boundary "
                     f"{(status.boundary or '')[:12]}; everything else changed and stays):\n" +
                     ("\n".join(f"- `{i}`" for i in open_ids) if open_ids else "- none: keep everything"))
    if keep_pursuit:
        parts.append("Keep these items: Pursuit references them.\n" +
                     "\n".join(f"- `{i}`" for i in sorted(keep_pursuit)))
    if grace:
        parts.append("Keep these items: they were pruned before and re-added since, so they are in revival grace "
                     "(this checkpoint counts as K of N).\n" +
                     "\n".join(f"- `{i}`: grace {k}/{n}" for i, (k, n) in grace.items()))
    parts.append("Earlier prune ledgers: git_log with grep \"prune:\". End with the report your instructions describe.")
    return "\n\n".join(parts)


def run_prune(root: MemoryRoot, *, force: bool = False, executor: Any = None) -> PruneRun:
    """One Pruner run if due (or ``force``)."""
    with common.cycle_lock(root, NAME):
        common.refuse_if_hosted(root, KIND)
        status = prune_status(root)
        if not status.due and not force:
            return PruneRun("idle", status=status)
        try:
            out = _run(root, status, executor)
        except ConflictError:
            raise  # busy (a host holds the task, a lock timed out): not a failure of the cycle
        except EngineError as exc:
            common.record_outcome(root, NAME, common.error_outcome(exc).to_json(), failed=True)
            raise
        common.record_outcome(root, NAME, out.to_json(), failed=out.state == "failed")
        return out


@dataclass
class PrunePlan:
    """What a run must respect, read at the operation's base: the Memory items before it
    (id -> file), the ids Pursuit references and the items in revival grace (id -> (K, N)).
    The model path and a host's task (where it is saved with the task) share it."""

    before: dict[str, str]
    keep_pursuit: set[str]
    grace: dict[str, tuple[int, int]]

    @property
    def protected(self) -> set[str]:
        return self.keep_pursuit | set(self.grace)

    def removed(self, worktree: Path | str) -> list[str]:
        from rmtui.engine.memory.graph import load_graph

        after = memory_ids(load_graph(Path(worktree)))
        return [i for i in self.before if i not in after]

    def protected_removed(self, worktree: Path | str) -> list[str]:
        return [i for i in self.removed(worktree) if i in self.protected]

    def to_json(self) -> dict[str, Any]:
        return {"before": self.before, "keep_pursuit": sorted(self.keep_pursuit),
                "grace": {i: list(kn) for i, kn in self.grace.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PrunePlan:
        return cls(dict(data["before"]), set(data["keep_pursuit"]),
                   {i: (int(kn[0]), int(kn[1])) for i, kn in data["grace"].items()})


def plan_prune(root: MemoryRoot, op: Any) -> PrunePlan:
    """The plan of a freshly begun prune operation, from its worktree (still at the base)."""
    from rmtui.engine.memory.graph import load_graph

    wt = Path(op.worktree)
    graph = load_graph(wt)
    before = memory_ids(graph)
    repo = _repo(wt)
    try:
        history = prune_history(repo, op.base_commit)
    finally:
        repo.close()
    grace = grace_plan(history, before, int(root.config().get("pruner.revival_grace_checkpoints")))
    return PrunePlan(before, pursuit_references(graph), grace)


def begin_prune(root: MemoryRoot, sup: Any, *, lease: dict[str, Any] | None = None) -> tuple[Any, PrunePlan]:
    """Open the prune operation and read its plan (a defect fails the operation at once)."""
    return common.begin_planned(sup, KIND, ROLE, lambda op: plan_prune(root, op), lease=lease)


def land_prune(sup: Any, op: Any, plan: PrunePlan, summary: str) -> PruneRun:
    """Compose the ``prune:`` commit from what was actually removed and let the supervisor
    admit and land it. Refuses (nothing lands, the operation stays open) the removal of an
    item that must stay."""
    wt = Path(op.worktree)
    hit = plan.protected_removed(wt)
    if hit:
        raise OperationFailed(f"the pruner removed items that must stay: {', '.join(hit)}",
                              details={"kept_ids": hit})
    removed = plan.removed(wt)
    repo = _repo(wt)
    try:
        bodies = repo.git.log("--format=%B", f"{op.base_commit}..HEAD")
        changed = repo.git.rev_parse("HEAD^{tree}") != repo.git.rev_parse(f"{op.base_commit}^{{tree}}")
    finally:
        repo.close()
    reasons = {**reasons_from(summary), **reasons_from(bodies)}
    removed_entries = [(plan.before[i], i, reasons.get(i, "expired")) for i in removed]
    grace_entries = [(plan.before[i], i, k, n) for i, (k, n) in plan.grace.items()]
    message = compose_message(removed_entries, grace_entries, changed=changed)
    receipt = sup.finish(op, summary=summary, message=message, allow_empty=True)
    state = "expired" if receipt.changed_paths else "checkpoint"
    if receipt.landed_commit is None:
        state = "failed"
    return PruneRun(state, operation_id=op.id, landed_commit=receipt.landed_commit,
                    message=message.split("\n", 1)[0], removed=removed,
                    revival_grace=[{"id": i, "file": plan.before[i], "grace": f"{k}/{n}"}
                                   for i, (k, n) in plan.grace.items()],
                    receipt=receipt)


def _run(root: MemoryRoot, status: PruneStatus, executor: Any) -> PruneRun:
    from rmtui.engine.writes.supervisor import Supervisor

    cfg = root.config()
    if executor is None:
        from rmtui.engine.roles.executors import make_executor

        executor = make_executor(cfg, ROLE)
    with Supervisor(root) as sup:
        op, plan = begin_prune(root, sup)
        try:
            summary = _converse(root, op, executor, cfg, status, plan)
            return land_prune(sup, op, plan, summary)
        except Exception as exc:  # noqa: BLE001 - a refusal or a defect must not leave the operation running
            failure = common.failed_outcome(sup, op, exc)
            return PruneRun("failed", operation_id=op.id, message=failure.message, failure=failure)


def _converse(root: MemoryRoot, op: Any, executor: Any, cfg: Any, status: PruneStatus, plan: PrunePlan) -> str:
    """The model's part: remove expired items, with one request to restore a kept one."""
    wt = Path(op.worktree)
    with common.RoleSession(root, executor, ROLE, wt, cfg=cfg, operation=op.id) as session:
        candidates = unchanged_since(wt, status.boundary)
        session.send(prune_prompt(str(wt), status, plan.keep_pursuit, plan.grace, candidates))
        session.remind_uncommitted()
        hit = plan.protected_removed(wt)
        if hit:  # one bounded correction: the program never lands the removal of a kept item
            session.send("These items must stay (Pursuit references them, or they are in revival grace), but your "
                         f"work removed them: {', '.join(hit)}. Restore them exactly, validate_memory, and commit "
                         "again (git_add, git_commit); then give your final report.")
            session.remind_uncommitted()
        return session.last


# -- the daemon's due check --------------------------------------------------------------------

def prune_cycle(root: MemoryRoot) -> dict[str, Any]:
    """The daemon's Pruner check: run when due, unless backing off after failures."""
    return common.daemon_cycle(
        root, NAME, lambda r: prune_status(r).due, run_prune, ("landed_commit", "removed", "message"))
