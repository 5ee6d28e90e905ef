"""Where the local warm service of a model is and how to reach it, with ``os.path`` and
:mod:`rmtui.engine.lean` only: the thin retrieve client asks this on every call
(docs/architecture.md, "The thin client"), and ``service_state`` answers the full path with
the same functions. Paths are strings here.
"""

from __future__ import annotations

import os

from rmtui.engine.lean import loads, sha256

RETRIEVE_ROUTE = "/rmtui/retrieve"
#: rmtui's own route: vectors and int8 token states from one forward pass (the second stage's
#: MaxSim feature); a foreign RightMemory service answers 404 and the feature is left out.
TOKENS_ROUTE = "/rmtui/tokens"


def services_top() -> str:
    """The user's folder of resident processes (warm services, the MCP fork server), one
    state folder each: ``$RMTUI_SERVICE_DIR`` (tests and benches), else the runtime dir."""
    base = os.environ.get("RMTUI_SERVICE_DIR")
    if base:
        return base
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "rmtui", "embedding-services")
    return os.path.join(os.path.expanduser("~"), ".cache", "rmtui", "embedding-services")


def service_dir(model_path: str, reranker_path: str | None) -> str:
    """Per user and model: one warm service shared by every root that uses the same model."""
    key = sha256(f"{model_path}\0{reranker_path or ''}\0{code_stamp()}".encode()).hexdigest()[:16]
    return os.path.join(services_top(), key)


_CODE_STAMP: str | None = None


def code_stamp() -> str:
    """The engine's code as installed (each module's path, size and mtime): a warm service
    started by other code (an upgrade, an edit) is not this code's service, so a CLI never
    hands its retrieval to a service that would rank by rules it no longer has; the old
    service exits when idle. Stat-only, well under a millisecond."""
    global _CODE_STAMP
    if _CODE_STAMP is None:
        digest = sha256()
        engine = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
        folders = [("", engine)]  # (relative prefix, folder)
        while folders:  # every thin retrieve pays this walk: scandir's entries, no path arithmetic
            rel, folder = folders.pop()
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                if e.name.endswith(".py") and e.is_file():
                    st = e.stat()
                    digest.update(f"{rel}{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
            folders.extend((f"{rel}{e.name}/", e.path) for e in reversed(entries)
                           if e.name != "__pycache__" and e.is_dir(follow_symlinks=False))
        _CODE_STAMP = digest.hexdigest()
    return _CODE_STAMP


def read_state(state_dir: str | os.PathLike[str]) -> dict | None:
    """The running service's ``state.json`` (its url and token), or None."""
    try:
        with open(os.path.join(state_dir, "state.json"), encoding="utf-8") as f:
            st = loads(f.read())
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) and isinstance(st.get("url"), str) else None
