"""Untracked runtime state in one SQLite database (WAL) under ``.runtime/``.

SQLite gives us atomic multi-process transactions and crash safety (a killed writer never
leaves a partial row); ``synchronous=FULL`` makes a committed transaction durable before
the command that made it answers.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DB_NAME = "state.sqlite3"

SCHEMA = """
CREATE TABLE IF NOT EXISTS evidence (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    session TEXT NOT NULL,
    request TEXT,
    sha256 TEXT NOT NULL,
    text TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'update',
    state TEXT NOT NULL,
    reason TEXT,
    batch_id TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS evidence_state ON evidence(state, seq);
CREATE INDEX IF NOT EXISTS evidence_session ON evidence(session, seq);
"""


def connect(runtime: Path, schema: str | None = None) -> sqlite3.Connection:
    """Open the runtime database; ``schema`` adds a module's own tables (idempotent DDL)."""
    runtime.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(runtime / DB_NAME, timeout=60.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=60000")
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if mode != "wal":
        _retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
    conn.execute("PRAGMA synchronous=FULL")
    _retry(lambda: conn.executescript(SCHEMA))
    if schema:
        _retry(lambda: conn.executescript(schema))
    return conn


def _retry(fn, attempts: int = 50):
    for i in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or i == attempts - 1:
                raise
            time.sleep(0.02 * (i + 1))
    return None


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` so read-check-write sequences are atomic across processes."""
    _retry(lambda: conn.execute("BEGIN IMMEDIATE"))
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


class StoreHandle:
    """A runtime-database handle: ``conn``, ``close()`` and ``with`` support."""

    conn: sqlite3.Connection

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
