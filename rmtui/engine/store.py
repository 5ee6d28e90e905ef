"""Untracked runtime state in one SQLite database (WAL) under ``.runtime/``.

SQLite gives us atomic multi-process transactions and crash safety (a killed writer never
leaves a partial row); ``synchronous=FULL`` makes a committed transaction durable before
the command that made it answers.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from rmtui.engine.errors import UsageError

DB_NAME = "state.sqlite3"

# The schema, as an ordered list of migrations: ``MIGRATIONS[i]`` takes a database from
# ``user_version`` i to i+1. Append, never edit, so every older database upgrades in order.
# Version 1 is the schema rmtui had before versioning (its DDL is idempotent, so a database
# created then, still at user_version 0, upgrades in place).
_V1 = """
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
CREATE TABLE IF NOT EXISTS operations (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    phase TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_phase ON operations(phase, updated_at);
CREATE TABLE IF NOT EXISTS receipts (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS update_batches (
    batch_id TEXT PRIMARY KEY,
    uids TEXT NOT NULL,
    sessions TEXT NOT NULL,
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL,
    operation_id TEXT,
    last_error TEXT,
    receipt TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS update_batches_state ON update_batches(state, next_attempt_at);
CREATE TABLE IF NOT EXISTS retrieve_delivery (
    session TEXT NOT NULL,
    key TEXT NOT NULL,
    item_id TEXT,
    hash TEXT NOT NULL,
    noticed_hash TEXT,
    commit_id TEXT,
    delivered_at REAL NOT NULL,
    PRIMARY KEY (session, key)
);
CREATE TABLE IF NOT EXISTS retrieve_session (
    session TEXT PRIMARY KEY,
    last_commit TEXT,
    calls INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
"""


def _v1_initial_schema(conn: sqlite3.Connection) -> None:
    # statement by statement: executescript() would commit the migration's transaction
    for statement in _V1.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v2_candidate_records(conn: sqlite3.Connection) -> None:
    """Evidence carries the original's candidate record fields: a per-session ``display_id``
    and the canonical UTC ``submitted_at`` (so the batch id is the original's formula), and
    its ``origin`` when it came from another machine through the Git-backed queue."""
    conn.execute("ALTER TABLE evidence ADD COLUMN display_id INTEGER")
    conn.execute("ALTER TABLE evidence ADD COLUMN submitted_at TEXT")
    conn.execute("ALTER TABLE evidence ADD COLUMN origin TEXT")  # NULL: submitted here; else imported
    rows = conn.execute("SELECT seq, session, created_at FROM evidence ORDER BY seq").fetchall()
    counters: dict[str, int] = {}
    for seq, session, created in rows:
        counters[session] = counters.get(session, 0) + 1
        conn.execute("UPDATE evidence SET display_id = ?, submitted_at = ? WHERE seq = ?",
                     (counters[session], utc_iso(created), seq))
    conn.execute("CREATE INDEX IF NOT EXISTS evidence_display ON evidence(session, display_id)")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _v1_initial_schema,
    _v2_candidate_records,
]
SCHEMA_VERSION = len(MIGRATIONS)


def utc_iso(ts: float) -> str:
    """Canonical UTC isoformat, as the original writes ``submitted_at``."""
    return datetime.fromtimestamp(ts, UTC).isoformat()


class NewerDatabase(UsageError):
    """The runtime database was written by a newer rmtui; reading it could misread it."""


def connect(runtime: Path) -> sqlite3.Connection:
    """Open the runtime database, upgrading its schema to ``SCHEMA_VERSION`` if it is older."""
    runtime.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(runtime / DB_NAME, timeout=60.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=60000")
    try:
        _check_version(conn, runtime)
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            _retry(lambda: _migrate(conn, runtime))
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            _retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.OperationalError as exc:  # a full disk cannot even open the WAL: say so
        from rmtui.engine.errors.storage import storage_error

        conn.close()
        disk = storage_error(exc, runtime / DB_NAME)
        if disk is not None:
            raise disk from exc
        raise
    except BaseException:
        conn.close()
        raise
    return conn


def _check_version(conn: sqlite3.Connection, runtime: Path) -> int:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise NewerDatabase(
            f"{runtime / DB_NAME} has schema version {version}, newer than this rmtui knows "
            f"({SCHEMA_VERSION}); it was written by a newer rmtui: upgrade rmtui to use this root")
    return version


def _migrate(conn: sqlite3.Connection, runtime: Path) -> None:
    with transaction(conn):  # one writer migrates; the others see the new version after it
        version = _check_version(conn, runtime)
        for step in MIGRATIONS[version:]:
            step(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


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
    """``BEGIN IMMEDIATE`` so read-check-write sequences are atomic across processes. A full
    or failing disk is a :class:`~rmtui.engine.errors.storage.StorageError` naming the device."""
    try:
        _retry(lambda: conn.execute("BEGIN IMMEDIATE"))
    except sqlite3.OperationalError as exc:
        _raise_disk_error(conn, exc)
        raise
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError):
            _raise_disk_error(conn, exc)
        raise


def _raise_disk_error(conn: sqlite3.Connection, exc: sqlite3.OperationalError) -> None:
    """Raise ``exc`` as the disk's failure when it is one; return otherwise."""
    from rmtui.engine.errors.storage import storage_error

    try:
        path = conn.execute("PRAGMA database_list").fetchone()[2] or None
    except sqlite3.Error:
        path = None
    disk = storage_error(exc, path)
    if disk is not None:
        raise disk from exc


class StoreHandle:
    """A runtime-database handle: ``conn``, ``close()`` and ``with`` support."""

    conn: sqlite3.Connection

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
