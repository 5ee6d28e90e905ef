"""What a memory node is about, wherever its note puts it.

Notes name their subject in different places: a lead label before a colon (``Staging DB:
moved to 5433``, ``Ana: we chose postgres``), a short label in parentheses at the end
(``moved to 5433 (staging DB)``), only the short heading the node sits under (``## Staging
DB`` over its facts, ``# Ana`` over a run of turns), or as the subject of its sentence, first
(``Ana said that ...``, ``core.hooksPath points hooks at ...``). Ranking reads the subject in
all these places, so that no way of writing notes is favoured over another
(docs/architecture.md, "Retrieval"): the dense text of a node that names its subject last or
only in its heading is embedded as ``subject: text`` (first, where a lead label would be), and
the second stage asks whether the need names the subject.
"""

from __future__ import annotations

#: A label: at most this many words ...
LABEL_WORDS = 4
#: ... before a colon this close to the start of a node.
LEAD_CHARS = 40
#: A node without a label: its first this many words stand for its subject.
OPENING_WORDS = 3


def lead_label(entry) -> str:
    """The lead label of a memory node: up to :data:`LABEL_WORDS` words before a colon (and a
    space) near the start of its first line, markup removed; "" for anything else (headings,
    a colon inside a sentence or in ``**State:**`` markup)."""
    if entry.kind != "node":
        return ""
    line = entry.text.split("\n", 1)[0]
    colon = line.find(":", 0, LEAD_CHARS)
    if colon <= 0 or line[colon + 1:].lstrip("*`_")[:1] not in ("", " "):
        return ""
    label = line[:colon].replace("*", " ").replace("`", " ").replace("_", " ").strip()
    return label if 0 < len(label.split()) <= LABEL_WORDS else ""


def tail_label(entry) -> str:
    """A short label in parentheses that ends a node's first line, or ""."""
    if entry.kind != "node":
        return ""
    line = entry.text.split("\n", 1)[0].rstrip().rstrip(".!?")
    open_at = line.rfind("(")
    if not line.endswith(")") or open_at <= 0:
        return ""
    inner = line[open_at + 1:-1].strip()
    return inner if "(" not in inner and 0 < len(inner.split()) <= LABEL_WORDS else ""


def heading_label(corpus, entry) -> str:
    """The title of the heading a node sits directly under, when it is short enough to be a
    label (a speaker, a component, a topic), else ""."""
    if entry.kind != "node" or not entry.ancestors:
        return ""
    title = corpus.headings[entry.ancestors[-1]].title
    return title if 0 < len(title.split()) <= LABEL_WORDS else ""


def dense_label(corpus, entry) -> str:
    """The subject a node's dense text is prefixed with (``subject: text``) when the note does not
    lead with it: its tail label, else its heading label; "" for a node with a lead label."""
    if lead_label(entry):
        return ""
    return tail_label(entry) or heading_label(corpus, entry)


def opening_words(entry) -> str:
    """The first :data:`OPENING_WORDS` words of a node, markup removed: where a sentence puts
    its subject (``Ana said that``, ``core.hooksPath points hooks``)."""
    if entry.kind != "node":
        return ""
    return " ".join(entry.text.replace("`", " ").replace("*", " ").split()[:OPENING_WORDS])


def subject_label(corpus, entry) -> str:
    """The subject of a node: its lead label, else its tail label, else its heading label,
    else its opening words."""
    return lead_label(entry) or tail_label(entry) or heading_label(corpus, entry) or opening_words(entry)
