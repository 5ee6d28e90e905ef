"""One way to name a thing: every command that takes an evidence, operation or receipt
reference accepts the forms the fronts print (whole id, unique prefix, the workbench's short
form, display id) and refuses an ambiguous one by listing its matches."""

from __future__ import annotations

import itertools

from rmtui.engine.evidence.queue import EvidenceQueue, candidate_uid


def _prefix_twins(session: str) -> tuple[str, str]:
    """Two request ids whose uids share their first six hex digits."""
    seen: dict[str, str] = {}
    for n in itertools.count():
        uid = candidate_uid(session, f"r{n}")
        if uid[:6] in seen:
            return seen[uid[:6]], f"r{n}"
        seen[uid[:6]] = f"r{n}"
    raise AssertionError("unreachable")


def test_evidence_commands_take_the_short_forms_and_refuse_ambiguous_ones(root, cli):
    rp = str(root.path)
    cli("--headless", "config", "set", "update.approval", '"required"', "--root", rp)
    first, second = _prefix_twins("s1")
    for request, text in ((first, "first fact\n"), (second, "second fact\n"), ("plain", "third fact\n")):
        r = cli("--headless", "submit", "--root", rp, "--session", "s1", "--request", request, input=text)
        assert r.code == 0, r.stderr
    a, b, c = (candidate_uid("s1", r) for r in (first, second, "plain"))

    # the eight characters the workbench shows, and the display id `evidence list` prints
    shown = cli("--headless", "evidence", "show", c[:8], "--root", rp, "--json")
    assert shown.code == 0, shown.stderr
    assert shown.json()["uid"] == c
    by_display = cli("--headless", "evidence", "show", "2", "--root", rp, "--json")
    assert by_display.code == 0 and by_display.json()["uid"] == b

    # six shared digits name two: refused, both listed, nothing decided
    amb = cli("--headless", "evidence", "approve", a[:6], "--root", rp)
    assert amb.code == 2
    assert amb.stderr.count("\n") == 1 and "ambiguous" in amb.stderr
    assert a[:8] in amb.stderr and b[:8] in amb.stderr
    with EvidenceQueue(root) as q:
        assert {e.state for e in q.list()} == {"inbox"}

    r = cli("--headless", "evidence", "approve", a[:8], "3", "--root", rp, "--json")
    assert r.code == 0, r.stderr
    assert [e["uid"] for e in r.json()] == [a, c]
    r = cli("--headless", "evidence", "reject", b[:10], "--reason", "not a fact", "--root", rp, "--json")
    assert r.code == 0, r.stderr
    with EvidenceQueue(root) as q:
        assert {e.uid: e.state for e in q.list()} == {a: "queued", b: "rejected", c: "queued"}

    unknown = cli("--headless", "evidence", "show", "abcdef12", "--root", rp)
    assert unknown.code == 2 and "unknown evidence 'abcdef12'" in unknown.stderr


def test_operation_and_receipt_commands_take_the_short_forms(root, cli):
    rp = str(root.path)
    ids = []
    for _ in range(2):
        begun = cli("--headless", "maintain", "begin", "--root", rp, "--json")
        assert begun.code == 0, begun.stderr
        ids.append(begun.json()["operation_id"])
        assert cli("--headless", "maintain", "abort", "--root", rp).code == 0
    op = ids[1]
    tail = op.rsplit("-", 1)[1]  # the workbench shows `maintenance …<tail>`
    for ref in (op, tail, f"…{tail}", op[:-3]):
        for command in (["operations", "show"], ["receipts", "show"], ["diff"]):
            r = cli("--headless", *command, ref, "--root", rp, "--json")
            assert r.code == 0, (command, ref, r.stderr)
            assert op in (r.json().get("id"), r.json().get("operation_id")), (command, ref)

    common = "maintenance-"  # both ids start so: refused, both listed
    for command in (["operations", "show"], ["receipts", "show"], ["diff"]):
        r = cli("--headless", *command, common, "--root", rp)
        assert r.code == 2, (command, r.stderr)
        assert "ambiguous" in r.stderr and ids[0] in r.stderr and ids[1] in r.stderr


def test_update_retry_takes_a_batch_by_the_prefix_of_its_hex_part(root, cli):
    from rmtui.engine.roles.update_driver import BatchStore

    one, two, done = ("update-batch-abcdef1" + "0" * 57, "update-batch-abcdef2" + "0" * 57,
                      "update-batch-bbbbbb3" + "0" * 57)
    with BatchStore(root) as batches:
        for b in (one, two, done):
            batches.upsert(b, ["u"], ["s"], "test")
        batches.update(done, state="committed")
    rp = str(root.path)
    amb = cli("--headless", "update", "retry", "abcdef", "--root", rp)
    assert amb.code == 2 and "ambiguous" in amb.stderr and one[:24] in amb.stderr and two[:24] in amb.stderr
    named = cli("--headless", "update", "retry", "bbbbbb", "--root", rp)
    assert named.code == 3 and f"batch {done} is committed" in named.stderr
