"""Text at output boundaries: what a terminal would take for a command is shown, not obeyed.

Evidence, memory and error messages carry text from agents and users. Printed raw, an
escape sequence in it (``ESC [ 2 J``, an OSC title or hyperlink, a bidi override) would
drive the reader's terminal instead of being read. :func:`printable` spells such
characters as escapes; :func:`json_text` does the same inside JSON so the document stays
valid and equal in meaning.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, a CR not ending a CRLF, DEL, C1 controls, the bidi
# embedding/override/isolate controls, and lone surrogates (undecodable bytes).
_UNSAFE_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]|\r(?!\n)")
# Inside JSON text: C0 controls are already escaped by the encoder.
_JSON_UNSAFE_RE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    c = m.group(0)
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def printable(text: str) -> str:
    """``text`` with terminal controls written as visible escapes (``\\x1b``, ``\\u202e``)."""
    return _UNSAFE_RE.sub(_escape, text)


#: The characters a terminal or a text view obeys rather than shows, as a regex class: every
#: C0 control (ESC, and line breaks too), DEL, C1 controls (a lone CSI U+009B acts as ESC [;
#: NEL is a newline), the bidi marks, embeddings, overrides and isolates, and the Unicode line
#: and paragraph separators. Remote text escapes them; an identifier may hold none of them.
CONTROL_CLASS = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
#: Everything a remote party's text may not bring into one line of ours: those, and lone surrogates.
_REMOTE_UNSAFE_RE = re.compile(f"[{CONTROL_CLASS}\ud800-\udfff]")
#: How much of a remote party's text a message quotes.
REMOTE_TEXT_CHARS = 300


def remote_text(value: object, limit: int = REMOTE_TEXT_CHARS) -> str:
    """Text another machine sent (an embedding service's error detail, a view provider's or a
    hub's message, a Git remote's refusal), fit to quote in a message of ours: one line, its
    terminal and bidi controls written as visible escapes, at most ``limit`` characters of it
    (then ``…``). Every client that quotes a remote party goes through this before the text
    reaches an error, a status file or a screen."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    else:
        text = value if isinstance(value, str) else str(value)
    text = text.strip()
    cut = len(text) > limit
    return _REMOTE_UNSAFE_RE.sub(_escape, text[:limit]) + ("…" if cut else "")


def json_text(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the same characters as
    ``\\uXXXX`` escapes: still valid JSON of the same value, safe on a terminal."""
    return _JSON_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def json_line(data) -> str:
    """``data`` as the fronts print ``--json``: one line of JSON, non-ASCII kept, terminal
    controls escaped (the thin client prints the warm service's rendering of this verbatim)."""
    import json

    return json_text(json.dumps(data, indent=None, ensure_ascii=False, default=str)) + "\n"


def text_block(text: str | None) -> str:
    """``text`` as the fronts print it: terminal controls escaped, ending in a newline (none
    at all for no text)."""
    if not text:
        return ""
    text = printable(text)
    return text if text.endswith("\n") else text + "\n"


def warning_lines(warnings) -> str:
    """The ``rmtui: warning: ...`` lines a command writes on stderr."""
    return "".join(f"rmtui: warning: {printable(str(w))}\n" for w in warnings)
