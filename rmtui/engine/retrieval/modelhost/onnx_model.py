"""The ONNX Runtime path for sentence-transformers embedders: export once, then run without torch.

Why: importing torch and sentence-transformers costs 5-15 s, paid by every start of the
local warm service (it exits when idle) and by every MCP server. The transformer of a
plain sentence-transformers model (Transformer -> Pooling -> optional Normalize, as its
``modules.json`` says) is exported to ONNX once, with torch, and cached under a folder
keyed by the model identity and :data:`EXPORT_VERSION`. Later processes load the
``tokenizers`` tokenizer and an onnxruntime session (a fraction of a second) and pool in
numpy exactly as the model's pooling config says.

The export is checked against the torch model before it is kept (cosine of every probe
vector >= :data:`PARITY_MIN_COSINE`, queries and passages, short, padded and truncated
texts), and a probe vector stored with it is checked on every load, so a damaged export
is noticed and made again. ONNX vectors therefore share the torch model's identity: the
vector cache stays valid when the backend changes.

Where exports live: see ``model_cache`` (``$RMTUI_MODEL_CACHE``, else the install's share
folder or the user's cache).

Run ``python -m rmtui.engine.retrieval.modelhost.onnx_model export --model-path DIR`` to export in a
separate process (what :func:`ensure_export` does, so that the caller never loads torch).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.locks import file_lock
from rmtui.engine.retrieval.modelhost.model_cache import cache_dirs, file_signature, model_identity, write_dir

#: Bump when the export or the runtime pipeline changes: older exports are then ignored.
EXPORT_VERSION = 1
OPSET = 17
MANIFEST = "manifest.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
VERIFIED_FILE = "verified.json"
THREADS_ENV = "RMTUI_EMBED_THREADS"
#: Lowest cosine between an ONNX vector and the torch vector of the same text that is accepted.
PARITY_MIN_COSINE = 0.9999
PROBE_TEXT = "Probe: the ONNX export of this embedding model answers like the original."
EXPORT_TIMEOUT = 900.0
SUPPORTED_POOLING = ("cls", "max", "mean", "mean_sqrt_len_tokens")
_OLD_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                     "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                     "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
_BATCH = 32
#: Bump when the int8 quantisation changes: older int8 exports are then ignored.
QUANT_VERSION = 1
#: Lowest cosine between an int8 vector and the float32 vector of the same text that is accepted.
INT8_MIN_COSINE = 0.95


class ExportUnsupported(Exception):
    """This model cannot take the ONNX path (its modules, pooling or files); torch serves it."""


class ExportDamaged(Exception):
    """An export exists but cannot be used (unreadable, incomplete, or answering differently)."""


def say(msg: str) -> None:
    """Notices go to stderr: the warm service's log, the MCP host's log, the installer's output."""
    from rmtui.engine import progress

    progress.report(msg)
    sys.stderr.write(f"rmtui: {msg}\n")
    sys.stderr.flush()


# -- what a model folder holds -----------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """The parts of a sentence-transformers folder the ONNX path reproduces."""

    pooling: str
    normalize: bool
    include_prompt: bool = True


