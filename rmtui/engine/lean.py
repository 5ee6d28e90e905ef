"""JSON and SHA-256 without the standard modules' import cost (docs/architecture.md, "The thin client").

A warm retrieve by the thin client is a new process whose whole budget is about 25 ms over a
bare interpreter. ``import json`` costs ~10 ms of that (it loads ``re`` and ``enum``), and
``import hashlib`` ~3 ms (it loads OpenSSL). The C parts both modules use ship with
CPython on their own: ``_json`` (the scanner and string encoder ``json`` itself runs) and the
built-in SHA-256 (``_sha256``, ``_sha2`` from Python 3.12). Where an interpreter lacks them,
the standard modules answer instead: same results, only slower to import.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (the typing module is one more import)
if TYPE_CHECKING:
    from collections.abc import Callable


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


class _Context:
    """What ``_json.make_scanner`` reads from a decoder: plain dicts, ``int`` and ``float``
    (its fast paths), strict strings, and NaN / Infinity refused (``allow_nan=False``)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_refuse_constant)


_SCANNER: Callable | None = None


def loads(text: str):
    """``json.loads(text)`` for a document of our own making; ValueError when it is not JSON."""
    global _SCANNER
    if _SCANNER is None:
        try:
            import _json

            _SCANNER = _json.make_scanner(_Context())  # type: ignore[arg-type]  # (the stub wants a JSONDecoder; it reads only these attributes)
        except (ImportError, AttributeError, TypeError):
            import json

            return json.loads(text, parse_constant=_refuse_constant)
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = _SCANNER(text, start)
    except StopIteration:
        raise ValueError("not a JSON document") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError(f"extra data after the JSON document at character {end}")
    return value


def quote(text: str) -> str:
    """``text`` as a JSON string, ASCII only (what ``json.dumps`` writes with ``ensure_ascii``)."""
    try:
        from _json import encode_basestring_ascii
    except ImportError:
        from json.encoder import py_encode_basestring_ascii as encode_basestring_ascii
    return encode_basestring_ascii(text)


def sha256(data: bytes = b""):
    """A SHA-256 hash object (``hashlib.sha256``'s digests, byte for byte)."""
    try:
        from _sha256 import sha256 as make  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256 as make  # Python 3.12 and later
        except ImportError:
            from hashlib import sha256 as make
    return make(data)
