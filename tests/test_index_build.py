"""The whole dense index of a root: what the model is fed when a new root is embedded, and
that the way it is fed leaves every vector and token state as the model gives it alone."""

from __future__ import annotations

import random

import numpy as np

from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.retrieve import dense_index, fill_vectors, index_root, params_from_config, token_store
from rmtui.engine.retrieval.tokens import TokenStore, quantize
from rmtui.engine.retrieval.vectors import VectorCache

WORDS = ("cache index parser retry token lock branch commit queue worker build deploy config schema model "
         "vector latency timeout socket proxy thread fixture migration postgres redis docker image "
         "idempotency zstd qdrant memoization kubectl xfs ebpf").split()


class Recorder:
    """The real model host, with a note of every request the index build sends it."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.requests: list[list[str]] = []

    def info(self):
        return self.backend.info()

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        self.requests.append(list(texts))
        return self.backend.embed(texts, kind)

    def embed_tokens(self, texts: list[str], kind: str):
        self.requests.append(list(texts))
        return self.backend.embed_tokens(texts, kind)


def write_mixed_root(root, nodes: int = 192) -> None:
    """Nodes of a few words to a long paragraph, lengths at random in file order, some words rare."""
    rnd = random.Random(3)
    lines = ["# Memory", "", "## Notes {F#notes}", ""]
    body = []
    for i in range(nodes):
        n = rnd.randint(3, 70)
        body.append(f"- `n-{i}` {' '.join(rnd.choice(WORDS) for _ in range(n)).capitalize()}. → []")
    (root.path / "MEMORY.md").write_text("\n".join(lines) + "\n")
    (root.path / "MEMORY_notes.md").write_text("\n".join(body) + "\n")


def test_a_new_root_is_fed_to_the_model_in_length_sorted_batches_with_the_same_vectors(root, plain_backend):
    write_mixed_root(root)
    params = params_from_config(root.config())
    cache_dir = root.runtime / "cache"
    index = dense_index(load_corpus(root.path), params, cache_dir)
    identity = plain_backend.info().embedding_model
    rec = Recorder(plain_backend)
    done = fill_vectors(VectorCache.open(cache_dir, identity), index, rec, deadline=None,
                        tokens=token_store(cache_dir, rec, identity))
    assert done == len(index.keys) >= 190

    # requests go shortest first and do not overlap in length: at 10,000 passages each request
    # (and each forward pass in it) holds texts of about one length, so the model pads little
    assert len(rec.requests) >= 3
    spans = [(min(map(len, texts)), max(map(len, texts))) for texts in rec.requests]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans

    # and every passage's vector and token states are the ones it gets embedded alone
    cache = VectorCache.open(cache_dir, identity)
    store = TokenStore.open(cache_dir, identity)
    rows, missing = cache.rows(index.keys)
    assert missing == []
    texts = [index.part(i) for i in range(len(index.keys))]
    for i in range(0, len(texts), 17):
        vec, states = plain_backend.embed_tokens([texts[i]], "passage")
        got = np.asarray(cache.matrix[rows[i]], dtype=np.float32)
        assert float(got @ vec[0]) > 0.99999
        stored = np.asarray(store.get(index.keys[i:i + 1])[0], dtype=np.int16)
        assert stored.shape == states[0].shape
        assert np.abs(stored - quantize(states[0]).astype(np.int16)).max() <= 1


def test_the_background_index_orders_requests_by_the_models_own_token_counts(root, plain_backend):
    """Text length only roughly follows token counts (a rare word is several word pieces): the
    index build counts tokens with the model's tokenizer, so no two requests overlap in them."""
    write_mixed_root(root)
    rec = Recorder(plain_backend)
    out = index_root(root, rec)
    assert out["state"] == "done" and out["indexed"] >= 190
    tok = plain_backend.embedder.tokenizer
    spans = []
    for texts in rec.requests:
        counts = [len(e.ids) for e in tok.encode_batch(texts)]
        spans.append((min(counts), max(counts)))
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
