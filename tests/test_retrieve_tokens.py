"""Token states for the second stage's MaxSim feature: the service route, the token store as
retrieval fills it, and a model host without token states (a foreign RightMemory service)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from werkzeug import Response

from rmtui.engine.retrieval import retrieve as retrieve_mod
from rmtui.engine.retrieval import stage2
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.modelhost.embed_client import ServiceClient, ServiceError
from rmtui.engine.retrieval.modelhost.service_state import TOKENS_ROUTE
from rmtui.engine.retrieval.ranking import dense_text
from rmtui.engine.retrieval.retrieve import dense_index, first_stage, params_from_config, search
from rmtui.engine.retrieval.tokens import TokenStore, quantize
from tests.retrieve_kit import PEOPLE, TOKEN, write_small_root
from tests.test_embed_service import call


def test_token_route_gives_vectors_and_int8_states(service, plain_backend):
    client = ServiceClient(service.url, TOKEN)
    texts = ["Bob owns the billing service", "a puppy named Biscuit"]
    got = client.embed_tokens(texts, "passage")
    assert got is not None
    vecs, states = got
    assert np.allclose(vecs, plain_backend.embed(texts, "passage"), atol=1e-5)
    _, mine = plain_backend.embed_tokens(texts, "passage")
    for theirs, local in zip(states, mine, strict=True):
        assert theirs.shape == local.shape and theirs.shape[1] == 384
        assert np.array_equal(quantize(theirs), quantize(local))  # int8 over the wire, exactly
    info = client.info()
    status, body = call(service.url, TOKENS_ROUTE, {"texts": ["x"], "kind": "document", "model": info.embedding_model})
    assert status == 422 and "kind" in body["detail"]
    status, body = call(service.url, TOKENS_ROUTE, {"texts": ["x"], "kind": "query", "model": "other@1"})
    assert status == 409
    status, body = call(service.url, TOKENS_ROUTE, {"texts": ["x"], "kind": "query", "model": info.embedding_model},
                        token="wrong")
    assert status == 401


def _foreign(httpserver, backend, *, states=None):
    """A RightMemory-style service: /info, /embed and /rerank only (``states``: answer the token
    route with this body instead of a 404)."""
    info = backend.info().to_json()
    httpserver.expect_request("/info").respond_with_json(info)

    def embed(request):
        body = json.loads(request.data)
        vecs = backend.embed(body["texts"], body["kind"])
        return Response(json.dumps({"model": info["embedding_model"], "vectors": vecs.tolist()}),
                        content_type="application/json")

    httpserver.expect_request("/embed", method="POST").respond_with_handler(embed)
    httpserver.expect_request(TOKENS_ROUTE, method="POST").respond_with_json(
        states if states is not None else {"detail": "not found"}, status=200 if states is not None else 404)
    return ServiceClient(httpserver.url_for("/").rstrip("/"), None)


def test_a_service_without_token_states_ranks_with_the_plain_weights(root, plain_backend, httpserver, monkeypatch):
    write_small_root(root)
    foreign = _foreign(httpserver, plain_backend)
    corpus = load_corpus(root.path)
    cfg = root.config()
    params = params_from_config(cfg)
    first = first_stage(root, "who owns billing", corpus=corpus, backend=foreign, params=params)
    assert first.mode == "hybrid" and first.signals is not None
    assert first.signals.need_states is None and first.signals.states is None
    assert not (root.runtime / "cache" / "tokens").exists()  # nothing stored for a host without token states
    used: list[tuple[str, ...]] = []
    real = stage2.features

    def spy(corpus, sig, fused, cand, states=None, **kw):
        out = real(corpus, sig, fused, cand, states, **kw)
        used.append(stage2.FEATURES + (stage2.TOKEN_FEATURES if states is not None else ()))
        return out

    monkeypatch.setattr(stage2, "features", spy)
    out = search(root, "who owns billing", top=3, corpus=corpus, backend=foreign, cfg=cfg)
    assert "bob-role" in [corpus.entries[r.index].id for r in out.ranked]
    assert used == [stage2.FEATURES]  # the weights fitted without MaxSim
    used.clear()
    out = search(root, "who owns billing", top=3, corpus=corpus, backend=plain_backend, cfg=cfg)
    assert used == [stage2.FEATURES + stage2.TOKEN_FEATURES]  # the same root, now with token states
    assert [corpus.entries[r.index].id for r in out.ranked][0] == "bob-role"


def test_malformed_token_states_are_a_clear_error(plain_backend, httpserver):
    info = plain_backend.info()
    bad = {"model": info.embedding_model, "vectors": [[1.0] + [0.0] * (info.dimensions - 1)],
           "states": [{"count": 2, "int8": base64.b64encode(b"\x01" * 7).decode()}]}
    foreign = _foreign(httpserver, plain_backend, states=bad)
    with pytest.raises(ServiceError, match="malformed token states"):
        foreign.embed_tokens(["x"], "query")
    httpserver.clear()
    foreign = _foreign(httpserver, plain_backend, states={**bad, "states": [{"count": 1, "int8": "%%%"}]})
    with pytest.raises(ServiceError, match="malformed token states"):
        foreign.embed_tokens(["x"], "query")


def test_token_states_are_stored_once_and_a_change_appends_one_record(root, plain_backend):
    write_small_root(root)
    cfg = root.config()
    params = params_from_config(cfg)
    cache = root.runtime / "cache"
    search(root, "who owns billing", top=3, corpus=load_corpus(root.path), backend=plain_backend, cfg=cfg)
    identity = plain_backend.info().embedding_model
    store = TokenStore.open(cache, identity)
    index = dense_index(load_corpus(root.path), params, cache)
    assert store.missing(index.keys) == [] and len(index.keys) >= 6
    (data,) = (cache / "tokens").glob("*.dat")
    before = data.read_bytes()
    # one node changes: one new passage, one record appended, the rest of the data untouched
    (root.path / "MEMORY_people.md").write_text(PEOPLE.replace("billing service", "invoicing service"))
    corpus = load_corpus(root.path)
    out = search(root, "who owns invoicing", top=3, corpus=corpus, backend=plain_backend, cfg=cfg)
    assert corpus.entries[out.ranked[0].index].id == "bob-role"
    after = data.read_bytes()
    assert after[:len(before)] == before
    changed = next(i for i, e in enumerate(corpus.entries) if e.id == "bob-role")
    tokens = plain_backend.embed_tokens([dense_text(corpus, changed, params)], "passage")[1]
    assert len(after) - len(before) == tokens[0].shape[0] * 384
    assert TokenStore.open(cache, identity).missing(dense_index(corpus, params, cache).keys) == []


def test_a_root_cached_before_token_states_gets_them_in_the_background(root, plain_backend, httpserver,
                                                                       monkeypatch):
    """A root whose vectors were cached by an older rmtui (or a foreign service): a query does
    not spend its budget on token states; it spawns the indexer, which fills them."""
    write_small_root(root)
    cfg = root.config()
    corpus = load_corpus(root.path)
    search(root, "dog name", top=3, corpus=corpus, backend=_foreign(httpserver, plain_backend), cfg=cfg)
    cache = root.runtime / "cache"
    index = dense_index(corpus, params_from_config(cfg), cache)
    identity = plain_backend.info().embedding_model
    assert len(TokenStore.open(cache, identity).missing(index.keys)) == len(index.keys)  # vectors only so far
    spawned: list[str] = []
    monkeypatch.setattr(retrieve_mod, "spawn_indexer", lambda r: spawned.append(str(r.path)) or True)
    res = retrieve_mod.retrieve(root, "s1", "dog name", top=3, backend=plain_backend, record=False)
    assert res.results[0]["id"] == "carol-dog" and res.mode == "hybrid"
    assert len(TokenStore.open(cache, identity).missing(index.keys)) == len(index.keys)  # not in the query
    assert spawned == [str(root.path)]
    assert retrieve_mod.index_root(root, plain_backend)["state"] == "done"
    assert TokenStore.open(cache, identity).missing(index.keys) == []
    spawned.clear()
    retrieve_mod.retrieve(root, "s2", "dog name", top=3, backend=plain_backend, record=False)
    assert spawned == []  # complete: no indexer
    first = first_stage(root, "dog name", corpus=corpus, backend=plain_backend, params=params_from_config(cfg))
    assert first.signals is not None and first.states_missing == 0
    assert stage2.token_states(first.signals, stage2.candidates(np.asarray(first.dense))) is not None


def test_without_the_learned_stage_no_token_states_are_stored(root, plain_backend):
    write_small_root(root)
    (root.path / "rmtui.toml").write_text("[retrieve]\nlearned_rerank = false\n", encoding="utf-8")
    res = retrieve_mod.retrieve(root, "s1", "who owns billing", top=3, backend=plain_backend, record=False)
    assert res.mode == "hybrid" and res.results
    assert retrieve_mod.index_root(root, plain_backend)["state"] == "done"
    assert any((root.runtime / "cache" / "vectors").glob("*.bin"))
    assert not (root.runtime / "cache" / "tokens").exists()