def read_layout(path: Path) -> Layout:
    """Read ``modules.json`` and the pooling config; :class:`ExportUnsupported` for anything else."""
    path = Path(path)
    try:
        modules = json.loads((path / "modules.json").read_text())
    except (OSError, ValueError) as exc:
        raise ExportUnsupported(f"{path} has no readable modules.json") from exc
    if not (path / TOKENIZER_FILE).is_file():
        raise ExportUnsupported(f"{path} has no {TOKENIZER_FILE} (a fast tokenizer is needed without transformers)")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules if isinstance(m, dict)]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ExportUnsupported(f"modules {kinds} are not Transformer, Pooling[, Normalize]")
    transformer: dict = next(m for m in modules if str(m.get("type", "")).endswith("Transformer"))
    if transformer.get("path", "") != "":
        raise ExportUnsupported("the Transformer module is not at the model folder's top")
    pool = next(m for m in modules if str(m.get("type", "")).endswith("Pooling"))
    try:
        cfg = json.loads((path / str(pool.get("path", "")) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ExportUnsupported("the pooling config is unreadable") from exc
    mode = cfg.get("pooling_mode")
    modes = ([mode] if isinstance(mode, str) else list(mode)) if mode \
        else [v for k, v in _OLD_POOLING_KEYS.items() if cfg.get(k)]
    if len(modes) != 1 or modes[0] not in SUPPORTED_POOLING:
        raise ExportUnsupported(f"pooling {modes or 'none'} is not one of {', '.join(SUPPORTED_POOLING)}")
    return Layout(modes[0], kinds[-1] == "Normalize", bool(cfg.get("include_prompt", True)))


def pool(hidden: np.ndarray, mask: np.ndarray, layout: Layout) -> np.ndarray:
    """Token states to one vector per text, as sentence-transformers' Pooling (+ Normalize)."""
    m = mask.astype(np.float32)[:, :, None]
    if layout.pooling == "cls":
        out = hidden[:, 0]
    elif layout.pooling == "max":
        out = np.where(m > 0, hidden, np.float32(-1e9)).max(axis=1)
    else:
        total = (hidden * m).sum(axis=1)
        count = np.clip(m.sum(axis=1), 1e-9, None)
        out = total / (count if layout.pooling == "mean" else np.sqrt(count))
    out = out.astype(np.float32)
    return unit_rows(out) if layout.normalize else out


# -- where exports live ------------------------------------------------------------------

def export_key(identity: str) -> str:
    """Folder name: the model's readable name, then a digest of identity and export version."""
    name = identity.split("@", 1)[0]
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:60] or "model"
    digest = hashlib.sha256(f"{identity}\0onnx-export-v{EXPORT_VERSION}\0opset{OPSET}".encode()).hexdigest()[:20]
    return f"{safe}-{digest}"


def _manifest(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_export(identity: str) -> Path | None:
    """A finished export for this identity (a folder appears complete: it is renamed into place)."""
    key = export_key(identity)
    for d in cache_dirs():
        folder = d / key
        man = _manifest(folder)
        if man is not None and man.get("identity") == identity and man.get("export_version") == EXPORT_VERSION:
            return folder
    return None


def damaged_exports(identity: str) -> list[Path]:
    """Folders of this identity that exist without a usable manifest."""
    key = export_key(identity)
    return [d / key for d in cache_dirs() if (d / key).is_dir() and find_export(identity) != d / key]


# -- export (needs torch; run in its own process by ensure_export) ------------------------

def export_model(model_path: Path, identity: str | None = None, *, dest: Path | None = None,
                 log: Callable[[str], None] = say) -> Path:
    """Export ``model_path`` to ONNX under the cache, check it against torch, and return its folder."""
    model_path = Path(model_path).resolve()
    layout = read_layout(model_path)
    identity = identity or model_identity(model_path, "sentence-transformers")
    top = dest or write_dir()
    top.mkdir(parents=True, exist_ok=True)
    folder = top / export_key(identity)
    with file_lock(top / f"{folder.name}.lock", timeout=EXPORT_TIMEOUT):
        man = _manifest(folder)
        if man is not None and man.get("identity") == identity and man.get("export_version") == EXPORT_VERSION:
            return folder  # another process finished it while we waited
        t0 = time.monotonic()
        log(f"exporting the embedding model {identity} to ONNX (once; later starts load it without torch)")
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=top))
        os.chmod(tmp, 0o755)  # an install's shared export is read by every user of that install
        try:
            manifest = _export_into(model_path, identity, layout, tmp)
            atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=1))
            atomic_write_text(tmp / VERIFIED_FILE, json.dumps({MODEL_FILE: file_signature(tmp / MODEL_FILE)}))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)  # complete, manifest included, the moment it appears
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log(f"ONNX export ready in {time.monotonic() - t0:.1f} s: {folder} "
            f"(lowest cosine to torch {manifest['parity_min_cosine']:.6f})")
    return folder


