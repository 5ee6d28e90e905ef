"""The static first pass (``embedding.first_pass = "static"``): while a new root's model index is
incomplete, every passage still has a dense score, from wordllama's static vectors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

from rmtui.engine.retrieval import retrieve as retrieve_mod
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.retrieve import dense_index, params_from_config, search
from rmtui.engine.retrieval.static_pass import MIN_GAP
from rmtui.engine.retrieval.vectors import KEY_DTYPE, VectorCache
from tests.retrieve_kit import write_small_root

pytest_plugins = ["tests.retrieve_kit"]

pytestmark = pytest.mark.usefixtures("static_model_loads")

#: Facts that share no word (nor stem) with the needs asked below, so only a dense score finds them.
FILLER = [
    f"- `fact-{i}` {text} → []" for i, text in enumerate([
        "The nightly backup job copies the Postgres dump to the cold storage bucket",
        "Release tags follow semantic versioning and are signed with the team key",
        "The frontend bundle is built with esbuild and served from the CDN edge",
        "Kafka consumers commit offsets only after the batch is written",
        "Oncall rotates every Monday at noon Lisbon time",
        "The staging cluster runs three worker nodes behind one load balancer",
        "Lint failures block merging; the formatter runs in a pre-commit hook",
        "Secrets live in the vault and are rotated every ninety days",
        "The search index is rebuilt from scratch every Sunday night",
        "Flaky integration tests are quarantined behind a marker until fixed",
        "Invoices are generated on the first day of each month in UTC",
        "The mobile app pins its API version in a request header",
    ])]


@pytest.fixture(scope="session")
def static_model_loads():
    """wordllama loads from its wheel, offline (it is a declared dependency: a failure is a defect)."""
    from rmtui.engine.retrieval.modelhost.static_model import static_embedder

    assert static_embedder().embed(["a dog"]).shape == (1, 256)


#: Words of the generated notes that make the root larger than the static pass's smallest gap.
WORDS = ("cache index parser retry token lock branch commit queue worker build deploy config schema "
         "vector latency timeout socket proxy thread fixture migration postgres redis docker image").split()


def write_root(root) -> None:
    """The small root, twelve facts, and generated build notes: more passages than
    ``static_pass.MIN_GAP``, as a new root has."""
    rnd = random.Random(5)
    write_small_root(root)
    notes = [f"- `note-{i}` {' '.join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 14))).capitalize()} → []"
             for i in range(MIN_GAP + 16)]
    with (root.path / "MEMORY_people.md").open("a", encoding="utf-8") as fh:
        fh.write("\n".join(FILLER + notes) + "\n")
    subprocess.run(["git", "-C", str(root.path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root.path), "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qm", "m"],
                   check=True)


def static_cache(root) -> VectorCache:
    from rmtui.engine.retrieval.modelhost.static_model import identity

    return VectorCache.open(root.runtime / "cache", identity())


def cold_search(root, need: str, backend, first_pass: str):
    """A first answer as a call sees it while the indexer runs: nothing embedded but the need."""
    cfg = root.config()
    corpus = load_corpus(root.path)
    params = replace(params_from_config(cfg), first_pass=first_pass)
    out = search(root, need, top=5, corpus=corpus, backend=backend, cfg=cfg, params=params, deadline=time.monotonic())
    return out, [corpus.entries[r.index].id for r in out.ranked]


def test_the_first_call_gives_every_passage_a_static_vector(root, plain_backend):
    write_root(root)
    out, _ = cold_search(root, "how are database backups kept", plain_backend, "static")
    cfg = root.config()
    keys = dense_index(load_corpus(root.path), params_from_config(cfg), root.runtime / "cache").keys
    static = static_cache(root)
    assert static.dim == 256 and static.rows(keys)[1] == []  # every passage, on disk
    model = VectorCache.open(root.runtime / "cache", plain_backend.info().embedding_model)
    assert len(model.rows(keys)[1]) == len(keys)  # the model's index has not started
    assert out.dense_coverage == 0.0 and out.mode == "hybrid"
    assert any("ranked by the static first pass" in w for w in out.warnings)


def test_a_cold_answer_finds_through_the_static_pass_what_shares_no_word_with_the_need(root, plain_backend):
    write_root(root)
    need = "which pet did someone get"  # Carol's puppy: no word of it in the node
    _, before = cold_search(root, need, plain_backend, "off")
    assert "carol-dog" not in before  # ranked lexically: nothing to find it by
    _, after = cold_search(root, need, plain_backend, "static")
    assert after[0] == "carol-dog"


def test_model_cosines_where_embedded_and_static_ranks_mapped_onto_them_elsewhere(root, plain_backend):
    """With a first call's share of the model's index present (the shortest passages), the
    dense channel keeps the model's cosines for those and gives every other passage the model's
    cosine of its static rank: the puppy, which the model has not embedded, is found."""
    write_root(root)
    cfg = root.config()
    corpus = load_corpus(root.path)
    params = replace(params_from_config(cfg), first_pass="static")
    cache_dir = root.runtime / "cache"
    index = dense_index(corpus, params, cache_dir)
    carol = next(i for i, e in enumerate(corpus.entries) if e.id == "carol-dog")
    by_length = sorted(range(len(index.keys)), key=lambda i: len(index.part(i)))
    have = [i for i in by_length if int(index.owner[i]) != carol][:16]
    blob = index.keys.tobytes()
    model = VectorCache.open(cache_dir, plain_backend.info().embedding_model)
    vecs = plain_backend.embed([index.part(i) for i in have], "passage")
    model.add({blob[32 * i:32 * i + 32]: v for i, v in zip(have, vecs, strict=True)})
    need = "which pet did someone get"
    q = plain_backend.embed([need], "query")[0]
    got = retrieve_mod.dense_scores(corpus, need, plain_backend, params, cache_dir, deadline=time.monotonic(),
                                    query=q, states=False)
    assert got.static and got.coverage == pytest.approx(16 / len(index.keys))
    np.testing.assert_allclose(got.per_passage[have], vecs @ q, atol=1e-5)  # the model's own cosines, as they are
    rest = np.setdiff1d(np.arange(len(index.keys)), have)
    assert int(index.owner[rest[np.argmax(got.per_passage[rest])]]) == carol  # first by its static rank ...
    assert got.scores[carol] <= float(np.max(vecs @ q)) + 1e-6  # ... on the model's scale, not wordllama's
    _, before = cold_search(root, need, plain_backend, "off")
    _, after = cold_search(root, need, plain_backend, "static")
    assert "carol-dog" not in before and "carol-dog" in after


def test_static_and_model_vectors_never_share_a_cache_file(root, plain_backend):
    write_root(root)
    cold_search(root, "who owns billing", plain_backend, "static")
    assert retrieve_mod.index_root(root, plain_backend)["state"] == "done"
    keys = dense_index(load_corpus(root.path), params_from_config(root.config()), root.runtime / "cache").keys
    static = static_cache(root)
    model = VectorCache.open(root.runtime / "cache", plain_backend.info().embedding_model)
    assert static.path != model.path and static.identity != model.identity
    assert static.identity.startswith("static:wordllama-")
    # each file names its own model in its header, and holds every passage at its own dimension
    for cache, dim in ((static, 256), (model, 384)):
        raw = cache.path.read_bytes()
        assert cache.identity.encode() in raw[:200] and cache.dim == dim and cache.rows(keys)[1] == []
    # a cache opened under one model's identity never reads the other's file
    other = VectorCache(static.path, model.identity)
    other.reload()
    assert other.dim == 0 and len(other.keys) == 0
    assert np.array_equal(np.sort(static.keys), np.sort(np.unique(keys.astype(KEY_DTYPE))))


def test_the_indexer_fills_the_static_pass_before_the_model(root, plain_backend):
    write_root(root)
    seen: list[int] = []

    class Watch:
        def info(self):
            return plain_backend.info()

        def embed(self, texts, kind):
            if kind == "passage" and not seen:
                seen.append(len(static_cache(root).keys))
            return plain_backend.embed(texts, kind)

        def embed_tokens(self, texts, kind):
            if kind == "passage" and not seen:
                seen.append(len(static_cache(root).keys))
            return plain_backend.embed_tokens(texts, kind)

    out = retrieve_mod.index_root(root, Watch())
    keys = dense_index(load_corpus(root.path), params_from_config(root.config()), root.runtime / "cache").keys
    assert out["static_indexed"] == len(set(keys.tolist())) and seen == [len(set(keys.tolist()))]
    # once the model's index is complete, a second indexing embeds nothing of either
    again = retrieve_mod.index_root(root, plain_backend)
    assert again["indexed"] == 0 and again["static_indexed"] == 0


def retrieve_fresh(root, need: str) -> dict:
    """``retrieve`` on the full path in a fresh interpreter (as the CLI runs it): the top ids,
    dense coverage, warnings, and whether wordllama was imported."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from rmtui.engine.memory.roots import MemoryRoot\n"
        "from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend\n"
        "from rmtui.engine.retrieval.retrieve import retrieve\n"
        "res = retrieve(MemoryRoot(Path(sys.argv[1])), 's1', sys.argv[2], top=3,\n"
        "               backend=InProcessBackend(), record=False)\n"
        "print(json.dumps({'ids': [r['id'] for r in res.results], 'cov': res.dense_coverage,\n"
        "                  'warnings': res.warnings, 'wordllama': 'wordllama' in sys.modules}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(root.path), need], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_complete_index_never_loads_the_static_model(root, plain_backend):
    """Speed: with the model's index complete, a retrieve answers as it did before the static
    pass existed, and does not import wordllama (in a fresh interpreter, so no other test's
    import hides one)."""
    write_root(root)
    retrieve_mod.index_root(root, plain_backend)
    got = retrieve_fresh(root, "who owns billing")
    assert got["cov"] == 1.0 and got["ids"][0] == "bob-role" and got["warnings"] == []
    assert got["wordllama"] is False


def test_a_few_passages_missing_are_left_to_the_model(root, plain_backend):
    """After an edit the model embeds the changed node within the query; the static model is not
    loaded for a gap of a few passages (in a fresh interpreter, as the CLI's full path runs)."""
    write_root(root)
    retrieve_mod.index_root(root, plain_backend)
    path = root.path / "MEMORY_people.md"
    path.write_text(path.read_text(encoding="utf-8").replace("golden retriever", "black labrador"), encoding="utf-8")
    got = retrieve_fresh(root, "which breed is the dog")
    assert got["cov"] == 1.0 and got["ids"][0] == "carol-dog" and got["wordllama"] is False


def test_an_unknown_first_pass_is_refused_naming_the_setting(root, cli):
    write_root(root)
    (root.path / "rmtui.toml").write_text('[embedding]\nfirst_pass = "fast"\n', encoding="utf-8")
    got = cli("--headless", "retrieve", "--root", str(root.path), "--session", "s1", "who owns billing")
    assert got.code == 2
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and "'embedding.first_pass' must be one of 'off', 'static'" in lines[0]
