"""Where models and the local warm service live, readable without numpy or torch.

The headless CLI asks these questions on every call (which model folder, is a warm service
running for it, how to reach it), so they must stay cheap to import.
"""

from __future__ import annotations

from pathlib import Path

from rmtui.engine.errors import UsageError
from rmtui.engine.retrieval.modelhost import packaged_models, service_lookup
from rmtui.engine.retrieval.modelhost.service_lookup import (  # noqa: F401  (re-exported)
    RETRIEVE_ROUTE,
    TOKENS_ROUTE,
    code_stamp,
    read_state,
)

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def resolve_model_path(model: str | None, model_path: str | None) -> Path:
    """A local model folder; never a download. Names of packaged models resolve through
    ``packaged_models`` (the installed wheels), anything else must be a folder."""
    if model_path:
        p = Path(model_path).expanduser()
        if not p.is_dir():
            raise UsageError(f"embedding.model_path {p} is not a folder with a model")
        return p.resolve()
    name = model or DEFAULT_MODEL
    packaged = packaged_models.known(name)
    if packaged is not None:
        return packaged_models.model_folder(packaged)
    p = Path(name).expanduser()
    if p.is_dir():
        return p.resolve()
    names = ", ".join(m.name for m in packaged_models.MODELS)
    raise UsageError(f"embedding model {name!r} is neither a packaged model ({names}) nor a local folder; "
                     "set embedding.model_path (models are never downloaded at run time)")


def service_dir(model_path: Path, reranker_path: str | None, precision: str = "float32") -> Path:
    """Per user, model and precision: one warm service shared by every root that uses them."""
    return Path(service_lookup.service_dir(str(model_path), reranker_path, precision))


