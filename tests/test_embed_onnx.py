"""The ONNX Runtime path of the embedding model (a cheap restart of the warm service).

One export of the bundled MiniLM is made per test session, in a temporary cache, through
the same helper process production uses; every test here points ``RMTUI_MODEL_CACHE`` at it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.retrieval.modelhost import onnx_model
from rmtui.engine.retrieval.modelhost.embeddings import load_embedder
from rmtui.engine.retrieval.modelhost.model_cache import CACHE_ENV, model_identity
from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

CORPUS = [
    "The test_socket_timeout test is flaky on CI; rerun it once before debugging",
    "Format Python with ruff format, never black",
    "Docker builds reuse the layer cache; bump CACHE_EPOCH in Dockerfile to bust it",
    "Alice works from Lisbon and prefers meetings in the morning",
    "Bob owns the billing service and its database migrations",
    "Carol adopted a golden retriever puppy named Biscuit last spring",
    "Rotate the bearer token secret every month through the vault CLI",
    "The postgres lock timeout is 5 seconds in production and 30 in staging",
    "Release tags follow semver; the changelog is generated from commit trailers",
    "Redis backups run nightly and are restored weekly as a drill",
]
NEEDS = ["which test is flaky", "how to format python code", "who owns billing", "dog name",
         "docker cache busting", "token rotation", "database lock timeout", "how are releases tagged"]


@pytest.fixture(scope="session")
def model_path() -> Path:
    return resolve_model_path(None, None)


@pytest.fixture(scope="session")
def identity(model_path) -> str:
    return model_identity(model_path, "sentence-transformers")


@pytest.fixture(scope="session")
def export_cache(tmp_path_factory, model_path, identity) -> Path:
    """One export per session, made by the helper process (so this also tests that path)."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    old = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(cache)
    try:
        onnx_model.ensure_export(model_path, identity, log=lambda _msg: None)
    finally:
        if old is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = old
    return cache


@pytest.fixture
def onnx_env(export_cache, monkeypatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(export_cache))
    return export_cache


@pytest.fixture(scope="session")
def torch_embedder(model_path):
    return load_embedder(model_path, "torch")


def test_onnx_and_torch_give_the_same_vectors_and_rankings(onnx_env, model_path, torch_embedder):
    onnx = load_embedder(model_path, "onnx")
    assert onnx.runtime == "onnx" and torch_embedder.runtime == "torch"
    assert onnx.identity == torch_embedder.identity  # interchangeable: the vector cache stays valid
    assert onnx.dimensions == torch_embedder.dimensions
    for kind, texts in (("passage", CORPUS), ("query", NEEDS)):
        a, b = onnx.encode(texts, kind), torch_embedder.encode(texts, kind)
        assert a.shape == b.shape
        assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
        assert ((a * b).sum(axis=1) > 0.999).all()
    docs_o, docs_t = onnx.encode(CORPUS, "passage"), torch_embedder.encode(CORPUS, "passage")
    q_o, q_t = onnx.encode(NEEDS, "query"), torch_embedder.encode(NEEDS, "query")
    for i in range(len(NEEDS)):
        top_o = np.argsort(-(docs_o @ q_o[i]), kind="stable")[:5].tolist()
        top_t = np.argsort(-(docs_t @ q_t[i]), kind="stable")[:5].tolist()
        assert top_o == top_t, NEEDS[i]


def test_onnx_and_torch_give_the_same_token_states_and_maxsim(onnx_env, model_path, torch_embedder):
    """The second stage's MaxSim feature reads token states: both runtimes give the same ones."""
    from rmtui.engine.retrieval.stage2 import maxsim
    from rmtui.engine.retrieval.tokens import quantize

    onnx = load_embedder(model_path, "onnx")
    for kind, texts in (("passage", CORPUS), ("query", NEEDS)):
        (va, sa), (vb, sb) = onnx.encode_tokens(texts, kind), torch_embedder.encode_tokens(texts, kind)
        assert np.allclose(va, onnx.encode(texts, kind), atol=1e-5)  # the same pass gives the vector
        assert ((va * vb).sum(axis=1) > 0.999).all()
        for text, a, b in zip(texts, sa, sb, strict=True):
            # one row per word piece, [CLS] and [SEP] left out
            assert a.shape == b.shape == (len(onnx.tokenizer.encode(text).ids) - 2, onnx.dimensions)
            assert ((a * b).sum(axis=1) > 0.999).all()
    _, docs_o = onnx.encode_tokens(CORPUS, "passage")
    _, docs_t = torch_embedder.encode_tokens(CORPUS, "passage")
    for need in NEEDS:
        q_o = onnx.encode_tokens([need], "query")[1][0]
        q_t = torch_embedder.encode_tokens([need], "query")[1][0]
        s_o = maxsim(q_o, [quantize(d) for d in docs_o])
        s_t = maxsim(q_t, [quantize(d) for d in docs_t])
        assert np.allclose(s_o, s_t, atol=0.01)
        assert np.argsort(-s_o, kind="stable")[:3].tolist() == np.argsort(-s_t, kind="stable")[:3].tolist(), need


