"""``embedding.precision = "int8"``: the ONNX export's weights quantised, as another model.

Its vectors differ from the float32 model's (a little), so it is another model identity: its own
vector cache and token store, its own warm service. These tests make the int8 export once per
session, from a copy of the float32 export, in a temporary cache.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rmtui.engine.errors import UsageError
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.modelhost import onnx_model
from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend, load_embedder
from rmtui.engine.retrieval.modelhost.model_cache import CACHE_ENV, model_identity
from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path
from rmtui.engine.retrieval.retrieve import dense_index, index_root, params_from_config, search
from rmtui.engine.retrieval.tokens import TokenStore
from rmtui.engine.retrieval.vectors import VectorCache
from tests.retrieve_kit import write_small_root


@pytest.fixture(scope="session")
def int8_cache(tmp_path_factory) -> Path:
    """A model cache holding the float32 export (copied) and the int8 one made from it."""
    path = resolve_model_path(None, None)
    identity = model_identity(path, "sentence-transformers")
    src = onnx_model.load_onnx_embedder(path, identity, log=lambda _m: None).folder
    cache = tmp_path_factory.mktemp("int8-cache")
    shutil.copytree(src, cache / src.name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(cache))
        onnx_model.load_int8_embedder(path, identity, log=lambda _m: None)
    return cache


@pytest.fixture
def int8_env(int8_cache, monkeypatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(int8_cache))
    return int8_cache


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def test_int8_is_another_model_and_never_reads_float32_vectors(int8_env, root):
    write_small_root(root)
    fp32, int8 = InProcessBackend(), InProcessBackend(precision="int8")
    ident32, ident8 = fp32.info().embedding_model, int8.info().embedding_model
    assert int8.runtime == "onnx" and ident8.startswith(f"{ident32}+int8-")
    cache = root.runtime / "cache"
    first = index_root(root, fp32)
    assert first["indexed"] >= 6 and first["model"] == ident32
    before = {name: _files(cache / name) for name in ("vectors", "tokens")}

    params = params_from_config(root.config())
    keys = dense_index(load_corpus(root.path), params, cache).keys
    assert VectorCache.open(cache, ident8).rows(keys)[1] == list(range(len(keys)))  # nothing of float32's
    assert TokenStore.open(cache, ident8).missing(keys) == list(range(len(keys)))
    again = index_root(root, int8)
    assert again["indexed"] == first["indexed"] and again["model"] == ident8  # every passage embedded anew
    for name, files in before.items():  # the float32 caches untouched, the int8 ones beside them
        after = _files(cache / name)
        assert {k: v for k, v in after.items() if k in files} == files and len(after) > len(files)

    v32 = VectorCache.open(cache, ident32)
    v8 = VectorCache.open(cache, ident8)
    a = v32.matrix[v32.rows(keys)[0]]
    b = v8.matrix[v8.rows(keys)[0]]
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.95 and np.abs(a - b).max() > 1e-3  # close, and not the same vectors
    out = search(root, "who owns billing", top=3, corpus=load_corpus(root.path), backend=int8, cfg=root.config())
    assert load_corpus(root.path).entries[out.ranked[0].index].id == "bob-role"


def test_a_damaged_int8_model_is_made_again(int8_env, tmp_path, monkeypatch):
    path = resolve_model_path(None, None)
    identity = model_identity(path, "sentence-transformers")
    cache = tmp_path / "cache"
    shutil.copytree(int8_env, cache)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    folder = onnx_model.find_int8(identity)
    assert folder is not None and folder.parent == cache
    good = load_embedder(path, precision="int8")
    model = folder / onnx_model.MODEL_FILE
    model.write_bytes(model.read_bytes()[:-1000])  # truncated
    said: list[str] = []
    again = onnx_model.load_int8_embedder(path, identity, log=said.append)
    assert any("damaged" in s for s in said)
    assert again.identity == good.identity  # the quantisation is deterministic: the same model again
    texts = ["Bob owns the billing service", "a puppy named Biscuit"]
    assert np.allclose(again.encode(texts, "passage"), good.encode(texts, "passage"), atol=1e-6)
    man = json.loads((folder / onnx_model.MANIFEST).read_text())
    assert man["base_identity"] == identity and man["float32_min_cosine"] > onnx_model.INT8_MIN_COSINE


def test_int8_runs_on_onnx_on_the_cpu_only(int8_env, root):
    path = resolve_model_path(None, None)
    with pytest.raises(UsageError, match='embedding.precision = "int8" runs on ONNX Runtime on the CPU'):
        load_embedder(path, "torch", precision="int8")
    with pytest.raises(UsageError, match="embedding.precision must be one of float32, int8"):
        load_embedder(path, precision="int4")
    from rmtui.engine.memory.config import LOCAL_FILE

    assert root.config().get("embedding.precision") == "float32"
    local = root.path / LOCAL_FILE
    text = local.read_text(encoding="utf-8")
    local.write_text(text + '\nprecision = "int4"\n', encoding="utf-8")
    with pytest.raises(UsageError, match="embedding.precision"):
        root.config().get("embedding.precision")


def test_an_int8_root_gets_its_own_warm_service(int8_env, root, tmp_path, monkeypatch, cli):
    """The real CLI on a root set to int8 starts a service of the int8 model, in its own state
    folder; the root's vectors are cached under the int8 identity only."""
    from rmtui.engine.memory.config import LOCAL_FILE
    from rmtui.engine.retrieval.modelhost.embed_client import service_dir, stop_local_service

    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    write_small_root(root)
    local = root.path / LOCAL_FILE
    local.write_text(local.read_text(encoding="utf-8") + '\nprecision = "int8"\n', encoding="utf-8")
    path = resolve_model_path(None, None)
    state_dir = service_dir(path, None, "int8")
    assert state_dir != service_dir(path, None)
    try:
        res = cli("--headless", "retrieve", "--json", "--root", str(root.path), "--session", "s1", "who owns billing")
        assert res.code == 0, res.stderr
        state = json.loads((state_dir / "state.json").read_text())
        assert state["precision"] == "int8" and "+int8-" in state["info"]["embedding_model"]
        assert not (service_dir(path, None) / "state.json").exists()
        ident8 = state["info"]["embedding_model"]
        names = {p.stem for p in (root.runtime / "cache" / "vectors").glob("*.bin")}
        from rmtui.engine.retrieval.vectors import cache_name

        assert cache_name(ident8) in names and cache_name(ident8.split("+int8-")[0]) not in names
    finally:
        stop_local_service(state_dir)
