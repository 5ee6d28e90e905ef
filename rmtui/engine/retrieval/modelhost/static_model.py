"""The static first-pass model: wordllama's 256-dim token embeddings, averaged per text.

Why: a new root's transformer index takes about a minute per 10,000 passages on two cores,
and until it is complete a query could score only the few passages embedded so far. A
static model is a lookup table (no forward pass): every passage of that root is embedded
in about a second, with numpy alone, from weights the ``wordllama`` wheel ships, so it loads
offline. It is imported only when a root's index is incomplete (docs/architecture.md,
"The static first pass").
"""

from __future__ import annotations

import logging
import threading
from importlib import metadata
from pathlib import Path

import numpy as np

from rmtui.engine.errors import EngineError

#: The wordllama configuration and dimension used; they are part of the vectors' identity.
CONFIG = "l2_supercat"
DIM = 256
#: Texts per lookup batch (padded to the batch's longest: callers pass them length-sorted).
BATCH = 256


def identity() -> str:
    """The static model's identity for the vector cache: its package version, configuration
    and dimension (never the transformer's, so the two models' vectors never share a file)."""
    try:
        version = metadata.version("wordllama")
    except metadata.PackageNotFoundError:
        version = "missing"
    return f"static:wordllama-{version}:{CONFIG}-{DIM}"


class StaticEmbedder:
    """wordllama loaded from its own wheel (``disable_download``: never the network)."""

    def __init__(self) -> None:
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        try:
            import wordllama
        except ImportError as exc:
            raise EngineError(f"embedding.first_pass = \"static\" needs the wordllama package ({exc})") from exc
        finally:
            # wordllama's import calls logging.basicConfig(level=INFO): undo it, so that a
            # front's own logging (or its absence) is as it was
            for h in root.handlers[len(handlers):] if root.handlers[:len(handlers)] == handlers else []:
                root.removeHandler(h)
            root.setLevel(level)
        here = Path(wordllama.__file__).parent  # the wheel holds weights/ and tokenizers/
        try:
            self._model = wordllama.WordLlama.load(config=CONFIG, dim=DIM, cache_dir=here, disable_download=True)
        except (OSError, ValueError) as exc:
            raise EngineError(f"the static first-pass model could not be loaded from {here}: {exc}") from exc
        self.identity = identity()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text (a text with no known token: a zero row)."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), DIM), dtype=np.float32)
        got = self._model.embed([texts[i] for i in order], norm=False, batch_size=BATCH)
        out[np.asarray(order)] = got
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        out[(norms <= 0).ravel()] = 0.0
        return out


_LOADED: list[StaticEmbedder] = []
_LOCK = threading.Lock()


def static_embedder() -> StaticEmbedder:
    """This process's static model, loaded on first use (about half a second)."""
    with _LOCK:
        if not _LOADED:
            _LOADED.append(StaticEmbedder())
        return _LOADED[0]
