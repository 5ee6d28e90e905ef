"""Evidence intake through the real CLI, plus concurrency and crash safety
(docs/architecture.md, "Evidence: from submit to receipt").

A submit is an agent's delivery to the queue: it answers JSON, is durable when it answers,
is idempotent per (session, request), and refuses bad input without storing anything.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.roots import open_root
from rmtui.engine.store import DB_NAME


def stored(root_path: Path) -> list[dict]:
    """What the queue holds, read back through the engine in this process."""
    q = EvidenceQueue(open_root(root_path))
    try:
        return [e.to_json(with_text=True) for e in q.list()]
    finally:
        q.close()


def integrity(root_path: Path) -> str:
    conn = sqlite3.connect(root_path / ".runtime" / DB_NAME)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def submit(cli, root, *args: str, input: bytes | str | None = None, as_json: bool = True):
    return cli("--headless", "submit", "--root", str(root.path), *(["--json"] if as_json else []), *args, input=input)


# -- submit, duplicate, conflict ----------------------------------------------

def test_submit_answers_json_and_is_stored(root, cli, tmp_path):
    ev = tmp_path / "finding.md"
    ev.write_text("The deploy script needs PGPASSWORD set.\n", encoding="utf-8")
    r = submit(cli, root, "--session", "s1", "--request", "r1", str(ev))
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["state"] == "saved"
    assert out["uid"] == hashlib.sha256(b"s1\0r1").hexdigest()[:32]
    # durable and visible to any other process as soon as the command has answered
    [row] = stored(root.path)
    assert row["uid"] == out["uid"] and row["state"] == "queued"
    assert row["text"] == "The deploy script needs PGPASSWORD set.\n"
    assert (row["session"], row["request"]) == ("s1", "r1")
    # without --json a person reads one line: saved, the uid, where it waits
    plain = cli("--headless", "submit", "--root", str(root.path), "--session", "s1", "--request", "r1", str(ev))
    assert plain.code == 0 and plain.stdout == f"duplicate (already saved) {out['uid']}: queued for Update\n"
    plain = cli("--headless", "submit", "--root", str(root.path), "--session", "s1", input="another\n")
    assert plain.code == 0 and plain.stdout.startswith("saved ") and plain.stdout.endswith(": queued for Update\n")


def test_submit_from_stdin_and_plain_submits_get_random_uids(root, cli):
    a = submit(cli, root, "--session", "s1", "-", input="same text\n")
    b = submit(cli, root, "--session", "s1", input="same text\n")
    assert a.code == b.code == 0
    ua, ub = a.json()["uid"], b.json()["uid"]
    assert a.json()["state"] == b.json()["state"] == "saved"
    assert ua != ub and all(len(u) == 32 and int(u, 16) >= 0 and u == u.lower() for u in (ua, ub))
    assert len(stored(root.path)) == 2


def test_same_identity_same_evidence_is_duplicate(root, cli):
    first = submit(cli, root, "--session", "s1", "--request", "r1", input="evidence A\n")
    again = submit(cli, root, "--session", "s1", "--request", "r1", input="evidence A\n")
    assert first.json()["state"] == "saved"
    assert again.code == 0
    assert (again.json()["state"], again.json()["uid"]) == ("duplicate", first.json()["uid"])
    assert len(stored(root.path)) == 1


def test_same_identity_different_evidence_is_a_conflict(root, cli):
    submit(cli, root, "--session", "s1", "--request", "r1", input="evidence A\n")
    r = submit(cli, root, "--session", "s1", "--request", "r1", input="evidence B\n")
    assert r.code == 3
    assert "already belongs to different evidence" in r.stderr
    j = cli("--headless", "submit", "--root", str(root.path), "--session", "s1", "--request", "r1", "--json",
            input="evidence B\n")
    assert j.code == 3 and j.json()["error"] == "conflict"
    [row] = stored(root.path)
    assert row["text"] == "evidence A\n"  # the first evidence is kept untouched
    # another session may use the same request id
    other = submit(cli, root, "--session", "s2", "--request", "r1", input="evidence B\n")
    assert other.code == 0 and other.json()["state"] == "saved"


# -- approval inbox ---------------------------------------------------------

def test_required_approval_holds_evidence_in_an_inbox(root, cli):
    r = cli("--headless", "config", "set", "update.approval", "required", "--root", str(root.path))
    assert r.code == 0, r.stderr
    uids = [submit(cli, root, "--session", "s1", "--request", f"r{k}", input=f"finding {k}\n").json()
            for k in range(3)]
    assert [u["queue_state"] for u in uids] == ["inbox"] * 3
    a, b, c = (u["uid"] for u in uids)

    inbox = cli("--headless", "evidence", "list", "--state", "inbox", "--root", str(root.path), "--json")
    assert [e["uid"] for e in inbox.json()] == [a, b, c]
    assert inbox.json()[0]["first_line"] == "finding 0"

    ok = cli("--headless", "evidence", "approve", a, "--root", str(root.path), "--json")
    assert ok.code == 0 and ok.json()[0]["state"] == "queued"

    rej = cli("--headless", "evidence", "reject", b, "--reason", "secret in the text", "--root", str(root.path))
    assert rej.code == 0 and "secret in the text" in rej.stdout

    show = cli("--headless", "evidence", "show", b, "--root", str(root.path))
    assert show.code == 0
    assert "state: rejected" in show.stdout and "reason: secret in the text" in show.stdout
    assert show.stdout.rstrip().endswith("finding 1")  # rejected evidence keeps its text
    js = cli("--headless", "evidence", "show", b, "--root", str(root.path), "--json").json()
    assert (js["state"], js["reason"], js["text"]) == ("rejected", "secret in the text", "finding 1\n")

    # a decided item cannot be decided again; an unknown uid is bad input
    assert cli("--headless", "evidence", "approve", b, "--root", str(root.path)).code == 3
    assert cli("--headless", "evidence", "approve", "0" * 32, "--root", str(root.path)).code == 2
    # a rejection needs a reason
    assert cli("--headless", "evidence", "reject", c, "--reason", "  ", "--root", str(root.path)).code == 2

    rest = cli("--headless", "evidence", "approve", "--all", "--root", str(root.path), "--json")
    assert [e["uid"] for e in rest.json()] == [c]
    states = {e["uid"]: e["state"] for e in stored(root.path)}
    assert states == {a: "queued", b: "rejected", c: "queued"}

    listed = cli("--headless", "evidence", "list", "--root", str(root.path))
    assert listed.code == 0 and len(listed.stdout.strip().splitlines()) == 3 and "rejected" in listed.stdout


def test_auto_approval_queues_at_once_and_queued_evidence_can_be_rejected(root, cli):
    out = submit(cli, root, "--session", "s1", input="note\n").json()
    assert out["queue_state"] == "queued"
    r = cli("--headless", "evidence", "reject", out["uid"], "--reason", "duplicate of memory", "--root",
            str(root.path), "--json")
    assert r.code == 0 and r.json()[0]["reason"] == "duplicate of memory"
    assert cli("--headless", "evidence", "list", "--state", "bogus", "--root", str(root.path)).code == 2


def test_status_counts_evidence_by_state(root, cli):
    submit(cli, root, "--session", "s1", input="one\n")
    uid = submit(cli, root, "--session", "s1", input="two\n").json()["uid"]
    cli("--headless", "evidence", "reject", uid, "--reason", "no", "--root", str(root.path))
    st = cli("--headless", "status", "--root", str(root.path), "--json")
    assert st.code == 0
    data = st.json()
    assert data["evidence"] == {"inbox": 0, "queued": 1, "claimed": 0, "consumed": 0, "rejected": 1}
    assert data["root"] == str(root.path) and len(data["head"]) == 40 and data["valid"] is True
    text = cli("--headless", "status", "--root", str(root.path))
    assert "queued 1" in text.stdout and "rejected 1" in text.stdout


# -- bad input: clear error, exit 2, nothing stored --------------------------

BAD_EVIDENCE = [
    (b"caf\xe9 latin-1 text\n", "not valid UTF-8"),
    (b"", "empty"),
    (b"  \n\t\n", "empty"),
    (b"text with a \x00 NUL byte\n", "NUL"),
    (b"x" * 65537, "limit is 65536 bytes"),
    (b"log line\n" * 500_000, "limit is 65536 bytes"),
]


@pytest.mark.parametrize("data,message", BAD_EVIDENCE, ids=["latin1", "empty", "blank", "nul", "oversized", "4.5MB"])
def test_bad_evidence_is_refused(root, cli, tmp_path, data, message):
    ev = tmp_path / "ev.bin"
    ev.write_bytes(data)
    r = submit(cli, root, "--session", "s1", "--request", "r1", str(ev), as_json=False)
    assert r.code == 2
    assert message in r.stderr
    assert r.stdout == ""
    assert stored(root.path) == []
    assert ev.read_bytes() == data  # the caller's file is untouched


def test_evidence_limit_is_inclusive_and_configurable(root, cli):
    ok = submit(cli, root, "--session", "s1", input=b"y" * 65536)
    assert ok.code == 0 and ok.json()["state"] == "saved"
    assert cli("--headless", "config", "set", "update.max_evidence_bytes", "10", "--root", str(root.path)).code == 0
    assert submit(cli, root, "--session", "s1", input=b"0123456789").code == 0
    r = submit(cli, root, "--session", "s1", input=b"0123456789A")
    assert r.code == 2 and "limit is 10 bytes" in r.stderr
    assert len(stored(root.path)) == 2


@pytest.mark.parametrize("flag,value", [
    ("--session", "a/b"), ("--session", "a\\b"), ("--session", "two\nlines"), ("--session", ".."),
    ("--session", ""), ("--request", "r/1"), ("--request", "r\n1"),
])
def test_bad_identifiers_are_refused(root, cli, flag, value):
    args = ["--session", "s1", "--request", "r1"]
    args[args.index(flag) + 1] = value
    r = submit(cli, root, *args, input="fine evidence\n")
    assert r.code == 2, r.stderr
    assert "rmtui:" in r.stderr and ("must not" in r.stderr or "not allowed" in r.stderr)
    assert stored(root.path) == []


def test_oversized_stdin_is_refused(root, cli):
    r = submit(cli, root, "--session", "s1", "-", input=b"a much too long transcript\n" * 200_000)
    assert r.code == 2 and "limit is 65536 bytes" in r.stderr
    assert stored(root.path) == []


def test_missing_evidence_file_is_refused(root, cli, tmp_path):
    r = submit(cli, root, "--session", "s1", str(tmp_path / "nope.md"))
    assert r.code == 2 and "does not exist" in r.stderr


def test_malformed_config_refuses_submit_and_keeps_the_config(root, cli):
    cfg = root.path / "rightmemory.toml"
    cfg.write_text("[update\napproval = 'auto'\n", encoding="utf-8")
    r = submit(cli, root, "--session", "s1", input="evidence\n")
    assert r.code == 2 and "malformed TOML" in r.stderr
    assert cfg.read_text(encoding="utf-8") == "[update\napproval = 'auto'\n"
    assert stored(root.path) == []


def test_root_that_is_not_a_git_repository_is_refused(tmp_path, cli):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    r = cli("--headless", "submit", "--root", str(plain), "--session", "s1", input="evidence\n")
    assert r.code == 2 and "not a Git repository" in r.stderr
    assert not (plain / ".runtime").exists()
    assert sorted(p.name for p in plain.iterdir()) == ["MEMORY.md"]


# -- many writers at once ------------------------------------------------------

WORKER = textwrap.dedent("""
    import sys
    from rmtui.engine.evidence.queue import EvidenceQueue
    from rmtui.engine.memory.roots import open_root
    root, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    q = EvidenceQueue(open_root(root))
    states = {}
    for k in range(count):
        text = f"worker {worker} evidence {k}: the build cache lives in /var/cache/ci\\n".encode()
        out = q.submit(f"session-{worker}", text, request=f"req-{k}")
        states[out["state"]] = states.get(out["state"], 0) + 1
    print(states)
