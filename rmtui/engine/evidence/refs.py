"""One way to name a thing: how a person's reference picks one evidence, operation or receipt.

Every front prints the same short forms (the workbench shows eight characters of a uid and
an operation's hex tail, ``evidence list`` prints display ids), so every command that takes
such a reference accepts each of them through :func:`pick`: the whole id, a unique prefix
of it (or of another full name it has, such as a batch id), the short tail the workbench
shows (``…55ac76d8``), or a display id. An ambiguous reference is refused with its matches
listed, never guessed (docs/architecture.md, "Naming evidence, operations and receipts").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rmtui.engine.errors import UsageError

#: The shortest prefix taken as a prefix: shorter ones would match by accident. The
#: workbench shows eight characters, so what a person copies from it always qualifies.
MIN_PREFIX = 6
#: How many matches an ambiguous reference lists.
SHOWN = 8
#: What the workbench puts before an operation's hex tail (``maintenance …55ac76d8``).
_ELLIPSES = ("…", "...")


@dataclass(frozen=True)
class Named:
    """One thing a reference may pick: its id, other full names it answers to (a receipt's
    batch id), the short tail fronts show, its display id, and how to list it."""

    id: str
    names: tuple[str, ...] = ()
    tail: str | None = None
    display_id: str | None = None
    label: str = ""


def normalise(ref: str) -> str:
    """``ref`` without surrounding blanks and the ellipsis the workbench puts before a tail."""
    ref = (ref or "").strip()
    for mark in _ELLIPSES:
        if ref.startswith(mark):
            return ref[len(mark):].strip()
    return ref


def matches(ref: str, things: Iterable[Named]) -> list[Named]:
    """Everything ``ref`` names among ``things``: an exact id (else an exact name) wins; otherwise
    every display id, prefix and tail match together (so an ambiguity is seen, not guessed)."""
    ref = normalise(ref)
    things = list(things)
    if not ref:
        return []
    exact = [t for t in things if ref == t.id] or [t for t in things if ref in t.names]
    if exact:
        return exact
    low = ref.lower()
    out: list[Named] = []
    for t in things:
        by_display = ref.isdigit() and t.display_id == ref
        by_prefix = len(ref) >= MIN_PREFIX and (any(n.lower().startswith(low) for n in (t.id, *t.names))
                                                or (t.tail is not None and t.tail.lower().startswith(low)))
        if by_display or by_prefix:
            out.append(t)
    return out


def pick(ref: str, what: str, things: Iterable[Named], *, more: str = "") -> str:
    """The id of the one thing ``ref`` names; refuses (exit 2) none and several alike, the
    latter listing the matches. ``what`` names the kind (``evidence``, ``operation``);
    ``more`` is what else would tell them apart (``or --session``)."""
    if not normalise(ref):
        raise UsageError(f"name the {what}: its id, a unique prefix of at least {MIN_PREFIX} characters"
                         + (" or its display id" if what == "evidence" else ""))
    found = matches(ref, things)
    if len(found) == 1:
        return found[0].id
    if not found:
        forms = f"a whole id or a unique prefix of at least {MIN_PREFIX} characters"
        if what == "evidence":
            forms += ", or a display id"
        raise UsageError(f"unknown {what} {ref!r}: no {what} has that id ({forms})")
    listed = ", ".join(t.label or t.id for t in found[:SHOWN]) + (" …" if len(found) > SHOWN else "")
    raise UsageError(f"{ref!r} is ambiguous: it names {len(found)} {what if what == 'evidence' else what + 's'}"
                     f" ({listed}); give more of the id{more}",
                     details={"matches": [t.id for t in found]})
