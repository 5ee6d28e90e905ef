"""The typed results the engine answers print exactly the JSON the fronts printed when they were
dicts: the same keys, in the same order (``--json`` output is compared as text, so order counts).
Each expected dict below is the shape the older code built."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from rmtui.engine.cycles.common import Failure, error_outcome
from rmtui.engine.cycles.corrections import CorrectionRound
from rmtui.engine.cycles.historian import HistorianAnswer
from rmtui.engine.cycles.hosted import HostIdle
from rmtui.engine.cycles.insight import InsightRun, InsightStatus
from rmtui.engine.cycles.pruner import PruneRun, PruneStatus
from rmtui.engine.errors import OperationFailed
from rmtui.engine.host.assistant import (
    Begun,
    CycleTask,
    HostContext,
    NoTask,
    OpenTasks,
    TaskOutcome,
    UpdateIdle,
    UpdateTask,
)
from rmtui.engine.pursuit import PursuitCheckpoint, PursuitEdit, PursuitState
from rmtui.engine.roles.update_driver import BatchFailed, BatchLanded, DriverIdle
from rmtui.engine.sync.pull import SyncResult
from rmtui.engine.sync.queue_git import Cancelled
from rmtui.engine.views.consumer import InvitationAccepted, PullResult, ViewConnected
from rmtui.engine.views.files import Connection
from rmtui.engine.views.hub import Invited
from rmtui.engine.views.package import PackageInfo
from rmtui.engine.views.provider import BuildResult
from rmtui.engine.views.questions import QuestionAnswer
from rmtui.engine.writes.operations import Receipt


def receipt(op_id: str = "prune-20260101T000000Z-0123abcd", phase: str = "committed") -> Receipt:
    return Receipt(op_id, "prune", phase, None, [], "b" * 40, "c" * 40, ["MEMORY.md"], "done", "none", [], None, 1.0)


def same(result, expected: dict) -> None:
    """Equal as JSON text, so the key order counts too."""
    assert json.dumps(result.to_json()) == json.dumps(expected)


def failure(op_id: str | None = "prune-20260101T000000Z-0123abcd") -> Failure:
    exc = OperationFailed("the pruner removed items that must stay: keep-node")
    return Failure(exc.to_json(), exc.message, exc.exit_code, op_id, receipt(op_id or "", "failed") if op_id else None)


def test_error_outcome_is_the_failure_of_a_run_that_never_began():
    exc = OperationFailed("no model")
    same(error_outcome(exc), {"state": "failed", "error": {"error": "failed", "message": "no model"},
                              "message": "no model", "exit_code": 1})


def test_prune_run_json():
    r = receipt()
    grace = [{"id": "n", "file": "MEMORY.md", "grace": "1/2"}]
    run = PruneRun("expired", operation_id=r.operation_id, landed_commit=r.landed_commit,
                   message="prune: expired active memory", removed=["old"], revival_grace=grace, receipt=r)
    same(run, {"state": "expired", "operation_id": r.operation_id, "landed_commit": r.landed_commit,
               "message": "prune: expired active memory", "removed": ["old"], "revival_grace": grace,
               "receipt": r.to_json(), "receipt_phase": "committed"})
    assert run.exit_code == 0
    f = failure()
    failed = PruneRun("failed", operation_id=f.operation_id, message=f.message, failure=f)
    same(failed, {"state": "failed", "error": f.error, "message": f.message, "exit_code": 1,
                  "operation_id": f.operation_id, "receipt": f.receipt.to_json()})
    assert failed.exit_code == 1


def test_insight_run_json():
    same(InsightRun("idle", points=1.0, threshold=3.0), {"state": "idle", "points": 1.0, "threshold": 3.0})
    r = receipt("insight-20260101T000000Z-0123abcd")
    landed = InsightRun("artifact", points=0.0, threshold=3.0, claim="insight-watch-1", operation_id=r.operation_id,
                        landed_commit=r.landed_commit, log="insight_logs/x.md", summary="s", receipt=r)
    same(landed, {"state": "artifact", "result": "artifact", "operation_id": r.operation_id,
                  "landed_commit": r.landed_commit, "log": "insight_logs/x.md", "summary": "s",
                  "receipt": r.to_json(), "points": 0.0, "threshold": 3.0, "claim": "insight-watch-1"})
    f = failure("insight-20260101T000000Z-0123abcd")
    failed = InsightRun("failed", points=2.0, threshold=3.0, claim="insight-watch-1", operation_id=f.operation_id,
                        failure=f)
    same(failed, {**f.to_json(), "points": 2.0, "threshold": 3.0, "claim": "insight-watch-1"})
    assert failed.message == f.message and failed.exit_code == 1


def test_correction_round_json():
    op_id = "correction-20260101T000000Z-0123abcd"
    same(CorrectionRound("needs_input", "Which tool?", op_id, receipt="update-1"),
         {"status": "needs_input", "message": "Which tool?", "operation_id": op_id, "landed_commit": None,
          "receipt": "update-1"})
    r = receipt(op_id)
    same(CorrectionRound("applied", "fixed", op_id, r.landed_commit, ["MEMORY.md"], r, receipt="update-1"),
         {"status": "applied", "message": "fixed", "operation_id": op_id, "landed_commit": r.landed_commit,
          "changed_paths": ["MEMORY.md"], "correction_receipt": r.to_json(), "receipt": "update-1"})
    exc = OperationFailed("the role did not answer")
    failed_receipt = receipt(op_id, "failed")
    failed = CorrectionRound("failed", exc.message, op_id, correction_receipt=failed_receipt,
                             failure=error_outcome(exc), receipt="update-1")
    same(failed, {"state": "failed", "error": exc.to_json(), "message": exc.message, "exit_code": 1,
                  "status": "failed", "operation_id": op_id, "correction_receipt": failed_receipt.to_json(),
                  "receipt": "update-1"})
    assert failed.exit_code == 1


def test_historian_answer_and_host_idle_json():
    same(HistorianAnswer("q?", "a.", "h" * 40, 2),
         {"label": "historical", "question": "q?", "answer": "a.", "head": "h" * 40, "prune_commits": 2})
    same(HostIdle("insight", "below", {"points": 1.0, "threshold": 3.0, "due": False}),
         {"claimed": False, "state": "idle", "role": "insight", "message": "below", "points": 1.0,
          "threshold": 3.0, "due": False})


def pursuit_fields() -> dict:
    """The old ``_state`` dict, in its order."""
    return {"revision": "r" * 64, "head": "h" * 40, "base_head": "h" * 40, "cursor": 1,
            "actions": ["pursuit: create a"],
            "pending_edits": 1, "changed_files": ["PURSUITS.md"], "can_undo": True, "can_redo": False,
            "owner": "o" * 64, "owner_session": "s1", "conflicts": [], "focus": ["a"],
            "pursuits": [{"id": "a", "title": "A", "parent_id": None}], "last_description": "pursuit: create a"}


def test_pursuit_results_json():
    fields = pursuit_fields()
    same(PursuitState(**fields), fields)
    same(PursuitEdit(**fields, changed=True, selected_id="a", description="pursuit: create a"),
         {**fields, "changed": True, "selected_id": "a", "description": "pursuit: create a"})
    same(PursuitCheckpoint(**fields, state="no_change", landed_commit=None),
         {**fields, "state": "no_change", "landed_commit": None})
    same(PursuitCheckpoint(**fields, state="committed", landed_commit="c" * 40, operation_id="0" * 32,
                           changed_paths=["PURSUITS.md"], message="pursuit: create a"),
         {**fields, "state": "committed", "landed_commit": "c" * 40, "operation_id": "0" * 32,
          "changed_paths": ["PURSUITS.md"], "message": "pursuit: create a"})


def update_task() -> UpdateTask:
    return UpdateTask("assistant-20260101T000000Z-0123abcd", "update-batch-1", "running", "/wt", "b" * 40,
                      "/t/instructions.md", "/t/candidates.json", ["u1"], ["rmtui", "--headless"],
                      "2026-01-01T00:30:00Z", False, None)


def test_assistant_results_json():
    t = update_task()
    view = {"task_id": t.task_id, "batch_id": "update-batch-1", "phase": "running", "worktree": "/wt",
            "base_commit": "b" * 40, "instructions": "/t/instructions.md", "candidates": "/t/candidates.json",
            "candidate_uids": ["u1"], "complete": ["rmtui", "--headless"], "expires_at": "2026-01-01T00:30:00Z",
            "expired": False, "error": None}
    same(Begun(True, t), {"claimed": True, **view})
    same(Begun(False, t, ["not published: x"]), {"claimed": False, **view, "set_aside": ["not published: x"]})
    same(UpdateIdle(2), {"claimed": False, "state": "idle", "queued": 2})
    same(UpdateIdle(0, shared=True, lease=None, set_aside=["x"]),
         {"claimed": False, "state": "idle", "queued": 0, "lease": None, "set_aside": ["x"]})
    c = CycleTask("prune-20260101T000000Z-0123abcd", "pruner", "prune", "running", "/wt", "b" * 40, "/t/i.md",
                  "/t/context.json", {"due": True}, ["rmtui"], None, False, None)
    same(Begun(True, c), {"claimed": True, "task_id": c.task_id, "role": "pruner", "kind": "prune",
                          "phase": "running", "worktree": "/wt", "base_commit": "b" * 40, "instructions": "/t/i.md",
                          "context_file": "/t/context.json", "context": {"due": True}, "complete": ["rmtui"],
                          "expires_at": None, "expired": False, "error": None})
    recorded = {"task_id": c.task_id, "role": "pruner", "state": "checkpoint", "operation_id": c.task_id}
    assert TaskOutcome.from_json(recorded) == TaskOutcome(c.task_id, "pruner", {"state": "checkpoint",
                                                                                "operation_id": c.task_id})
    same(TaskOutcome.from_json(recorded), recorded)


def test_sync_results_json():
    same(Cancelled("a" * 32, ["update-batch-1"]), {"uid": "a" * 32, "superseded": ["update-batch-1"]})
    result = SyncResult("synced", "pulled 1 commit(s) from origin/main", ["MEMORY.md"], 0, 1, "h" * 40,
                        "origin/main", "t" * 40)
    same(result, {"status": "synced", "message": "pulled 1 commit(s) from origin/main", "files": ["MEMORY.md"],
                  "ahead": 0, "behind": 1, "head": "h" * 40, "upstream": "origin/main", "upstream_commit": "t" * 40,
                  "receipt": None, "repair": None, "state": None, "rule": None})


def test_cycle_status_json():
    prune = {"due": True, "memory_commits_since_prune": 5, "generation_commits": 5, "revival_grace_checkpoints": 2,
             "head": "h" * 40, "last_prune_commit": None, "last_prune_subject": None, "boundary": "b" * 40,
             "revival_grace": [{"id": "n", "file": "MEMORY.md", "next_checkpoint": 1, "of": 2}],
             "pursuit_referenced": ["keep"], "last_outcome": None, "failures": 0, "backoff": None}
    same(PruneStatus(**prune), prune)
    same(PruneRun("idle", status=PruneStatus(**prune)), {"state": "idle", **prune})
    insight = {"points": 2.0, "threshold": 3.0, "due": False, "active_operation_id": None,
               "active_operation_points": None, "last_success_at": None, "last_success_result": None,
               "last_success_operation_id": None, "last_run": {"state": "noop", "at": 1.0}, "failures": 0,
               "backoff": None}
    same(InsightStatus(**insight), insight)


def test_assistant_status_and_context_json():
    t = update_task()
    r = receipt(t.task_id)
    same(replace(t, receipt=r), {**t.to_json(), "receipt": r.to_json()})
    same(NoTask(), {"state": "idle"})
    c = CycleTask("insight-20260101T000000Z-0123abcd", "insight", "insight", "done", "/wt", "b" * 40, "/t/i.md",
                  "/t/context.json", {}, ["rmtui"], None, False, None)
    same(replace(c, outcome={"state": "noop"}), {**c.to_json(), "outcome": {"state": "noop"}})
    same(OpenTasks([t, c]), {"state": "busy", "tasks": [t.to_json(), c.to_json()]})
    same(OpenTasks([]), {"state": "idle", "tasks": []})
    ctx = HostContext("/r", "h" * 40, ["/r/MEMORY.md"], [], "/p.md", 0, "/i.md", {"released": ["u1"]})
    same(ctx, {"root": "/r", "memory_commit": "h" * 40, "sources": ["/r/MEMORY.md"], "imports": [],
               "pending_evidence_file": "/p.md", "pending_count": 0, "instructions": "/i.md",
               "settled": {"released": ["u1"]}})


def test_update_driver_pass_json():
    """Every shape ``UpdateDriver.run_once`` / ``retry`` answered as a dict, local and shared."""
    counts = {"inbox": 0, "queued": 2, "claimed": 0, "consumed": 1}
    same(DriverIdle(counts, held_batches=1), {"state": "idle", "evidence": counts, "held_batches": 1})
    lease = {"holder": "dev-a", "ours": False, "batch_id": "update-batch-1", "expires_at": 9.0}
    same(DriverIdle(counts, shared=True, lease=lease), {"state": "idle", "evidence": counts, "lease": lease})
    same(DriverIdle(counts, shared=True, lease=None, retried=["update-batch-1"]),
         {"state": "idle", "evidence": counts, "lease": None, "retried": ["update-batch-1"]})
    same(DriverIdle(message="no batch waits for a retry"), {"state": "idle", "message": "no batch waits for a retry"})
    assert DriverIdle(counts).exit_code == 0

    r = receipt("update-20260101T000000Z-0123abcd", "no_change")
    landed = BatchLanded("update-batch-1", 2, r)
    same(landed, {"state": "no_change", "batch_id": "update-batch-1", "attempts": 2, "receipt": r.to_json()})
    same(replace(landed, retried=["update-batch-1"]),
         {"state": "no_change", "batch_id": "update-batch-1", "attempts": 2, "receipt": r.to_json(),
          "retried": ["update-batch-1"]})
    assert landed.state == "no_change" and landed.exit_code == 0

    exc = OperationFailed("the update role wrote a forbidden path: rightmemory.toml")
    f = Failure(exc.to_json(), exc.message, exc.exit_code, r.operation_id, receipt(r.operation_id, "failed"))
    local = BatchFailed("update-batch-1", 3, "needs_manual_recovery", f, next_attempt_at=None)
    same(local, {"state": "failed", "batch_id": "update-batch-1", "attempts": 3, "batch_state": "needs_manual_recovery",
                 "next_attempt_at": None, "error": exc.to_json(), "exit_code": 1, "operation_id": r.operation_id})
    recovery = {"batch_id": "update-batch-1", "attempts": 1, "manual_recovery": False}
    shared = BatchFailed("update-batch-1", 1, "waiting_retry", f, recovery=recovery, retried=["update-batch-1"])
    same(shared, {"state": "failed", "batch_id": "update-batch-1", "error": exc.to_json(), "recovery": recovery,
                  "attempts": 1, "exit_code": 1, "batch_state": "waiting_retry", "retried": ["update-batch-1"]})
    assert local.state == shared.state == "failed" and local.exit_code == 1


def test_shared_view_connect_json():
    """``consumer.connect_git`` / ``connect_http`` and ``hub.accept`` answered these dicts."""
    conn = Connection("platform", "file", "rightmemory://mf/platform", "human", maintainer="ops",
                      accepted_from="http://hub.test",
                      target={"kind": "http-file", "view_id": "platform", "base_url": "http://hub.test",
                              "credential_id": "http-platform", "accepted_from_url": "http://hub.test"})
    landed = {"operation_id": "shared-views-20260101T000000Z-0123abcd", "phase": "committed",
              "landed_commit": "c" * 40}
    pulled = PullResult("platform", "pulled", None, "d" * 64, 3, True)
    assert json.dumps(pulled.to_json()) == json.dumps(
        {"view_id": "platform", "status": "pulled", "reason": None, "version": "d" * 64, "items": 3, "changed": True})
    same(ViewConnected(conn, landed, pulled), {"connection": conn.to_json(), "landed": landed,
                                               "pull": pulled.to_json()})
    same(ViewConnected(conn, landed), {"connection": conn.to_json(), "landed": landed})
    stale = PullResult("platform", "stale", "HTTP 503 from the provider")
    same(InvitationAccepted(conn, landed, stale, connection_id="conn-1"),
         {"connection": conn.to_json(), "landed": landed, "connection_id": "conn-1", "pull": stale.to_json()})
    same(InvitationAccepted(conn, landed, connection_id=None),
         {"connection": conn.to_json(), "landed": landed, "connection_id": None})


def test_shared_view_invite_json():
    """``hub.invite`` answered the build, then the hub's publish and invitation answers."""
    info = PackageInfo("platform", "Platform", "How we deploy", 3, ["dist/MEMORY.md"], "d" * 64, ["w1"])
    build = BuildResult("platform", Path("/tmp/builds/platform"), info, ["w0"])
    hub = {"view_id": "platform", "version_id": "v1", "package_hash": "d" * 64}
    invitation = {"invitation_id": "inv-1", "invitation_url": "http://hub.test/i/tok"}
    same(Invited(build, hub, invitation), {"build": build.to_json(), "hub": hub, "invitation": invitation})
    assert json.dumps(build.to_json()) == json.dumps(
        {"view_id": "platform", "package": "/tmp/builds/platform", "title": "Platform", "description": "How we deploy",
         "items": 3, "files": ["dist/MEMORY.md"], "version": "d" * 64, "warnings": ["w0", "w1"]})


def test_question_answer_json():
    """``questions.answer`` (served over HTTP) and ``consumer.ask`` answered these dicts."""
    same(QuestionAnswer("ask-platform", "answered", answer="Helm 3.14.  \n"),
         {"view_id": "ask-platform", "status": "answered",
          "text": "Shared question: ask-platform\nStatus: answered\nAnswer:\nHelm 3.14.\n", "answer": "Helm 3.14.  \n"})
    same(QuestionAnswer("ask-platform", "unavailable", reason="the question is empty"),
         {"view_id": "ask-platform", "status": "unavailable",
          "text": "Shared question: ask-platform\nStatus: unavailable\nReason: the question is empty\n",
          "reason": "the question is empty"})
    same(QuestionAnswer("ask-platform", "unavailable"),
         {"view_id": "ask-platform", "status": "unavailable",
          "text": "Shared question: ask-platform\nStatus: unavailable\nReason: unknown\n"})