def test_batches_padding_and_truncation_do_not_change_a_vector(onnx_env, model_path):
    onnx = load_embedder(model_path, "onnx")
    long = "cache " * 600  # far past max_seq_length: truncated like sentence-transformers does
    texts = ["Short.", long, CORPUS[2]]
    together = onnx.encode(texts, "passage")
    alone = np.stack([onnx.encode([t], "passage")[0] for t in texts])
    assert ((together * alone).sum(axis=1) > 0.99999).all()
    assert onnx.encode([], "query").shape == (0, onnx.dimensions)
    with pytest.raises(ValueError):
        onnx.encode(["x"], "document")


def test_the_service_on_onnx_never_imports_torch(onnx_env, model_path):
    code = textwrap.dedent(f"""
        import json, sys
        from rmtui.engine.retrieval.modelhost.embed_service import serve

        def ready(server):
            vec = server.backend.embed(["does the service answer"], "query")
            heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "sentence_transformers",
                                                                          "transformers"))
            print(json.dumps({{"heavy": heavy, "runtime": server.backend.runtime, "dim": len(vec[0])}}))
            server.shutdown()

        serve(host="127.0.0.1", port=0, model=None, model_path={str(model_path)!r}, reranker_path=None,
              token=None, idle_timeout=None, ready=ready, backend="onnx")
    """)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"heavy": [], "runtime": "onnx", "dim": 384}
    assert time.monotonic() - t0 < 30


def test_the_local_warm_service_runs_on_onnx(onnx_env, model_path, tmp_path, monkeypatch):
    """The real launcher and CLI command: state file says onnx, and no libtorch is mapped."""
    from rmtui.engine.retrieval.modelhost.embed_client import ensure_local_service, stop_local_service

    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    local = ensure_local_service(model_path, None, idle_timeout=60, wait_seconds=60, backend="onnx")
    try:
        state = json.loads((local.state_dir / "state.json").read_text())
        assert state["runtime"] == "onnx"
        maps = Path(f"/proc/{state['pid']}/maps")
        if maps.exists():
            assert "libtorch" not in maps.read_text()
    finally:
        assert stop_local_service(local.state_dir)


def _copy_export(src_cache: Path, dest_cache: Path, identity: str) -> Path:
    folder = dest_cache / onnx_model.export_key(identity)
    shutil.copytree(src_cache / folder.name, folder)
    return folder


def test_a_damaged_export_is_reported_and_made_again(export_cache, tmp_path, monkeypatch, model_path, identity):
    cache = tmp_path / "cache"
    folder = _copy_export(export_cache, cache, identity)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    model = folder / onnx_model.MODEL_FILE
    data = bytearray(model.read_bytes())
    data[len(data) // 2:len(data) // 2 + 4096] = os.urandom(4096)  # same size, wrong weights
    model.write_bytes(bytes(data))
    with pytest.raises(onnx_model.ExportDamaged, match="does not match its manifest"):
        onnx_model.load_onnx_embedder(model_path, identity, export=False)

    made: list[str] = []

    def export_here(path, ident, *, log):  # the session's export, as the helper process made it
        made.append(ident)
        return _copy_export(export_cache, cache, ident)

    monkeypatch.setattr(onnx_model, "ensure_export", export_here)
    said: list[str] = []
    emb = onnx_model.load_onnx_embedder(model_path, identity, log=said.append)
    assert made == [identity] and emb.runtime == "onnx"
    assert any("damaged" in s and "exporting it again" in s for s in said), said
    assert onnx_model.find_export(identity) == folder


def test_a_missing_or_incomplete_export(export_cache, tmp_path, monkeypatch, model_path, identity):
    cache = tmp_path / "cache"
    folder = _copy_export(export_cache, cache, identity)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    (folder / onnx_model.MODEL_FILE).unlink()
    with pytest.raises(onnx_model.ExportDamaged, match="missing or unreadable"):
        onnx_model.load_onnx_embedder(model_path, identity, export=False)
    (folder / onnx_model.MANIFEST).unlink()  # an interrupted copy: no manifest
    assert onnx_model.find_export(identity) is None
    assert onnx_model.damaged_exports(identity) == [folder]
    with pytest.raises(onnx_model.ExportDamaged, match="no ONNX export"):
        onnx_model.load_onnx_embedder(model_path, identity, export=False, log=lambda _m: None)
    assert not folder.exists()  # removed on the way


def test_auto_falls_back_to_torch_with_a_reason_and_onnx_refuses(tmp_path, monkeypatch, model_path, capsys):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))

    def cannot(path, ident, *, log):
        raise onnx_model.ExportDamaged("the ONNX export failed (exit 1): simulated")

    monkeypatch.setattr(onnx_model, "ensure_export", cannot)
    with pytest.raises(UnavailableError, match='embedding.backend = "onnx".*simulated'):
        load_embedder(model_path, "onnx")
    emb = load_embedder(model_path, "auto")
    assert emb.runtime == "torch"
    assert "runs on torch" in capsys.readouterr().err
    with pytest.raises(UsageError, match="embedding.backend must be one of"):
        load_embedder(model_path, "gpu")


