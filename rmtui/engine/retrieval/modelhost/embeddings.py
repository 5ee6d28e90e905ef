"""Model adapters: dense embedders and cross-encoder rerankers loaded from local paths.

torch and sentence-transformers are imported here lazily, inside the adapters, and only
by processes that run a model in-process (the embedding service, the MCP server, the TUI,
the benchmark). The headless CLI talks to a service instead (see ``embed_service``).

An embedder runs on one of two runtimes (``embedding.backend``, :func:`load_embedder`):
ONNX Runtime from a cached export of the model (``onnx_model``: starts in a fraction of a
second, never imports torch), or sentence-transformers on torch (any model, and the
fallback when a model cannot be exported). ``auto`` takes ONNX whenever an export exists
or can be made. Cross-encoder rerankers always run on torch.

A model's identity is derived from its files (names, sizes, SHA-256), the adapter and the
library version: the vector cache and the service API key on it, so a changed model can
never be mixed with vectors of another.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.retrieval.modelhost import device as devices
from rmtui.engine.retrieval.modelhost.model_cache import model_identity
from rmtui.engine.retrieval.modelhost.model_info import ModelInfo  # noqa: F401  (re-exported)
from rmtui.engine.retrieval.modelhost.service_state import DEFAULT_MODEL, resolve_model_path  # noqa: F401  (re-exported)

EMBED_BATCH = devices.CPU_REQUEST_BATCH
MAX_CANDIDATES = 200
#: ``embedding.backend`` values: ONNX when an export exists or can be made, else torch; or one of them.
BACKENDS = ("auto", "onnx", "torch")
#: ``embedding.precision`` values: the model as published, or its weights quantised to int8
#: (ONNX Runtime on the CPU only; another model identity, so its vectors are cached apart)
PRECISIONS = ("float32", "int8")


class Embedder(Protocol):
    """A dense bi-encoder, whichever runtime runs it."""

    identity: str
    dimensions: int
    max_batch_size: int
    runtime: str

    def encode(self, texts: list[str], kind: str) -> np.ndarray: ...

    def encode_tokens(self, texts: list[str], kind: str) -> tuple[np.ndarray, list[np.ndarray]]: ...


class DenseBackend(Protocol):
    """What retrieval needs from a model host, local or remote."""

    def info(self) -> ModelInfo: ...
    def embed(self, texts: list[str], kind: str) -> np.ndarray: ...
    def rerank(self, query: str, documents: list[str]) -> list[int]: ...


def _torch_threads() -> None:
    import torch

    torch.set_grad_enabled(False)


class SentenceEmbedder:
    """A sentence-transformers bi-encoder from a local folder; vectors L2-normalised."""

    adapter = "sentence-transformers"
    runtime = "torch"

    def __init__(self, path: Path, device: str = "cpu", *, identity: str | None = None) -> None:
        from sentence_transformers import SentenceTransformer

        _torch_threads()
        self.path = Path(path)
        self.device = device
        self.model = SentenceTransformer(str(path), device=device, local_files_only=True)
        dim = self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") \
            else self.model.get_sentence_embedding_dimension()
        if dim is None:
            raise UsageError(f"embedding model {path} does not declare its embedding dimension")
        self.dimensions = int(dim)
        self.max_batch_size = devices.request_batch(device)
        self._batch = devices.encode_batch(device)
        self.identity = identity or model_identity(self.path, self.adapter)
        self._lock = threading.Lock()

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        if kind not in ("query", "passage"):
            raise ValueError("kind must be 'query' or 'passage'")
        with self._lock:
            fn = self.model.encode_query if kind == "query" else self.model.encode_document
            vecs = fn(texts, batch_size=self._batch, normalize_embeddings=True, convert_to_numpy=True,
                      show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)

    def encode_tokens(self, texts: list[str], kind: str) -> tuple[np.ndarray, list[np.ndarray]]:
        """As ``OnnxEmbedder.encode_tokens``: vectors and token states (special tokens left out)."""
        from rmtui.engine.retrieval.modelhost.onnx_model import unit_rows

        if kind not in ("query", "passage"):
            raise ValueError("kind must be 'query' or 'passage'")
        with self._lock:
            fn = self.model.encode_query if kind == "query" else self.model.encode_document
            got = fn(texts, batch_size=self._batch, output_value=None, convert_to_numpy=True, show_progress_bar=False)
            tok = self.model.tokenizer
        special = set(tok.all_special_ids)
        vecs = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        states: list[np.ndarray] = []
        for i, item in enumerate(got):
            vecs[i] = unit_rows(item["sentence_embedding"].float().cpu().numpy()[None])[0]
            hidden = item["token_embeddings"].float().cpu().numpy()
            ids = item["input_ids"].cpu().tolist()[:len(hidden)]
            states.append(unit_rows(hidden[[j for j, t in enumerate(ids) if t not in special]]))
        return vecs, states


def load_embedder(path: Path, backend: str = "auto", device: str = "cpu", precision: str = "float32") -> Embedder:
    """The embedder of the model at ``path`` on the runtime ``backend`` asks for (see :data:`BACKENDS`).

    ``auto`` uses the ONNX export (made once, in a helper process, when missing) and falls
    back to torch, saying why, when the model cannot be exported; ``onnx`` makes that an
    error; ``torch`` never looks for an export. ``precision = "int8"`` runs the export's
    int8 quantisation (made once from it), on ONNX Runtime only: anything else is an error,
    never a silent float32 model.
    """
    if backend not in BACKENDS:
        raise UsageError(f"embedding.backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if precision not in PRECISIONS:
        raise UsageError(f"embedding.precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "int8":
        return _load_int8(Path(path), backend, device)
    if backend == "torch" or (backend == "auto" and device != "cpu"):
        return SentenceEmbedder(path, device)
    from rmtui.engine.retrieval.modelhost import onnx_model

    identity = model_identity(Path(path), SentenceEmbedder.adapter)
    try:
        return onnx_model.load_onnx_embedder(Path(path), identity)
    except (onnx_model.ExportUnsupported, onnx_model.ExportDamaged) as exc:
        if backend == "onnx":
            raise UnavailableError(f'embedding.backend = "onnx", but the model cannot run on ONNX Runtime: {exc}; '
                                   'set embedding.backend = "auto" or "torch" in rmtui.toml') from exc
        onnx_model.say(f"the embedding model runs on torch (slower to start): {exc}")
    return SentenceEmbedder(path, device, identity=identity)


def _load_int8(path: Path, backend: str, device: str) -> Embedder:
    if backend == "torch" or device != "cpu":
        where = 'embedding.backend = "torch"' if backend == "torch" else f"the device {device}"
        raise UsageError(f'embedding.precision = "int8" runs on ONNX Runtime on the CPU, not on {where}; '
                         'set embedding.precision = "float32" or embedding.backend = "auto" and embedding.device = '
                         '"cpu" in rmtui.toml')
    from rmtui.engine.retrieval.modelhost import onnx_model

    identity = model_identity(path, SentenceEmbedder.adapter)
    try:
        return onnx_model.load_int8_embedder(path, identity)
    except (onnx_model.ExportUnsupported, onnx_model.ExportDamaged) as exc:
        raise UnavailableError(f'embedding.precision = "int8", but the model has no int8 ONNX form: {exc}; '
                               'set embedding.precision = "float32" in rmtui.toml') from exc


class CrossEncoderReranker:
    """A cross-encoder from a local folder: scores (query, passage) pairs jointly."""

    adapter = "cross-encoder"
    is_cross_encoder = True

    def __init__(self, path: Path, device: str = "cpu") -> None:
        from sentence_transformers import CrossEncoder

        _torch_threads()
        p = Path(path).expanduser()
        if not p.is_dir():
            raise UsageError(f"embedding.reranker_path {p} is not a folder with a model")
        self.path = p.resolve()
        self.model = CrossEncoder(str(self.path), device=device, local_files_only=True)
        self.max_candidates = MAX_CANDIDATES
        self.identity = model_identity(self.path, self.adapter)
        self._lock = threading.Lock()

    def scores(self, query: str, documents: list[str]) -> np.ndarray:
        with self._lock:
            s = self.model.predict([(query, d) for d in documents], batch_size=16, show_progress_bar=False,
                                   convert_to_numpy=True)
        return np.asarray(s, dtype=np.float32).reshape(len(documents), -1)[:, 0]

    def rerank(self, query: str, documents: list[str]) -> list[int]:
        s = self.scores(query, documents)
        return sorted(range(len(documents)), key=lambda i: (-float(s[i]), i))


class DenseReranker:
    """Without a cross-encoder, /rerank orders by the embedder's own cosine similarity.

    It keeps the RightMemory API whole for clients that always rerank; rmtui's own
    retrieval skips it (it already has these scores) and reranks only with a cross-encoder.
    """

    is_cross_encoder = False

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.max_candidates = MAX_CANDIDATES
        self.identity = f"cosine:{embedder.identity}"

    def rerank(self, query: str, documents: list[str]) -> list[int]:
        q = self.embedder.encode([query], "query")[0]
        d = self.embedder.encode(documents, "passage")
        s = d @ q
        return sorted(range(len(documents)), key=lambda i: (-float(s[i]), i))


def _require_cuda(device: str) -> None:
    """A GPU asked for by name must be there: say so rather than fail deep inside torch."""
    import torch

    if not torch.cuda.is_available():
        raise UnavailableError(f'embedding.device = "{device}", but torch sees no CUDA GPU here '
                               f'(torch {torch.__version__}); set embedding.device = "auto" or "cpu" in rmtui.toml, '
                               "or install PyTorch's CUDA build (scripts/install.sh --gpu)")
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise UnavailableError(f'embedding.device = "{device}", but torch sees {torch.cuda.device_count()} GPU(s)')


class InProcessBackend:
    """Models held in this process (service, MCP server, TUI, bench): same interface as the client."""

    def __init__(self, model: str | None = None, model_path: str | None = None,
                 reranker_path: str | None = None, device: str = "cpu", backend: str = "auto",
                 precision: str = "float32") -> None:
        """``device``: ``cpu``, ``cuda``, ``cuda:N``, or ``auto`` (:func:`device.resolve_device`);
        ``precision``: :data:`PRECISIONS` (``int8``: the CPU, so ``auto`` does not look for a GPU)."""
        try:
            device = "cpu" if precision == "int8" and device == "auto" else devices.resolve_device(device)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        if devices.is_gpu(device):
            _require_cuda(device)
        self.device = device
        self.embedder: Embedder = load_embedder(resolve_model_path(model, model_path), backend, device, precision)
        self.reranker: CrossEncoderReranker | DenseReranker = (
            CrossEncoderReranker(Path(reranker_path), device) if reranker_path else DenseReranker(self.embedder))

    @classmethod
    def from_config(cls, cfg) -> InProcessBackend:
        return cls(cfg.get("embedding.model"), cfg.get("embedding.model_path"), cfg.get("embedding.reranker_path"),
                   device=cfg.get("embedding.device"), backend=cfg.get("embedding.backend"),
                   precision=cfg.get("embedding.precision"))

    @property
    def runtime(self) -> str:
        """What runs the embedder: ``onnx`` or ``torch``."""
        return self.embedder.runtime

    def info(self) -> ModelInfo:
        return ModelInfo(self.embedder.identity, self.reranker.identity, self.embedder.dimensions,
                         self.embedder.max_batch_size, self.reranker.max_candidates,
                         self.reranker.is_cross_encoder)

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        out = []
        for i in range(0, len(texts), self.embedder.max_batch_size):
            out.append(self.embedder.encode(texts[i:i + self.embedder.max_batch_size], kind))
        return np.concatenate(out) if out else np.zeros((0, self.embedder.dimensions), np.float32)

    def embed_tokens(self, texts: list[str], kind: str) -> tuple[np.ndarray, list[np.ndarray]]:
        """Vectors and token states from one forward pass (see ``OnnxEmbedder.encode_tokens``)."""
        vecs, states = [], []
        for i in range(0, len(texts), self.embedder.max_batch_size):
            v, st = self.embedder.encode_tokens(texts[i:i + self.embedder.max_batch_size], kind)
            vecs.append(v)
            states.extend(st)
        return (np.concatenate(vecs) if vecs else np.zeros((0, self.embedder.dimensions), np.float32)), states

    def rerank(self, query: str, documents: list[str]) -> list[int]:
        return self.reranker.rerank(query, documents)

    def warm_up(self) -> None:
        self.embedder.encode(["Warm up retrieval."], "query")
        self.reranker.rerank("Find relevant memory.", ["A relevant memory."])