def _export_into(model_path: Path, identity: str, layout: Layout, out: Path) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_grad_enabled(False)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar in the installer's output
    except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
        pass
    st = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)
    hf = st[0].auto_model
    hf.eval()  # type: ignore[union-attr]  # a Module: the transformer of a Transformer module
    max_len = int(st.max_seq_length or 512)
    prompts = {"query": _prompt(st, ("query",)), "document": _prompt(st, ("document", "passage", "corpus"))}
    if not layout.include_prompt and any(prompts.values()):
        raise ExportUnsupported("pooling excludes prompt tokens, which the ONNX path does not reproduce")
    do_lower = bool(getattr(st[0], "do_lower_case", False))

    names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
             if n in getattr(st.tokenizer, "model_input_names", ("input_ids", "attention_mask"))]

    class TokenStates(torch.nn.Module):
        """The transformer alone: token states out, pooling stays in numpy (and in the manifest)."""

        def __init__(self, model) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    feats = st.tokenizer(["A sample sentence to trace the export with.", "Short."], padding=True,
                         return_tensors="pt")
    sample = tuple(feats[n] for n in names)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer chatter about shape-dependent Python branches
        torch.onnx.export(TokenStates(hf), sample, str(out / MODEL_FILE), input_names=names,
                          output_names=["token_states"], opset_version=OPSET, dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "token_states"]})
    shutil.copy(model_path / TOKENIZER_FILE, out / TOKENIZER_FILE)
    dim = st.get_embedding_dimension() if hasattr(st, "get_embedding_dimension") \
        else st.get_sentence_embedding_dimension()
    if dim is None:
        raise ExportUnsupported("the model does not declare its embedding dimension")
    dims = int(dim)
    manifest = {
        "identity": identity, "export_version": EXPORT_VERSION, "opset": OPSET, "model_file": MODEL_FILE,
        "model_bytes": (out / MODEL_FILE).stat().st_size,
        "model_sha256": hashlib.sha256((out / MODEL_FILE).read_bytes()).hexdigest(),
        "max_seq_length": max_len, "prompts": prompts,
        "do_lower_case": do_lower, "pooling": layout.pooling, "normalize": layout.normalize,
        "include_prompt": layout.include_prompt, "dimensions": dims,
        "pad_token": getattr(st.tokenizer, "pad_token", None) or "[PAD]",
        "torch_version": torch.__version__, "created_at": time.time(),
    }
    # the probe vector, from torch, checked again on every load
    probe = st.encode_query([PROBE_TEXT], normalize_embeddings=True, convert_to_numpy=True)[0]
    manifest["probe"] = {"text": PROBE_TEXT, "vector": [float(x) for x in probe]}
    (out / MANIFEST).write_text(json.dumps(manifest))
    onnx = OnnxEmbedder(out, identity, check_probe=False, threads=None)
    worst = 1.0
    for kind, fn in (("query", st.encode_query), ("passage", st.encode_document)):
        texts = _parity_texts()
        ref = np.asarray(fn(texts, batch_size=_BATCH, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False), dtype=np.float32)
        got = onnx.encode(texts, kind)
        cos = (got * ref).sum(axis=1) / np.clip(np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1), 1e-12, None)
        worst = min(worst, float(cos.min()))
        got1 = onnx.encode(texts[:1], kind)  # alone: no padding
        worst = min(worst, float((got1[0] @ ref[0]) / max(np.linalg.norm(got1[0]) * np.linalg.norm(ref[0]), 1e-12)))
    if worst < PARITY_MIN_COSINE:
        raise ExportUnsupported(f"the ONNX export answers differently from torch (lowest cosine {worst:.6f} "
                                f"< {PARITY_MIN_COSINE})")
    manifest["parity_min_cosine"] = worst
    return manifest


