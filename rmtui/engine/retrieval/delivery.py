"""Per-session delivery history (docs/architecture.md, "Retrieval").

For each session: which items were delivered with which content hash, and the memory
commit of the last delivery. Unchanged items are not sent again (unless the caller asks
with ``include_returned``); an item that changed since it was delivered is sent with a
notice, and a delivered item that changed or vanished is reported once as a notice even
when this query did not select it. Kept in the root's runtime SQLite (WAL).
"""

from __future__ import annotations

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
    """Delivery records of one root; one short SQLite connection per use."""

    def __init__(self, runtime) -> None:
        self.conn = store.connect(runtime)

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


def filter_delivered(units: list, delivered: dict[str, Delivered], include_returned: bool) -> tuple[list, list[str], dict[str, str]]:
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
