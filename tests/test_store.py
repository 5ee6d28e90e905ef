"""The runtime database carries a schema version: older databases upgrade in place, a
database from a newer rmtui is refused with a clear message instead of being misread."""

from __future__ import annotations

import sqlite3

from rmtui.engine import store
from rmtui.engine.evidence.queue import EvidenceQueue

OLD_EVIDENCE = """
CREATE TABLE evidence (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, uid TEXT NOT NULL UNIQUE, session TEXT NOT NULL,
    request TEXT, sha256 TEXT NOT NULL, text TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'update',
    state TEXT NOT NULL, reason TEXT, batch_id TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL
);
"""


def test_new_database_has_the_current_schema_version(root):
    conn = store.connect(root.ensure_runtime())
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    conn.close()


def test_newer_database_is_refused_with_a_clear_message(cli, root):
    db = root.ensure_runtime() / store.DB_NAME
    store.connect(db.parent).close()
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")
    raw.close()
    r = cli("--headless", "evidence", "list", "--root", str(root.path))
    assert r.code == 2, (r.stdout, r.stderr)
    assert "newer rmtui" in r.stderr and f"schema version {store.SCHEMA_VERSION + 1}" in r.stderr
    assert "Traceback" not in r.stderr
    raw = sqlite3.connect(db)  # nothing was changed
    assert raw.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION + 1
    raw.close()


def test_unversioned_database_upgrades_and_keeps_its_evidence(root):
    db = root.ensure_runtime() / store.DB_NAME
    raw = sqlite3.connect(db)
    raw.executescript(OLD_EVIDENCE)
    for i, (uid, session) in enumerate([("a" * 32, "s1"), ("b" * 32, "s2"), ("c" * 32, "s1")]):
        raw.execute("INSERT INTO evidence(uid, session, sha256, text, state, created_at, updated_at)"
                    " VALUES (?,?,?,?,?,?,?)", (uid, session, "0" * 64, f"fact {i}", "queued", 1.7e9 + i, 1.7e9 + i))
    raw.commit()
    raw.close()
    with EvidenceQueue(root) as q:
        items = {e.uid: e for e in q.list()}
        assert [(items[u].session, items[u].display_id) for u in ("a" * 32, "b" * 32, "c" * 32)] == [
            ("s1", 1), ("s2", 1), ("s1", 2)]
        assert items["a" * 32].submitted_at == "2023-11-14T22:13:20+00:00"
        assert items["c" * 32].candidate()["message"] == "fact 2"
        new = q.submit("s1", b"fact 3")
        assert q.get(new["uid"]).display_id == 3