def _prompt(st, names: tuple[str, ...]) -> str:
    """The prompt sentence-transformers prepends for ``encode_query`` / ``encode_document``."""
    prompts = getattr(st, "prompts", None) or {}
    for n in names:
        if n in prompts:
            return prompts[n] or ""
    default = getattr(st, "default_prompt_name", None)
    return (prompts.get(default) or "") if default else ""


def _parity_texts() -> list[str]:
    long = " ".join(f"word{i} retrieval cache vector" for i in range(300))  # past max_seq_length: truncated
    return ["Short.", PROBE_TEXT, "How do we rotate the bearer token secret?",
            "Docker builds reuse the layer cache; bump CACHE_EPOCH in Dockerfile to bust it. " * 4,
            "Ünïcödé, emoji 🙂 and CJK 記憶 text", long]


def ensure_export(model_path: Path, identity: str, *, log: Callable[[str], None] = say) -> Path:
    """The export for this model, made now in a separate process (torch never enters the caller)."""
    found = find_export(identity)
    if found is not None:
        return found
    read_layout(model_path)  # unsupported models fail here, before a process is started
    cmd = [sys.executable, "-m", "rmtui.engine.retrieval.modelhost.onnx_model", "export",
           "--model-path", str(model_path), "--identity", identity]
    log("no ONNX export of the embedding model yet: exporting it once in a helper process (torch loads there only)")
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=EXPORT_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise ExportDamaged(f"the ONNX export did not finish within {EXPORT_TIMEOUT:.0f} s") from exc
    found = find_export(identity)
    if proc.returncode != 0 or found is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        if proc.returncode == 3:
            raise ExportUnsupported(tail[0].removeprefix("rmtui: "))
        raise ExportDamaged(f"the ONNX export failed (exit {proc.returncode}): {tail[0][:300]}")
    return found


# -- runtime (no torch) ------------------------------------------------------------------

