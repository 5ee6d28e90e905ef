"""Publication (docs/architecture.md, "Admission and publication"): squash with trailer, rebase over non-semantic
moves, stale refusal for semantic races, protected dirty paths, receipts and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from compat_checker import check_root
from supervisor_kit import MEMORY, add_memory_node, commit, git, porcelain, seed, trailer_of, write

from rmtui.engine.errors import OperationFailed
from rmtui.engine.evidence.batching import batch_id
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.writes.admission import DirtyActiveRoot
from rmtui.engine.writes.publication import PIN_PREFIX
from rmtui.engine.writes.supervisor import Supervisor

WRITER = Path(__file__).with_name("supervisor_writer.py")


@pytest.fixture
def sup(root):
    seed(root)
    s = Supervisor(root)
    yield s
    s.close()


def insight_op(sup: Supervisor, name: str):
    op = sup.begin("insight", "insight")
    commit(op.worktree, {f"insight_logs/{name}.md": f"# Insight {name}\n\nNot graph: `x` → [nowhere]\n"},
           f"insight: {name}")
    return op


def test_non_semantic_move_is_rebased_and_the_operation_lands_with_trailer_receipt_and_cli(sup, cli):
    root = sup.root.path
    upd = sup.begin("update", "update")
    commit(upd.worktree, {"MEMORY.md": add_memory_node(MEMORY, "first")}, "update: add first")
    commit(upd.worktree, {"MEMORY.md": add_memory_node(add_memory_node(MEMORY, "first"), "second")},
           "update: add second")
    # meanwhile an insight log lands through its own supervised operation
    ins = insight_op(sup, "2026-01-01-000000")
    ins_receipt = sup.finish(ins)
    assert ins_receipt.phase == "committed"
    assert ins_receipt.changed_paths == ["insight_logs/2026-01-01-000000.md"]

    receipt = sup.finish(upd, summary="two facts")
    assert receipt.phase == "committed"
    head = git(root, "rev-parse", "HEAD")
    assert receipt.landed_commit == head
    # one landed commit (the writer's two squashed), on top of the insight commit, with the trailer
    assert git(root, "rev-parse", "HEAD~1") == ins_receipt.landed_commit
    assert receipt.base_commit == ins_receipt.landed_commit
    assert trailer_of(root, head) == upd.id
    assert trailer_of(root, ins_receipt.landed_commit) == ins.id
    assert git(root, "log", "-1", "--format=%s", head) == "update: add first"
    assert receipt.changed_paths == ["MEMORY.md"]
    assert (root / "insight_logs/2026-01-01-000000.md").is_file()
    assert "`second`" in (root / "MEMORY.md").read_text()
    assert porcelain(root) == ""
    # the pin and the worktree are gone once final
    assert git(root, "for-each-ref", PIN_PREFIX) == ""
    assert not Path(upd.worktree).exists()
    assert git(root, "branch", "--list", "rmtui/op/*") == ""

    r = cli("--headless", "diff", upd.id, "--root", str(root))
    assert r.code == 0, r.stderr
    assert "+- `second` A new fact. → []" in r.stdout and "insight_logs" not in r.stdout
    r = cli("--headless", "operations", "list", "--root", str(root), "--json")
    assert r.code == 0
    phases = {o["id"]: o["phase"] for o in r.json()}
    assert phases == {upd.id: "committed", ins.id: "committed"}
    r = cli("--headless", "operations", "show", upd.id, "--root", str(root), "--json")
    assert r.json()["landed_commit"] == head and r.json()["effects"][0]["state"] == "done"
    r = cli("--headless", "receipts", "list", "--root", str(root), "--json")
    assert [x["operation_id"] for x in r.json()] == [upd.id, ins.id]
    r = cli("--headless", "receipts", "show", upd.id, "--root", str(root), "--json")
    assert r.json()["changed_paths"] == ["MEMORY.md"] and r.json()["landed_commit"] == head
    assert r.json()["summary"] == "two facts"
    r = cli("--headless", "receipts", "show", upd.id, "--root", str(root))
    assert "changed: MEMORY.md" in r.stdout
    r = cli("--headless", "receipts", "show", "nope", "--root", str(root))
    assert r.code == 2 and "unknown receipt" in r.stderr


def test_no_commit_is_no_change_and_cleans_up(sup):
    op = sup.begin("update", "update")
    head = git(sup.root.path, "rev-parse", "HEAD")
    receipt = sup.finish(op, summary="nothing to learn")
    assert receipt.phase == "no_change" and receipt.landed_commit is None and receipt.changed_paths == []
    assert git(sup.root.path, "rev-parse", "HEAD") == head
    assert not Path(op.worktree).exists()


def test_protected_dirty_path_in_the_active_root_refuses_publication_until_clean(sup):
    root = sup.root.path
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
    (root / "MEMORY.md").write_text(MEMORY + "\nhand edit\n")
    (root / "scratch.txt").write_text("ignored by the allow-list, not protected\n")
    with pytest.raises(DirtyActiveRoot) as info:
        sup.finish(op)
    assert info.value.exit_code == 3 and info.value.details["paths"] == ["MEMORY.md"]
    assert (root / "MEMORY.md").read_text().endswith("hand edit\n")  # nothing of the person's lost
    assert sup.store.get(op.id).phase == "prepared"
    git(root, "checkout", "--", "MEMORY.md")
    assert sup.finish(op).phase == "committed"  # prepared work publishes without re-admission
    assert "`x`" in (root / "MEMORY.md").read_text()


def test_an_update_batch_lands_its_record_in_the_same_commit(sup):
    root = sup.root
    q = EvidenceQueue(root)
    uid = q.submit("s1", b"remember x")["uid"]
    bid = batch_id([q.get(uid)])
    q.claim([uid], bid)
    op = sup.begin("update", "update", batch_id=bid, candidate_uids=[uid], effects=("evidence_consumed",))
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "x")})
    receipt = sup.finish(op)
    assert q.get(uid).state == "consumed"
    assert receipt.landed_commit == git(root.path, "rev-parse", "HEAD") and receipt.changed_paths == ["MEMORY.md"]
    assert sorted(git(root.path, "show", "--format=", "--name-only", "HEAD").split()) == [
        "MEMORY.md", f"update_records/{bid}.json"]
    assert git(root.path, "log", "-1", "--format=%(trailers:key=RightMemory-Operation,valueonly)").strip() == bid
    assert json.loads((root.path / "update_records" / f"{bid}.json").read_text())["candidates"] == [
        q.get(uid).candidate()]
    assert porcelain(root.path) == "" and check_root(root.path) == []
    q.close()


def test_an_update_batch_without_change_lands_a_record_only_commit(sup):
    root = sup.root
    q = EvidenceQueue(root)
    uid = q.submit("s1", b"nothing new here")["uid"]
    bid = batch_id([q.get(uid)])
    q.claim([uid], bid)
    op = sup.begin("update", "update", batch_id=bid, candidate_uids=[uid], effects=("evidence_consumed",))
    receipt = sup.finish(op)
    assert receipt.phase == "no_change" and receipt.landed_commit == git(root.path, "rev-parse", "HEAD")
    assert git(root.path, "show", "--format=", "--name-only", "HEAD").split() == [f"update_records/{bid}.json"]
    assert check_root(root.path) == [] and q.get(uid).state == "consumed"
    q.close()


def test_a_batch_whose_id_does_not_match_its_candidates_is_refused(sup):
    q = EvidenceQueue(sup.root)
    uid = q.submit("s1", b"remember y")["uid"]
    q.claim([uid], "update-batch-" + "0" * 64)
    op = sup.begin("update", "update", batch_id="update-batch-" + "0" * 64, candidate_uids=[uid])
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "y")})
    with pytest.raises(OperationFailed, match="does not match its candidates"):
        sup.finish(op)
    q.close()


def _race(root: Path, ops: list[str], tmp: Path) -> list[subprocess.CompletedProcess]:
    """Finish ``ops`` in separate processes released at the same moment."""
    go = tmp / "go"
    procs = []
    for i, op_id in enumerate(ops):
        procs.append(subprocess.Popen([sys.executable, str(WRITER), str(root), "finish", op_id,
                                       "--ready", str(tmp / f"ready{i}"), "--go", str(go)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    deadline = time.monotonic() + 30
    while not all((tmp / f"ready{i}").exists() for i in range(len(ops))):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go.write_text("go")
    return [subprocess.CompletedProcess(p.args, p.wait(60), *p.communicate()) for p in procs]


def test_two_semantic_operations_racing_exactly_one_lands_the_other_is_stale(sup, tmp_path):
    root = sup.root.path
    base = git(root, "rev-parse", "HEAD")
    a = sup.begin("update", "update")
    b = sup.begin("update", "update")
    assert a.base_commit == b.base_commit == base
    commit(a.worktree, {"MEMORY.md": add_memory_node(MEMORY, "alpha")})
    commit(b.worktree, {"MEMORY.md": MEMORY.replace("Run pytest.", "Run pytest -q.")})
    results = _race(root, [a.id, b.id], tmp_path)
    codes = sorted(r.returncode for r in results)
    assert codes == [0, 3], [r.stderr for r in results]
    loser = results[[r.returncode for r in results].index(3)]
    assert b"StaleBase" in loser.stderr and b"MEMORY.md" in loser.stderr
    winner = a if results[0].returncode == 0 else b
    assert git(root, "rev-parse", "HEAD~1") == base  # one commit on the base, never two
    assert trailer_of(root, "HEAD") == winner.id
    text = (root / "MEMORY.md").read_text()
    assert ("`alpha`" in text) != ("pytest -q" in text)
    loser_op = sup.store.get(b.id if winner is a else a.id)
    assert loser_op.phase == "running" and loser_op.error.startswith("stale-base")
    assert porcelain(root) == ""


def test_two_insight_logs_racing_both_land_one_after_rebase(sup, tmp_path):
    root = sup.root.path
    base = git(root, "rev-parse", "HEAD")
    a = insight_op(sup, "2026-02-01-000000")
    b = insight_op(sup, "2026-02-01-000001")
    results = _race(root, [a.id, b.id], tmp_path)
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    assert git(root, "rev-parse", "HEAD~2") == base
    first, second = git(root, "rev-parse", "HEAD~1"), git(root, "rev-parse", "HEAD")
    trailers = {trailer_of(root, first), trailer_of(root, second)}
    assert trailers == {a.id, b.id}
    later = sup.store.receipt(trailer_of(root, second))
    assert later.base_commit == first  # rebased onto the other log
    assert sorted(p.name for p in (root / "insight_logs").iterdir()) == ["2026-02-01-000000.md", "2026-02-01-000001.md"]
    assert porcelain(root) == ""
    assert git(root, "for-each-ref", PIN_PREFIX) == ""


def test_semantic_race_through_the_cli_maintain_land_exits_3_or_wins(sup, tmp_path, cli):
    root = sup.root.path
    base = git(root, "rev-parse", "HEAD")
    r = cli("--headless", "maintain", "begin", "--root", str(root), "--json")
    wt = Path(r.json()["worktree"])
    (wt / "MEMORY.md").write_text(add_memory_node(MEMORY, "manual"))
    upd = sup.begin("update", "update")
    commit(upd.worktree, {"MEMORY.md": add_memory_node(MEMORY, "auto")})
    go = tmp_path / "go"
    writer = subprocess.Popen([sys.executable, str(WRITER), str(root), "finish", upd.id, "--go", str(go),
                               "--ready", str(tmp_path / "ready")], stderr=subprocess.PIPE)
    land = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "maintain", "land", "--root", str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    go.write_text("go")
    codes = (writer.wait(60), land.wait(60))
    assert sorted(codes) == [0, 3]
    if codes[1] == 3:
        err = land.stderr.read().decode()
        assert "nothing was landed" in err or "memory changed since the operation began" in err, err
    else:
        assert b"StaleBase" in writer.stderr.read()
    assert git(root, "rev-parse", "HEAD~1") == base
    text = (root / "MEMORY.md").read_text()
    assert ("`manual`" in text) != ("`auto`" in text)


def test_the_same_operation_finished_twice_at_once_lands_once(sup, tmp_path):
    root = sup.root.path
    base = git(root, "rev-parse", "HEAD")
    op = sup.begin("update", "update")
    commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "once")})
    results = _race(root, [op.id, op.id], tmp_path)
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    landed = {json.loads(r.stdout)["landed_commit"] for r in results}
    assert landed == {git(root, "rev-parse", "HEAD")}
    assert git(root, "rev-parse", "HEAD~1") == base
    assert sup.store.get(op.id).phase == "committed"
    assert sup.abandon(op, "too late").phase == "committed"  # a final operation stays final


def test_two_semantic_operations_racing_in_threads_exactly_one_lands(sup):
    import threading

    from rmtui.engine.writes.admission import StaleBase

    root = sup.root
    base = git(root.path, "rev-parse", "HEAD")
    ops = [sup.begin("update", "update") for _ in range(2)]
    for i, op in enumerate(ops):
        commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, f"thread{i}")})
    barrier = threading.Barrier(2)
    outcome: dict[str, object] = {}

    def run(op):
        with Supervisor(root) as own:  # one Supervisor per thread, as the TUI's workers do
            barrier.wait()
            try:
                outcome[op.id] = own.finish(op).phase
            except StaleBase as exc:
                outcome[op.id] = exc

    threads = [threading.Thread(target=run, args=(op,)) for op in ops]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    phases = sorted(v if isinstance(v, str) else "stale" for v in outcome.values())
    assert phases == ["committed", "stale"], outcome
    assert git(root.path, "rev-parse", "HEAD~1") == base and porcelain(root.path) == ""


def test_cli_diff_shows_a_running_operations_uncommitted_worktree(sup, cli):
    root = sup.root.path
    op = sup.begin("update", "update")
    write(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, "live-fact"), "MEMORY_draft.md": "A draft note.\n"})
    r = cli("--headless", "diff", op.id, "--root", str(root), "--json")
    assert r.code == 0, r.stderr
    d = r.json()
    assert d["live"] is True and d["phase"] == "running" and d["final"] is False
    assert d["landed"] is None and d["candidate"] is None
    files = {f["path"]: f for f in d["files"]}
    assert set(files) == {"MEMORY.md", "MEMORY_draft.md"}
    assert "+- `live-fact` A new fact. → []" in files["MEMORY.md"]["lines"]
    assert files["MEMORY_draft.md"]["added"] == 1 and "+A draft note." in d["diff"]
    r = cli("--headless", "diff", op.id, "--root", str(root))
    assert r.code == 0, r.stderr
    assert "+A draft note." in r.stdout and "not committed yet" in r.stderr
    assert porcelain(op.worktree) != "" and git(op.worktree, "diff", "--cached", "--name-only") == ""  # nothing staged
    sup.fail(op, "test over")
    r = cli("--headless", "diff", op.id, "--root", str(root), "--json")
    assert r.json()["live"] is False and r.json()["files"] == []