def test_models_the_onnx_path_does_not_reproduce_are_refused(tmp_path, model_path):
    with pytest.raises(onnx_model.ExportUnsupported, match="modules.json"):
        onnx_model.read_layout(tmp_path)
    odd = tmp_path / "odd"
    shutil.copytree(model_path, odd, ignore=shutil.ignore_patterns("*.safetensors"))
    modules = json.loads((odd / "modules.json").read_text())
    (odd / "modules.json").write_text(json.dumps([*modules, {"idx": 3, "name": "3", "path": "3_Dense",
                                                             "type": "sentence_transformers.models.Dense"}]))
    with pytest.raises(onnx_model.ExportUnsupported, match="Dense"):
        onnx_model.read_layout(odd)
    (odd / "modules.json").write_text(json.dumps(modules))
    (odd / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_lasttoken": True}))
    with pytest.raises(onnx_model.ExportUnsupported, match="lasttoken"):
        onnx_model.read_layout(odd)
    layout = onnx_model.read_layout(model_path)
    assert layout == onnx_model.Layout("mean", True)


def test_the_cache_key_follows_the_model_identity(tmp_path, model_path, identity, monkeypatch):
    other = tmp_path / "model"
    other.mkdir()
    for f in model_path.iterdir():  # the weights linked, everything else copied
        (other / f.name).symlink_to(f) if f.suffix == ".safetensors" else (
            shutil.copytree(f, other / f.name) if f.is_dir() else shutil.copy(f, other / f.name))
    assert model_identity(other, "sentence-transformers").split("@")[1] == identity.split("@")[1]
    cfg = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**cfg, "layer_norm_eps": 1e-6}))
    changed = model_identity(other, "sentence-transformers")
    assert changed != identity
    assert onnx_model.export_key(changed) != onnx_model.export_key(identity)
    key = onnx_model.export_key(identity)
    assert key.startswith("all-minilm-l6-v2-")
    monkeypatch.setattr(onnx_model, "EXPORT_VERSION", onnx_model.EXPORT_VERSION + 1)
    assert onnx_model.export_key(identity) != key  # new export code: a new export


def test_cache_dirs_and_thread_count(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert onnx_model.cache_dirs() == [tmp_path]
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    dirs = onnx_model.cache_dirs()
    assert dirs[-1] == tmp_path / "xdg" / "rmtui" / "onnx"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert onnx_model.thread_count() == 3
    monkeypatch.setenv(onnx_model.THREADS_ENV, "1")
    assert onnx_model.thread_count() == 1


def test_embedding_backend_is_an_rmtui_setting(root):
    from rmtui.engine.memory.config import LOCAL_FILE

    assert root.config().get("embedding.backend") == "auto"
    local = root.path / LOCAL_FILE
    text = local.read_text(encoding="utf-8")
    local.write_text(text.replace('# backend = "auto"', 'backend = "torch"'), encoding="utf-8")
    assert root.config().get("embedding.backend") == "torch"
    local.write_text(text.replace('# backend = "auto"', 'backend = "gpu"'), encoding="utf-8")
    with pytest.raises(UsageError, match="embedding.backend"):
        root.config().get("embedding.backend")


def test_a_cli_call_without_a_service_launches_it_early(onnx_env, root, tmp_path, monkeypatch, model_path):
    """Restart after the idle exit: the service is launched before the CLI loads its corpus."""
    from rmtui.engine.retrieval.modelhost import embed_client
    from rmtui.engine.retrieval.modelhost.embed_client import delegate_retrieve
    from rmtui.engine.retrieval.modelhost.service_state import service_dir

    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    state_dir = service_dir(model_path, None)
    cfg = root.config()
    assert delegate_retrieve(root.path, cfg, "s1", "a need", top=None, include_returned=False) is None
    assert not state_dir.exists()  # a root without cached vectors may never need the model: no launch
    vectors = root.runtime / "cache" / "vectors"
    vectors.mkdir(parents=True)
    (vectors / "cached.bin").write_bytes(b"")
    assert delegate_retrieve(root.path, cfg, "s1", "a need", top=None, include_returned=False) is None
    assert state_dir in embed_client._launched
    assert not embed_client.start_local_service(model_path, None, idle_timeout=60)  # starting: not twice
    local = embed_client.ensure_local_service(model_path, None, idle_timeout=60, wait_seconds=60)
    try:
        assert local.started  # the early launch, waited for
        assert not (state_dir / "launch.json").exists()  # the service took over from the launch record
    finally:
        assert embed_client.stop_local_service(state_dir)
    assert not embed_client._starting(state_dir)  # a stopped service is not one still starting
    assert embed_client.start_local_service(model_path, None, idle_timeout=60)
    embed_client.ensure_local_service(model_path, None, idle_timeout=60, wait_seconds=60)
    assert embed_client.stop_local_service(state_dir)