def thread_count() -> int:
    """Intra-op threads: ``RMTUI_EMBED_THREADS``, else ``OMP_NUM_THREADS`` (what torch obeys), else the CPUs
    this process may use. ``OPENBLAS_NUM_THREADS`` (set to 1 by the CLI) governs numpy only, as before."""
    for var in (THREADS_ENV, "OMP_NUM_THREADS"):
        try:
            n = int(os.environ.get(var, ""))
        except ValueError:
            continue
        if n >= 1:
            return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _verify(model: Path, man: dict) -> None:
    """The model file is the one exported: SHA-256 against the manifest, skipped while the file's
    signature is the one last verified (``verified.json``; hashing 90 MB costs ~0.1 s a start)."""
    try:
        sig = file_signature(model)
    except OSError as exc:
        raise ExportDamaged(f"{model} is missing or unreadable") from exc
    marker = model.parent / VERIFIED_FILE
    try:
        if json.loads(marker.read_text()).get(model.name) == sig:
            return
    except (OSError, ValueError, AttributeError):
        pass
    h = hashlib.sha256()
    try:
        with model.open("rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise ExportDamaged(f"{model} is missing or unreadable") from exc
    if sig[0] != man.get("model_bytes") or h.hexdigest() != man.get("model_sha256"):
        raise ExportDamaged(f"{model} does not match its manifest (changed or truncated since the export)")
    try:
        atomic_write_text(marker, json.dumps({model.name: sig}))
    except OSError:
        pass  # a read-only install: verified again next time


class OnnxEmbedder:
    """A sentence-transformers embedder from its ONNX export: tokenizers + onnxruntime + numpy pooling.

    Same interface and identity as ``embeddings.SentenceEmbedder``; vectors L2-normalised.
    """

    adapter = "sentence-transformers"
    runtime = "onnx"

    def __init__(self, folder: Path, identity: str, *, check_probe: bool = True, threads: int | None = 0) -> None:
        """``threads``: 0 for :func:`thread_count`, None for onnxruntime's own default."""
        self.folder = Path(folder)
        self.identity = identity
        if threads == 0:
            threads = thread_count()
        man = _manifest(self.folder)
        if man is None or man.get("identity") != self.identity or man.get("export_version") != EXPORT_VERSION:
            raise ExportDamaged(f"{self.folder} holds no finished export of {self.identity}")
        self.manifest = man
        model = self.folder / str(man.get("model_file", MODEL_FILE))
        _verify(model, man)
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ExportUnsupported(f"the ONNX path needs onnxruntime and tokenizers ({exc})") from exc
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        # no busy-waiting between calls: the service idles for minutes, and on a small machine a
        # spinning pool would take the CPU from the same request's scoring right after the model
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
            self.tokenizer = Tokenizer.from_file(str(self.folder / TOKENIZER_FILE))
        except Exception as exc:  # onnxruntime raises its own exception types for a bad file
            raise ExportDamaged(f"{self.folder} cannot be loaded: {type(exc).__name__}: {str(exc)[:200]}") from exc
        self.max_seq_length = int(man["max_seq_length"])
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        self.pad_id = self.tokenizer.token_to_id(str(man.get("pad_token") or "[PAD]")) or 0
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.layout = Layout(str(man["pooling"]), bool(man["normalize"]), bool(man.get("include_prompt", True)))
        self.prompts = {k: str(v or "") for k, v in (man.get("prompts") or {}).items()}
        self.do_lower_case = bool(man.get("do_lower_case"))
        self.dimensions = int(man["dimensions"])
        self.max_batch_size = 64
        self._lock = threading.Lock()
        if check_probe:
            self._check_probe()

    def _check_probe(self) -> None:
        probe = self.manifest.get("probe") or {}
        want = np.asarray(probe.get("vector") or [], dtype=np.float32)
        if want.shape != (self.dimensions,):
            raise ExportDamaged(f"{self.folder / MANIFEST} has no probe vector")
        got = self.encode([str(probe.get("text") or PROBE_TEXT)], "query")[0]
        cos = float(got @ want / max(float(np.linalg.norm(got) * np.linalg.norm(want)), 1e-12))
        if not cos >= PARITY_MIN_COSINE:
            raise ExportDamaged(f"{self.folder} answers differently from the model it was exported from "
                                f"(probe cosine {cos:.6f})")

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        return self._run(texts, kind, tokens=False)[0]

    def encode_tokens(self, texts: list[str], kind: str) -> tuple[np.ndarray, list[np.ndarray]]:
        """Vectors, and each text's token states (unit rows, special tokens left out) from the
        same forward pass: what the second stage's MaxSim feature reads."""
        return self._run(texts, kind, tokens=True)

    def _run(self, texts: list[str], kind: str, *, tokens: bool) -> tuple[np.ndarray, list[np.ndarray]]:
        if kind not in ("query", "passage"):
            raise ValueError("kind must be 'query' or 'passage'")
        prompt = self.prompts.get("query" if kind == "query" else "document", "")
        items = [prompt + t for t in texts]
        if self.do_lower_case:
            items = [t.lower() for t in items]
        out = np.zeros((len(items), self.dimensions), dtype=np.float32)
        states: list[np.ndarray] = [np.zeros((0, self.dimensions), np.float32)] * len(items) if tokens else []
        if not items:
            return out, states
        with self._lock:
            enc = self.tokenizer.encode_batch(items)
            order = sorted(range(len(enc)), key=lambda i: -len(enc[i].ids))
            for off in range(0, len(order), _BATCH):
                idx = order[off:off + _BATCH]
                width = max(len(enc[i].ids) for i in idx)
                ids = np.full((len(idx), width), self.pad_id, dtype=np.int64)
                mask = np.zeros((len(idx), width), dtype=np.int64)
                types = np.zeros((len(idx), width), dtype=np.int64)
                for row, i in enumerate(idx):
                    n = len(enc[i].ids)
                    ids[row, :n] = enc[i].ids
                    mask[row, :n] = 1
                    types[row, :n] = enc[i].type_ids
                feed = {k: v for k, v in (("input_ids", ids), ("attention_mask", mask), ("token_type_ids", types))
                        if k in self.inputs}
                hidden = np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
                out[idx] = pool(hidden, mask, self.layout)
                if tokens:
                    for row, i in enumerate(idx):
                        keep = np.flatnonzero(np.asarray(enc[i].special_tokens_mask) == 0)
                        states[i] = unit_rows(hidden[row, keep])
        return out, states


def token_counter(model_path: Path) -> Callable[[list[str]], list[int]] | None:
    """How many tokens the model's own tokenizer makes of each text, for ordering the index
    build's requests by length; None when the folder has no fast tokenizer to ask."""
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(Path(model_path) / TOKENIZER_FILE))
    except Exception:  # noqa: BLE001 - no tokenizer file, or one this tokenizers cannot read: text length serves
        return None
    tok.no_padding()
    tok.no_truncation()
    return lambda texts: [len(e.ids) for e in tok.encode_batch(texts)]


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def load_onnx_embedder(model_path: Path, identity: str, *, export: bool = True,
                       log: Callable[[str], None] = say) -> OnnxEmbedder:
    """The ONNX embedder of this model: the cached export, made first when ``export``; a damaged
    export is reported, removed and made again once. Raises :class:`ExportUnsupported` or
    :class:`ExportDamaged` when there is none to be had."""
    for stale in damaged_exports(identity):
        log(f"removing an incomplete ONNX export at {stale}")
        shutil.rmtree(stale, ignore_errors=True)
    folder = find_export(identity)
    if folder is not None:
        try:
            return OnnxEmbedder(folder, identity)
        except ExportDamaged as exc:
            if not export:
                raise
            log(f"the ONNX export is damaged ({exc}); exporting it again")
            shutil.rmtree(folder, ignore_errors=True)
    elif not export:
        raise ExportDamaged(f"no ONNX export of {identity} in {', '.join(map(str, cache_dirs()))}")
    return OnnxEmbedder(ensure_export(model_path, identity, log=log), identity)


