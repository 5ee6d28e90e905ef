"""The embedding service speaks the RightMemory HTTP API: contract, auth, identity, limits."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from rmtui.engine.errors import ConflictError
from rmtui.engine.retrieval.modelhost.embed_service import ServiceClient, ServiceError
from tests.retrieve_kit import TOKEN, ServerThread


def call(url: str, route: str, payload=None, token: str | None = TOKEN, raw: bytes | None = None):
    """A plain urllib client, shaped like RightMemory's own (no rmtui code involved)."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = raw
    if payload is not None:
        data = json.dumps(payload).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url + route, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_info_document(service):
    status, info = call(service.url, "/info")
    assert status == 200
    assert info["version"] == 1
    assert info["embedding_model"].startswith("all-minilm-l6-v2@")
    assert info["reranker_model"] == "cosine:" + info["embedding_model"]
    assert info["dimensions"] == 384 and info["max_batch_size"] >= 1 and info["max_candidates"] >= 1


def test_embed_and_rerank_answer_like_rightmemory(service):
    _, info = call(service.url, "/info")
    status, out = call(service.url, "/embed", {"texts": ["a puppy", "a dog", "tax law"], "kind": "passage",
                                                "model": info["embedding_model"]})
    assert status == 200 and out["model"] == info["embedding_model"]
    v = np.asarray(out["vectors"])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-3)
    assert v[0] @ v[1] > v[0] @ v[2]  # a real model: puppy is nearer to dog than to tax law
    status, out = call(service.url, "/rerank", {"query": "young dog", "documents": ["tax law", "a puppy"],
                                                 "model": info["reranker_model"]})
    assert status == 200 and out == {"model": info["reranker_model"], "indices": [1, 0]}


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_wrong_or_missing_token_is_401(service, token):
    for route, payload in (("/info", None), ("/embed", {"texts": ["x"], "kind": "query", "model": "m"})):
        status, body = call(service.url, route, payload, token=token)
        assert status == 401 and "credentials" in body["detail"]


def test_model_identity_mismatch_is_409(service):
    status, body = call(service.url, "/embed", {"texts": ["x"], "kind": "query", "model": "other-model@123"})
    assert status == 409 and "retry" in body["detail"]
    status, body = call(service.url, "/rerank", {"query": "q", "documents": ["d"], "model": "other"})
    assert status == 409


def test_malformed_requests_and_limits_are_422(service):
    _, info = call(service.url, "/info")
    m = info["embedding_model"]
    bad = [
        {"texts": ["x"], "kind": "query"},  # missing model
        {"texts": ["x"], "kind": "query", "model": m, "extra": 1},  # extra key
        {"texts": [], "kind": "query", "model": m},  # empty list
        {"texts": ["  "], "kind": "query", "model": m},  # blank text
        {"texts": ["x"], "kind": "document", "model": m},  # bad kind
        {"texts": "x", "kind": "query", "model": m},  # not a list
        {"texts": ["x"] * (info["max_batch_size"] + 1), "kind": "passage", "model": m},  # over the batch limit
    ]
    for payload in bad:
        status, body = call(service.url, "/embed", payload)
        assert status == 422, payload
        assert body["detail"]
    status, _ = call(service.url, "/embed", raw=b"{not json")
    assert status == 422
    status, _ = call(service.url, "/rerank", {"query": "q", "documents": ["d"] * (info["max_candidates"] + 1),
                                               "model": info["reranker_model"]})
    assert status == 422


def test_our_client_validates_and_maps_errors(service):
    client = ServiceClient(service.url, TOKEN)
    info = client.info()
    vecs = client.embed(["alpha"] * (info.max_batch_size + 3), "passage")  # batched transparently
    assert vecs.shape == (info.max_batch_size + 3, 384)
    assert client.rerank("puppy", ["tax", "dog"]) == [1, 0]
    with pytest.raises(ServiceError) as exc:
        ServiceClient(service.url, "nope").info()
    assert exc.value.status == 401 and exc.value.exit_code == 4
    client._info = type(info)(**{**info.__dict__, "embedding_model": "stale@0"})
    with pytest.raises(ConflictError):
        client.embed(["x"], "query")


def test_unreachable_service_is_unavailable():
    with pytest.raises(ServiceError) as exc:
        ServiceClient("http://127.0.0.1:9", None, timeout=2).info()
    assert exc.value.exit_code == 4


def test_cross_encoder_reranker_plumbing(backend, tiny_reranker):
    """A cross-encoder loaded from a local path serves /rerank (random weights: plumbing only)."""
    srv = ServerThread(backend, None)
    try:
        status, info = call(srv.url, "/info", token=None)
        assert info["cross_encoder"] is True and info["reranker_model"].startswith(tiny_reranker.name)
        docs = ["first passage", "second passage", "third passage"]
        status, out = call(srv.url, "/rerank", {"query": "q", "documents": docs, "model": info["reranker_model"]},
                           token=None)
        assert status == 200 and sorted(out["indices"]) == [0, 1, 2]
        scores = backend.reranker.scores("q", docs)
        assert out["indices"] == sorted(range(3), key=lambda i: -scores[i])
    finally:
        srv.stop()