""")


def _run_workers(root_path: Path, workers: int, count: int) -> list[str]:
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(root_path), str(w), str(count)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(workers)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_eight_processes_submitting_at_once(root):
    outs = _run_workers(root.path, 8, 200)
    assert outs == ["{'saved': 200}"] * 8
    rows = stored(root.path)
    assert len(rows) == 1600
    assert len({r["uid"] for r in rows}) == 1600
    assert {(r["session"], r["request"]) for r in rows} == {
        (f"session-{w}", f"req-{k}") for w in range(8) for k in range(200)}
    assert all(r["uid"] == hashlib.sha256(f"{r['session']}\0{r['request']}".encode()).hexdigest()[:32]
               for r in rows)
    assert integrity(root.path) == "ok"
    # the same 1600 again, with their request ids: every one answers duplicate
    assert _run_workers(root.path, 8, 200) == ["{'duplicate': 200}"] * 8
    assert len(stored(root.path)) == 1600
    assert integrity(root.path) == "ok"


CRASHER = textwrap.dedent("""
    import sys
    from rmtui.engine.evidence.queue import EvidenceQueue
    from rmtui.engine.memory.roots import open_root
    q = EvidenceQueue(open_root(sys.argv[1]))
    with open(sys.argv[2], "a", encoding="utf-8") as log:
        k = 0
        while True:
            out = q.submit("crash-session", f"evidence {k}\\n".encode(), request=f"r{k}")
            log.write(out["uid"] + "\\n")
            log.flush()
            k += 1
