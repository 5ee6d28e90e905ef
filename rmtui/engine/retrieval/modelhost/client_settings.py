"""What the thin retrieve client may rely on without parsing the configuration itself.

A full CLI retrieve that the local warm service answered records here, beside the root's
other runtime files, a digest of the exact bytes of both configuration files (as the loader
validated them, with nothing left to migrate) and the model folders it resolved. The thin
client (``rmtui.thin_client``) reads both files' bytes, and only when the digest still
matches does it hand the retrieval to the same service; any edit of either file, a changed
home folder or a missing record sends it down the full path, which validates, migrates and
records again. The same idea as the loader's own cache keyed by the files' bytes: reading
bytes costs microseconds and never misses a rewrite, unlike timestamps. Like every module
the thin client reads, it uses ``os.path`` and :mod:`rmtui.engine.lean`, not ``pathlib``,
``json`` or ``hashlib`` (docs/architecture.md, "The thin client").
"""

from __future__ import annotations

import os

from rmtui.engine.lean import loads, sha256

RECORD = os.path.join(".runtime", "cache", "warm-client.json")
#: The two configuration files, in the loader's order (``rightmemory.toml``, ``rmtui.toml``).
CONFIG_FILES = ("rightmemory.toml", "rmtui.toml")


def settings_digest(root: str | os.PathLike[str]) -> str:
    """Digest of what the settings depend on: both files' bytes (absent is not empty) and the
    home folder (a ``~`` in a model path)."""
    h = sha256(os.path.expanduser("~").encode("utf-8", "surrogateescape") + b"\0")
    for name in CONFIG_FILES:
        try:
            with open(os.path.join(root, name), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            h.update(b"absent\0")
            continue
        h.update(b"%d\0" % len(raw) + raw)
    return h.hexdigest()


def read_settings(root: str | os.PathLike[str], digest: str) -> dict | None:
    """The recorded settings when they were recorded for exactly ``digest``; else None."""
    try:
        with open(os.path.join(root, RECORD), encoding="utf-8") as f:
            rec = loads(f.read())
    except (OSError, ValueError):
        return None
    ok = (isinstance(rec, dict) and rec.get("version") == 1 and rec.get("digest") == digest
          and isinstance(rec.get("model"), str) and isinstance(rec.get("reranker"), (str, type(None)))
          and rec.get("precision", "float32") in ("float32", "int8"))
    return rec if ok else None


def record_settings(root: str | os.PathLike[str], digest: str, model: str | os.PathLike[str],
                    reranker: str | None, precision: str = "float32") -> None:
    """Record (when it changed) that ``digest``'s settings delegate to the service of ``model``
    at ``precision`` (a record without it was made before int8 existed: float32)."""
    rec = {"version": 1, "digest": digest, "model": os.fspath(model), "reranker": reranker, "precision": precision}
    if read_settings(root, digest) == rec:
        return
    import json
    from pathlib import Path

    from rmtui.engine.fsutil import atomic_write_text  # here: the thin client only reads

    path = Path(root) / RECORD
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(rec))
    except OSError:
        pass  # a read-only runtime folder: the thin client then always takes the full path