# -- int8 (dynamic quantisation of the export: ``embedding.precision = "int8"``) -----------

def int8_key(identity: str) -> str:
    """Folder of the int8 export of ``identity``'s float32 export: the quantiser's version and
    onnxruntime's (whose tool makes it) are part of the key, so another quantiser makes another."""
    import onnxruntime as ort

    return export_key(f"{identity}+int8\0q{QUANT_VERSION}\0ort{ort.__version__}")


def find_int8(identity: str) -> Path | None:
    """A finished int8 export made from ``identity``'s float32 export."""
    key = int8_key(identity)
    for d in cache_dirs():
        man = _manifest(d / key)
        if man is not None and man.get("base_identity") == identity and man.get("export_version") == EXPORT_VERSION \
                and str(man.get("identity", "")).startswith(f"{identity}+int8-"):
            return d / key
    return None


def make_int8(base: OnnxEmbedder, *, log: Callable[[str], None] = say) -> Path:
    """Quantise the float32 export's weights to int8 (onnxruntime's ``quantize_dynamic``; one scale
    per output channel, 7-bit range: per tensor the vectors fall to a mean cosine of 0.94 with the
    float32 ones, per channel 0.99; AVX2 without VNNI could saturate a full 8-bit range), check
    its vectors against the float32 ones and keep it beside them. Its identity names the digest
    of the quantised file, so its vectors can never be mistaken for another model's."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    top = write_dir()
    folder = top / int8_key(base.identity)
    with file_lock(top / f"{folder.name}.lock", timeout=EXPORT_TIMEOUT):
        if find_int8(base.identity) == folder:
            return folder  # another process made it while we waited
        t0 = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=top))
        os.chmod(tmp, 0o755)
        try:
            quantize_dynamic(str(base.folder / str(base.manifest.get("model_file", MODEL_FILE))), str(tmp / MODEL_FILE),
                             weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
            shutil.copyfile(base.folder / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
            digest = hashlib.sha256((tmp / MODEL_FILE).read_bytes()).hexdigest()
            man = {k: v for k, v in base.manifest.items() if k not in ("probe", "parity_min_cosine")}
            man.update(identity=f"{base.identity}+int8-{digest[:16]}", base_identity=base.identity,
                       quantization=f"dynamic, int8 weights per channel (quantize_dynamic, v{QUANT_VERSION})",
                       model_bytes=(tmp / MODEL_FILE).stat().st_size, model_sha256=digest, created_at=time.time())
            (tmp / MANIFEST).write_text(json.dumps(man))
            q = OnnxEmbedder(tmp, man["identity"], check_probe=False)
            worst = 1.0
            for kind in ("query", "passage"):
                texts = _parity_texts()
                got, ref = q.encode(texts, kind), base.encode(texts, kind)
                worst = min(worst, float((got * ref).sum(axis=1).min()))
            if worst < INT8_MIN_COSINE:
                raise ExportUnsupported(f"the int8 model answers too far from the float32 one "
                                        f"(lowest cosine {worst:.4f} < {INT8_MIN_COSINE})")
            man["float32_min_cosine"] = worst
            man["probe"] = {"text": PROBE_TEXT, "vector": [float(x) for x in q.encode([PROBE_TEXT], "query")[0]]}
            atomic_write_text(tmp / MANIFEST, json.dumps(man, indent=1))
            atomic_write_text(tmp / VERIFIED_FILE, json.dumps({MODEL_FILE: file_signature(tmp / MODEL_FILE)}))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log(f"int8 model ready in {time.monotonic() - t0:.1f} s: {folder} (lowest cosine to float32 {worst:.4f})")
    return folder


def load_int8_embedder(model_path: Path, identity: str, *, log: Callable[[str], None] = say) -> OnnxEmbedder:
    """The int8 embedder of this model (``embedding.precision = "int8"``): its cached int8 export,
    made from the float32 export (itself made first when missing) when there is none or it is damaged."""
    folder = find_int8(identity)
    if folder is not None:
        try:
            return OnnxEmbedder(folder, str(_manifest(folder)["identity"]))  # type: ignore[index]
        except (ExportDamaged, KeyError, TypeError) as exc:
            log(f"the int8 model is damaged ({exc}); making it again")
            shutil.rmtree(folder, ignore_errors=True)
    folder = make_int8(load_onnx_embedder(model_path, identity, log=log), log=log)
    return OnnxEmbedder(folder, str(_manifest(folder)["identity"]))  # type: ignore[index]


def prepare_export(model_path: Path, identity: str, *, log: Callable[[str], None] = say) -> tuple[Path, bool]:
    """Install time: make the export in this process (torch allowed) unless a working one exists;
    answers its folder and whether it was made now. It is loaded once either way."""
    for stale in damaged_exports(identity):
        shutil.rmtree(stale, ignore_errors=True)
    folder = find_export(identity)
    if folder is not None:
        try:
            OnnxEmbedder(folder, identity)
            return folder, False
        except ExportDamaged as exc:
            log(f"the ONNX export is damaged ({exc}); exporting it again")
            shutil.rmtree(folder, ignore_errors=True)
    folder = export_model(model_path, identity, log=log)
    OnnxEmbedder(folder, identity)
    return folder, True


def main(argv: list[str] | None = None) -> int:
    """``export --model-path DIR [--identity ID]``: exit 0 done, 3 unsupported model, 1 failure."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rmtui.engine.retrieval.modelhost.onnx_model")
    ap.add_argument("command", choices=["export"])
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--identity")
    args = ap.parse_args(argv)
    try:
        folder = export_model(Path(args.model_path), args.identity)
    except ExportUnsupported as exc:
        sys.stderr.write(f"rmtui: this model cannot use ONNX Runtime: {exc}\n")
        return 3
    except Exception as exc:  # noqa: BLE001 - the export runs third-party code; any failure is exit 1 with its text
        sys.stderr.write(f"rmtui: ONNX export failed: {type(exc).__name__}: {exc}\n")
        return 1
    sys.stdout.write(f"{folder}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
