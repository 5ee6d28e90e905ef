"""Per-session delivery history (docs/architecture.md, "Retrieval").

For each session: which items were delivered with which content hash, and the memory
commit of the last delivery. Unchanged items are not sent again (unless the caller asks
with ``include_returned``); an item that changed since it was delivered is sent with a
notice, and a delivered item that changed or vanished is reported once as a notice even
when this query did not select it. Kept in the root's runtime SQLite (WAL).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass

from rmtui.engine import store
from rmtui.engine.evidence.queue import check_session_id


@dataclass
class Delivered:
    key: str
    item_id: str | None
    hash: str
    noticed_hash: str | None


class DeliveryHistory(store.StoreHandle):
    """Delivery records of one root.

    Every retrieve reads and writes here, and opening the database (schema check, pragmas)
    and closing its last connection (which checkpoints the WAL) cost more than a warm
    retrieve's ranking. So a process keeps one connection per root open between uses, lent
    to one user at a time (``with``), and opens it again when the database file was
    replaced. In WAL mode ``synchronous=NORMAL`` skips the fsync of each commit: a power
    cut may lose the last deliveries (those items are sent again), never the database; an
    application crash loses nothing."""

    def __init__(self, runtime) -> None:
        path = os.path.join(os.path.abspath(runtime), store.DB_NAME)
        key = (os.getpid(), path)  # a forked child opens its own
        with _GUARD:
            lock = _LOCKS.setdefault(key, threading.Lock())
        lock.acquire()
        try:
            kept = _OPEN.get(key)
            ino = _inode(path)
            if kept is None or kept[1] != ino or ino is None:
                if kept is not None:
                    kept[0].close()
                conn = store.connect(runtime)
                conn.execute("PRAGMA synchronous=NORMAL")
                kept = _OPEN[key] = (conn, _inode(path))
            self.conn = kept[0]
        except BaseException:
            _OPEN.pop(key, None)
            lock.release()
            raise
        self._lock = lock

    def close(self) -> None:
        """Hand the connection back (it stays open for the next use in this process)."""
        if self.conn.in_transaction:  # never lend out a half-done transaction
            self.conn.execute("ROLLBACK")
        self._lock.release()

    def delivered(self, session: str) -> dict[str, Delivered]:
        check_session_id(session)
        rows = self.conn.execute(
            "SELECT key, item_id, hash, noticed_hash FROM retrieve_delivery WHERE session = ?", (session,))
        return {r["key"]: Delivered(r["key"], r["item_id"], r["hash"], r["noticed_hash"]) for r in rows}

    def last_commit(self, session: str) -> str | None:
        row = self.conn.execute("SELECT last_commit FROM retrieve_session WHERE session = ?", (session,)).fetchone()
        return row["last_commit"] if row else None

    def record(self, session: str, items: list[tuple[str, str | None, str]], commit: str | None,
               noticed: dict[str, str] | None = None) -> None:
        """Store delivered (key, item id, hash) and the notices just shown (key -> current hash)."""
        now = time.time()
        with store.transaction(self.conn):
            for key, item_id, h in items:
                self.conn.execute(
                    "INSERT INTO retrieve_delivery(session, key, item_id, hash, noticed_hash, commit_id, delivered_at) "
                    "VALUES (?, ?, ?, ?, NULL, ?, ?) ON CONFLICT(session, key) DO UPDATE SET "
                    "item_id = excluded.item_id, hash = excluded.hash, noticed_hash = NULL, "
                    "commit_id = excluded.commit_id, delivered_at = excluded.delivered_at",
                    (session, key, item_id, h, commit, now))
            for key, h in (noticed or {}).items():
                self.conn.execute("UPDATE retrieve_delivery SET noticed_hash = ? WHERE session = ? AND key = ?",
                                  (h, session, key))
            self.conn.execute(
                "INSERT INTO retrieve_session(session, last_commit, calls, updated_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT(session) DO UPDATE SET last_commit = excluded.last_commit, "
                "calls = calls + 1, updated_at = excluded.updated_at", (session, commit, now))

    def forget(self, session: str) -> int:
        with store.transaction(self.conn):
            cur = self.conn.execute("DELETE FROM retrieve_delivery WHERE session = ?", (session,))
            self.conn.execute("DELETE FROM retrieve_session WHERE session = ?", (session,))
        return cur.rowcount


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


_GUARD = threading.Lock()
_LOCKS: dict[tuple[int, str], threading.Lock] = {}
#: The kept connection of each (process, database file), with the file's inode when opened.
_OPEN: dict[tuple[int, str], tuple[sqlite3.Connection, int | None]] = {}


def filter_delivered(units: list, delivered: dict[str, Delivered],
                     include_returned: bool) -> tuple[list, list[str], dict[str, str]]:
    """One rule for every retrieval path: unchanged delivered items are skipped (unless
    ``include_returned``), changed ones come again with a notice. Returns (kept, skipped keys,
    status by key: new | returned | changed)."""
    kept, skipped, status = [], [], {}
    for u in units:
        d = delivered.get(u.key)
        if d is not None and d.hash == u.hash and u.kind != "recent":
            if not include_returned:
                skipped.append(u.key)
                continue
            status[u.key] = "returned"
        elif d is not None and u.kind != "recent":
            u.notice = "its content changed"
            status[u.key] = "changed"
        else:
            status[u.key] = "new"
        kept.append(u)
    return kept, skipped, status


def already_delivered_text(skipped: list[str]) -> str:
    return (f"no new match: {len(skipped)} matching item(s) were already delivered in this session "
            f"({', '.join(skipped)}); use --include-returned to send them again")
