"""The prune ledger in a ``prune:`` commit body (docs/formats.md, "Maintenance cycles"), read and written.

Grammar: a line ``Removed`` or ``Revival grace`` (any case, colon optional) starts a section;
any other ``Words:`` line (a trailer such as ``RightMemory-Operation:`` included) ends it.
Entries are ``- `` lines naming ``MEMORY*.md#id`` or `` `id` `` followed by a summary; grace
entries contain ``grace K/N``. Anything else is prose and ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRUNE_PREFIX = "prune:"
SUBJECT_EXPIRED = "prune: expired active memory"
SUBJECT_CHECKPOINT = "prune: checkpoint"

_SECTION_RE = re.compile(r"^\s*(removed|revival\s+grace)\s*:?\s*$", re.IGNORECASE)
_WORDS_RE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9 _-]*:")
_FILE_ID_RE = re.compile(r"(MEMORY[A-Za-z0-9_.-]*\.md)#([A-Za-z0-9_.-]+)")
_TICK_ID_RE = re.compile(r"`([A-Za-z0-9_.-]+)`")
_GRACE_RE = re.compile(r"grace\s+(\d+)\s*/\s*(\d+)", re.IGNORECASE)


@dataclass
class Entry:
    id: str
    file: str | None
    text: str  # the whole entry line without the "- "
    grace: tuple[int, int] | None = None  # (K, N) of a grace entry

    def to_json(self) -> dict:
        return {"id": self.id, "file": self.file, "text": self.text,
                "grace": list(self.grace) if self.grace else None}


@dataclass
class Ledger:
    removed: list[Entry] = field(default_factory=list)
    grace: list[Entry] = field(default_factory=list)

    def removed_ids(self) -> list[str]:
        return [e.id for e in self.removed]

    def grace_of(self, item_id: str) -> tuple[int, int] | None:
        for e in self.grace:
            if e.id == item_id and e.grace:
                return e.grace
        return None

    def to_json(self) -> dict:
        return {"removed": [e.to_json() for e in self.removed], "revival_grace": [e.to_json() for e in self.grace]}


def _entry(body: str) -> Entry | None:
    m = _FILE_ID_RE.search(body)
    if m:
        ident, file = m.group(2), m.group(1)
    else:
        t = _TICK_ID_RE.search(body)
        if not t:
            return None
        ident, file = t.group(1), None
    g = _GRACE_RE.search(body)
    return Entry(ident, file, body, (int(g.group(1)), int(g.group(2))) if g else None)


def parse_ledger(message: str) -> Ledger:
    """The ledger of a commit message (subject included or not)."""
    ledger = Ledger()
    section: str | None = None
    for line in message.splitlines():
        m = _SECTION_RE.match(line)
        if m:
            section = "grace" if m.group(1).lower().startswith("revival") else "removed"
            continue
        stripped = line.strip()
        if stripped.startswith("- ") or stripped == "-":
            if section is None:
                continue
            entry = _entry(stripped[2:].strip())
            if entry is None:
                continue
            if section == "removed":
                ledger.removed.append(entry)
            elif entry.grace is not None:
                ledger.grace.append(entry)
            continue
        if _WORDS_RE.match(line):
            section = None
    return ledger


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_ledger(removed: list[tuple[str, str, str]], grace: list[tuple[str, str, int, int]]) -> str:
    """The body: ``removed`` is ``(file, id, reason)``, ``grace`` is ``(file, id, K, N)``."""
    parts: list[str] = []
    if removed:
        parts.append("Removed:\n" + "\n".join(
            f"- {file}#{ident}: {_one_line(reason) or 'expired'}" for file, ident, reason in removed))
    if grace:
        parts.append("Revival grace:\n" + "\n".join(
            f"- {file}#{ident}: grace {k}/{n}" for file, ident, k, n in grace))
    return "\n\n".join(parts)


def compose_message(removed: list[tuple[str, str, str]], grace: list[tuple[str, str, int, int]], *,
                    changed: bool) -> str:
    """The whole commit message the program lands: subject and ledger."""
    subject = SUBJECT_EXPIRED if changed else SUBJECT_CHECKPOINT
    body = format_ledger(removed, grace)
    return subject + ("\n\n" + body if body else "")


def reasons_from(text: str) -> dict[str, str]:
    """Reasons a role gave per id (its commit bodies or report): ``- id: reason`` lines, in
    any section; the ledger grammar's entries and plain ``- id: reason`` bullets both count."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("- "):
            continue
        body = s[2:].strip()
        if _GRACE_RE.search(body):
            continue
        m = _FILE_ID_RE.match(body) or _TICK_ID_RE.match(body)
        if m:
            ident = m.group(m.lastindex or 1)
            rest = body[m.end():]
        else:
            plain = re.match(r"([A-Za-z0-9_.-]+)\s*[:—–-]\s+", body)
            if not plain:
                continue
            ident, rest = plain.group(1), body[plain.end():]
        reason = rest.lstrip(" :—–-").strip()
        if reason and ident not in out:
            out[ident] = reason
    return out