""")


def test_sigkill_mid_submit_loses_no_answered_evidence(root, tmp_path):
    answered_log = tmp_path / "answered.txt"
    proc = subprocess.Popen([sys.executable, "-c", CRASHER, str(root.path), str(answered_log)],
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if answered_log.exists() and answered_log.read_text().count("\n") >= 150:
            break
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    answered = [line for line in answered_log.read_text().splitlines() if len(line) == 32]
    assert len(answered) >= 150
    assert integrity(root.path) == "ok"
    held = {r["uid"]: r for r in stored(root.path)}
    missing = [u for u in answered if u not in held]
    assert missing == []
    # at most the one submit in flight when the kill landed went unanswered
    assert len(held) - len(answered) in (0, 1)
    # and the queue keeps working after the crash
    q = EvidenceQueue(open_root(root.path))
    try:
        assert q.submit("crash-session", b"evidence 0\n", request="r0")["state"] == "duplicate"
        assert q.submit("after", b"after the crash\n")["state"] == "saved"
    finally:
        q.close()


def test_cancel_by_display_id_needs_the_session_when_several_have_it(root, cli):
    rp = str(root.path)
    for session in ("s1", "s2"):
        assert cli("--headless", "submit", "--root", rp, "--session", session, input=f"fact of {session}\n").code == 0
    r = cli("--headless", "evidence", "cancel", "1", "--root", rp)
    assert r.code == 2 and "--session" in r.stderr
    r = cli("--headless", "evidence", "cancel", "1", "--session", "s2", "--root", rp, "--json")
    assert r.code == 0, r.stderr
    with EvidenceQueue(root) as q:
        by_session = {e.session: e for e in q.list()}
    assert by_session["s2"].state == "rejected" and "cancelled" in by_session["s2"].reason
    assert by_session["s1"].state != "rejected"
    assert [e["uid"] for e in r.json()] == [by_session["s2"].uid]


def test_a_uid_prefix_of_only_digits_is_a_prefix_too(root, cli):
    """One uid in forty starts with eight decimal digits: such a prefix must still name it
    (it was read as a display id only, and ``cancel`` found nothing)."""
    from rmtui.engine.evidence.queue import candidate_uid

    rp = str(root.path)
    request = next(f"r{n}" for n in range(10**6) if candidate_uid("s1", f"r{n}")[:8].isdigit())
    assert submit(cli, root, "--session", "s1", "--request", request, input="a fact\n").code == 0
    uid = candidate_uid("s1", request)
    r = cli("--headless", "evidence", "cancel", uid[:8], "--root", rp, "--json")
    assert r.code == 0, r.stderr
    assert [e["uid"] for e in r.json()] == [uid]
    with EvidenceQueue(root) as q:
        assert q.get(uid).state == "rejected"
