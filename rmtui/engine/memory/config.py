"""Configuration of a root, in two files (docs/architecture.md, "The memory root").

``rightmemory.toml`` is shared with RightMemory and holds exactly the original's schema
(COMPAT.md section 2): every key the original accepts is read, a key neither tool knows is
refused with the nearest known key, and rmtui never writes a key the original does not know.
``rmtui.toml`` beside it holds the settings only rmtui has (approval mode, model paths,
ranking knobs, executor limits); the root's allow-list ``.gitignore`` leaves it untracked, so
it is never committed or synced.

Callers see one namespace of dotted keys and never need to know which file holds a key:
``Config.get("update.approval")`` reads rmtui.toml, ``Config.get("update.async.max_wait_seconds")``
rightmemory.toml, and ``set_config_value`` writes each key to its own file. A root written
before the split (rmtui-only keys in rightmemory.toml) is migrated when it is loaded: those
keys move to rmtui.toml with their comments, and a notice says what moved.
"""

from __future__ import annotations

import copy
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from rmtui.engine.errors import UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.role_table import ROLES

CONFIG_FILE = "rightmemory.toml"  # the original's schema, tracked
LOCAL_FILE = "rmtui.toml"         # rmtui-only settings, never tracked or synced

#: Role tables the original accepts (``[<role>.model]`` xor ``[<role>.agent_cli]``).
ORIGINAL_ROLES = ("dreamer", "historian", "insight", "pruner", "retrieve", "reviewer", "shared-view-builder",
                  "sync-reconciler", "update")
#: A non-retrieve role without an executor of its own uses the first of these that has one,
#: else the top-level ``[agent_cli] provider`` (the original's MODEL_FALLBACK_ROLES).
EXECUTOR_FALLBACK_ORDER = ("update", "dreamer", "insight", "reviewer", "pruner", "sync-reconciler", "historian",
                           "shared-view-builder")
AGENT_CLI_PROVIDERS = ("claude", "codex")
#: Bearer key of an embedding service when ``[retrieve.embedding]`` does not hold one.
EMBEDDING_API_KEY_ENV = "RIGHTMEMORY_EMBEDDING_API_KEY"

#: Keys of rightmemory.toml that rmtui accepts but has no feature for (``status`` lists those a
#: file sets). Glob-like: ``x.*`` is everything under ``x``. Remove an entry when a feature
#: starts reading the key. Executor tables of roles rmtui does not run (dreamer, reviewer,
#: shared-view-builder) are listed by ``ignored_keys`` unless a role inherits them.
IGNORED_ORIGINAL_KEYS = (
    "review.*",                      # transcript review (reviewer) is not part of rmtui
    "dreamer.watch.*",               # no Dreamer cycle
    # the Insight watcher reads trigger_points and update_candidate_points; the daemon's
    # poll paces it, and transcript review (review_session_points) is not part of rmtui
    "insight.watch.check_interval_seconds", "insight.watch.review_session_points",
    "update.async.trigger_candidates",
    "sync.*",                        # no sync yet
)

#: Keys older rmtui wrote into rightmemory.toml under another name the original knows.
RENAMED = {
    ("insight", "threshold"): ("insight", "watch", "trigger_points"),
    ("pruner", "revival_grace"): ("pruner", "revival_grace_checkpoints"),
}


@dataclass(frozen=True)
class Key:
    """One schema entry: accepted Python types, default and the rules its value obeys."""

    types: tuple[type, ...]
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    free_table: bool = False   # a table whose keys are not checked (e.g. model kwargs)
    positive: bool = False     # strictly above zero
    finite: bool = False       # no inf / nan
    nonempty: bool = False     # a string with something besides blanks
    fold: bool = False         # choices compared after strip().lower() (as the original does)
    check: Callable[[Any], str | None] | None = None  # a further rule; answers the problem or None
    items: dict[str, Any] | None = None  # an array of tables, each checked against this schema


def _pos_int(default: int | None = None) -> Key:
    return Key((int,), default, minimum=1)


def _pos_num(default: float | None = None) -> Key:
    return Key((int, float), default, positive=True, finite=True)


def _text() -> Key:
    return Key((str,), nonempty=True)


def _check_url(value: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return "must not carry user information (put the key in api_key or RIGHTMEMORY_EMBEDDING_API_KEY)"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "has an invalid port"
    return None


def _original_role() -> dict[str, Any]:
    return {
        "model": {"model_id": _text(), "api_base": _text(), "api_key": _text(),
                  "kwargs": Key((dict,), free_table=True)},
        "agent_cli": {"provider": Key((str,), choices=AGENT_CLI_PROVIDERS), "model": _text()},
    }


def _watch(trigger: float) -> dict[str, Key]:
    return {"trigger_points": _pos_num(trigger), "update_candidate_points": _pos_num(1.0),
            "check_interval_seconds": _pos_int(3000),
            "review_session_points": _pos_num()}  # accepted by the original, ignored


def _original_schema() -> dict[str, Any]:
    s: dict[str, Any] = {role: _original_role() for role in ORIGINAL_ROLES}
    s["agent_cli"] = {"provider": Key((str,), choices=AGENT_CLI_PROVIDERS)}
    s["retrieve"].update({
        "max_output_chars": _pos_int(100000),
        "backend": Key((str,), choices=("embedding",)),
        "embedding": {"url": Key((str,), check=_check_url), "candidate_count": _pos_int(40),
                      "result_count": _pos_int(10), "timeout_seconds": _pos_num(60.0), "api_key": _text()},
    })
    s["update"]["async"] = {"target_batch_candidates": _pos_int(15), "max_wait_seconds": _pos_int(86400),
                            "trigger_candidates": _pos_int()}
    s["dreamer"]["watch"] = _watch(50.0)
    s["insight"]["watch"] = _watch(150.0)
    s["pruner"].update({"generation_commits": _pos_int(70), "revival_grace_checkpoints": _pos_int(2)})
    s["review"] = {"idle_seconds": _pos_int(21600), "since_days": _pos_int(3), "batch_size": _pos_int(3),
                   "sources": Key((list,), items={"kind": Key((str,), choices=("codex", "claude"), fold=True),
                                                  "path": _text()})}
    s["debug"] = {"trace": Key((bool,), False)}
    s["sync"] = {"enabled": Key((bool,), False), "stale_pull_after_hours": _pos_int(24)}
    return s


def _executor_knobs() -> dict[str, Any]:
    return {
        "model": {"api_key_env": _text(), "max_requests": Key((int,), 40, minimum=1),
                  "tool_retries": Key((int,), 3, minimum=0), "timeout_seconds": Key((int, float), 300, minimum=1)},
        "agent_cli": {"command": Key((str,))},
    }


#: Default file size bounds of ``[limits]`` (writes/admission.py holds the rule).
DEFAULT_MAX_MEMORY_FILE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_INSIGHT_LOG_BYTES = 1024 * 1024


def _local_schema() -> dict[str, Any]:
    s: dict[str, Any] = {}
    for role in ROLES:
        s[role] = _executor_knobs()
        if role not in ORIGINAL_ROLES:  # a role only rmtui has keeps its whole executor here
            s[role]["model"].update({"model_id": _text(), "api_base": _text(), "kwargs": Key((dict,), free_table=True)})
            s[role]["agent_cli"].update({"provider": Key((str,), choices=AGENT_CLI_PROVIDERS), "model": _text()})
    s["update"].update({
        "approval": Key((str,), "auto", choices=("auto", "required")),
        "max_evidence_bytes": Key((int,), 65536, minimum=1),
        "max_attempts": Key((int,), 3, minimum=1),
        "retry_backoff_seconds": Key((int, float), 30, minimum=0),
        "async": {"debounce_seconds": Key((int, float), 3600, minimum=0)},
    })
    s["retrieve"].update({
        "backend": Key((str,), "embedding", choices=("embedding", "agent")),
        "top_k": Key((int,), 8, minimum=1),
        "min_score": Key((int, float), 0.0),
        "fallback_to_agent": Key((bool,), True),
        "max_selection_attempts": Key((int,), 3, minimum=1),
        "min_similarity": Key((int, float), 0.25),
        "lexical_weight": Key((int, float), 0.4, minimum=0),
        "neighbour_weight": Key((int, float), 0.1, minimum=0),
        # the learned second stage (retrieval/stage2.py) re-orders the best candidates
        "learned_rerank": Key((bool,), True),
    })
    s["embedding"] = {
        "model": Key((str,), "all-MiniLM-L6-v2"),
        "model_path": Key((str,)),
        "reranker_path": Key((str,)),
        # "auto": ONNX Runtime when the model has (or can be given) an ONNX export, else torch
        "backend": Key((str,), "auto", choices=("auto", "onnx", "torch")),
        "rerank_top": Key((int,), 30, minimum=1),
        "service_url": Key((str,), check=_check_url),
        "service_token_env": Key((str,)),
        "local_service": Key((bool,), True),
        "idle_timeout_seconds": Key((int, float), 900, minimum=1),
        "dense_budget_seconds": Key((int, float), 10, minimum=0),
        "fallback_lexical": Key((bool,), True),
    }
    s["assistant"] = {"lease_seconds": Key((int, float), 3600, minimum=1)}
    s["sync"] = {"push_after_landing": Key((bool,), True), "fetch_timeout_seconds": Key((int, float), 30, minimum=1),
                 "lease_seconds": Key((int, float), 21600, minimum=1)}
    # the largest file a commit may bring, local or pulled (docs/sync.md, "What a commit may bring")
    s["limits"] = {"max_memory_file_bytes": Key((int,), DEFAULT_MAX_MEMORY_FILE_BYTES, minimum=1),
                   "max_insight_log_bytes": Key((int,), DEFAULT_MAX_INSIGHT_LOG_BYTES, minimum=1)}
    return s


ORIGINAL_SCHEMA = _original_schema()
LOCAL_SCHEMA = _local_schema()
SCHEMAS = {CONFIG_FILE: ORIGINAL_SCHEMA, LOCAL_FILE: LOCAL_SCHEMA}

DEFAULT_TEXT = """\
# rightmemory.toml: configuration of this memory root, shared with RightMemory (which reads
# this file too and refuses any key it does not know). Settings only rmtui has live in
# rmtui.toml beside it, which Git does not track.

[update.async]
# An Update batch forms when this many candidates are queued ...
target_batch_candidates = 15
# ... and never later than this many seconds after the oldest candidate arrived.
max_wait_seconds = 86400

# The model that runs Update, e.g. "anthropic:claude-sonnet-4-5" or "openai:gpt-5". A role
# without [<role>.model] or [<role>.agent_cli] uses the first configured one (update first).
# [update.model]
# model_id = "anthropic:claude-sonnet-4-5"
# api_base = "http://127.0.0.1:8080"   # any compatible endpoint
# API keys come from ANTHROPIC_API_KEY / OPENAI_API_KEY (or api_key_env in rmtui.toml); an
# api_key here would be committed with the root.
#
# Or a coding-agent CLI, for one role or (top level [agent_cli]) for all:
# [update.agent_cli]
# provider = "claude"   # or "codex"

[retrieve]
# Rendered output above this size is an error, never a silent truncation.
max_output_chars = 100000
# A remote RightMemory embedding service (without it rmtui runs a local one):
# backend = "embedding"
# [retrieve.embedding]
# url = "http://127.0.0.1:8766"
# candidate_count = 40   # ranked candidates reranked by the service's reranker ...
# result_count = 10      # ... of which retrieve returns this many

[debug]
# Record role traces under .runtime/.
trace = false
"""

LOCAL_DEFAULT_TEXT = """\
# rmtui.toml: settings only rmtui has, for this root. Git does not track this file and it is
# never synced; the settings shared with RightMemory are in rightmemory.toml. No secrets here
# either: API keys come from environment variables.

[update]
# "auto" queues evidence for Update at once; "required" holds it in an inbox until a
# person approves it (rmtui --headless evidence approve UID, or the workbench).
approval = "auto"
# Largest evidence text accepted by submit, in bytes.
max_evidence_bytes = 65536

[update.async]
# Besides [update.async] in rightmemory.toml, a batch forms this long after a session's last submit.
debounce_seconds = 3600

[retrieve]
# "embedding" (default, no API key needed) or "agent" (a model selects the memory).
backend = "embedding"
# How many ranked items retrieve returns ([retrieve.embedding] result_count when that is set).
top_k = 8

[embedding]
# Sentence-transformers model name (the bundled one by default) or a local path.
model = "all-MiniLM-L6-v2"
# model_path = "/models/my-embedder"
# reranker_path = "/models/my-cross-encoder"
# What runs the embedding model: "auto" (ONNX Runtime from a one-time export when the model
# allows it: starts without torch), "onnx" (only that) or "torch" (sentence-transformers).
# backend = "auto"
"""


# -- schema lookups ----------------------------------------------------------------------------

def _node(schema: dict[str, Any], parts: list[str] | tuple[str, ...]) -> Any:
    node: Any = schema
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _all_keys(schema: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, spec in schema.items():
        dotted = f"{prefix}{name}"
        if isinstance(spec, dict):
            out += _all_keys(spec, dotted + ".")
        else:
            out.append(dotted)
    return out


def nearest_key(dotted: str, siblings: list[str] | None = None) -> str | None:
    """The known key most like ``dotted``: among its siblings first, then anywhere."""
    import difflib

    everywhere = sorted(set(_all_keys(ORIGINAL_SCHEMA)) | set(_all_keys(LOCAL_SCHEMA)))
    for pool, cutoff in ((siblings or [], 0.6), (everywhere, 0.6), (siblings or everywhere, 0.0)):
        found = difflib.get_close_matches(dotted, pool, n=1, cutoff=cutoff)
        if found:
            return found[0]
    return None


def _unknown(label: str, dotted: str, siblings: list[str] | None = None) -> UsageError:
    near = nearest_key(dotted, siblings)
    hint = f" (nearest known key: {near!r})" if near else ""
    prefix = f"{label}: " if label else ""
    return UsageError(f"{prefix}unknown key {dotted!r}{hint}", details={"key": dotted, "nearest": near,
                                                                        **({"file": label} if label else {})})


def key_file(dotted: str) -> str:
    """Which file ``set`` writes ``dotted`` to (rmtui.toml wins for a key both know)."""
    parts = dotted.split(".")
    if isinstance(_node(LOCAL_SCHEMA, parts), Key):
        return LOCAL_FILE
    if isinstance(_node(ORIGINAL_SCHEMA, parts), Key):
        return CONFIG_FILE
    if _node(LOCAL_SCHEMA, parts) is not None or _node(ORIGINAL_SCHEMA, parts) is not None:
        raise UsageError(f"{dotted!r} is a table, not a value")
    raise _unknown("", dotted)


def _specs(dotted: str) -> tuple[Key | None, Key | None]:
    parts = dotted.split(".")
    o, loc = _node(ORIGINAL_SCHEMA, parts), _node(LOCAL_SCHEMA, parts)
    if o is None and loc is None:
        raise _unknown("", dotted)
    o = o if isinstance(o, Key) else None
    loc = loc if isinstance(loc, Key) else None
    if o is None and loc is None:
        raise UsageError(f"{dotted!r} is a table, not a value")
    return o, loc


# -- validation --------------------------------------------------------------------------------

def _walk(doc: Any, schema: dict[str, Any], prefix: str, label: str, other: dict[str, Any] | None,
          other_name: str) -> None:
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        spec = schema.get(key)
        if spec is None:
            if other is not None and _node(other, dotted.split(".")) is not None:
                raise UsageError(f"{label}: {dotted!r} belongs in {other_name}, not here",
                                 details={"key": dotted, "file": label})
            raise _unknown(label, dotted, [f"{prefix}{k}" for k in schema])
        if isinstance(spec, dict):
            if not isinstance(value, dict):
                raise UsageError(f"{label}: {dotted!r} must be a table")
            _walk(value, spec, dotted + ".", label, other, other_name)
            continue
        _check_value(dotted, spec, value, label)


def _check_value(dotted: str, spec: Key, value: Any, label: str = CONFIG_FILE) -> None:
    plain = value.unwrap() if hasattr(value, "unwrap") else value
    ok = isinstance(plain, spec.types) and not (isinstance(plain, bool) and bool not in spec.types)
    if not ok:
        names = " or ".join(t.__name__ for t in spec.types).replace("dict", "table").replace("list", "array")
        raise UsageError(f"{label}: {dotted!r} must be {names}, got {type(plain).__name__}")
    if spec.items is not None:
        for i, entry in enumerate(plain):
            if not isinstance(entry, dict):
                raise UsageError(f"{label}: {dotted}[{i}] must be a table")
            for k, v in entry.items():
                sub = spec.items.get(k)
                if sub is None:
                    raise _unknown(label, f"{dotted}.{k}", [f"{dotted}.{s}" for s in spec.items])
                _check_value(f"{dotted}[{i}].{k}", sub, v, label)
            missing = [k for k in spec.items if k not in entry]
            if missing:
                raise UsageError(f"{label}: {dotted}[{i}] needs {missing[0]!r}")
        return
    shown = plain.strip().lower() if spec.fold and isinstance(plain, str) else plain
    if spec.choices is not None and shown not in spec.choices:
        raise UsageError(f"{label}: {dotted!r} must be one of {', '.join(map(repr, spec.choices))}")
    if spec.nonempty and not plain.strip():
        raise UsageError(f"{label}: {dotted!r} must be a non-empty string")
    if spec.finite and not math.isfinite(plain):
        raise UsageError(f"{label}: {dotted!r} must be a finite number")
    if spec.positive and plain <= 0:
        raise UsageError(f"{label}: {dotted!r} must be above 0")
    if spec.minimum is not None and plain < spec.minimum:
        raise UsageError(f"{label}: {dotted!r} must be at least {spec.minimum}")
    if spec.check is not None:
        problem = spec.check(plain)
        if problem:
            raise UsageError(f"{label}: {dotted!r} {problem}")


def _original_rules(data: dict[str, Any], label: str) -> None:
    """The original's rules that span keys (COMPAT.md section 2)."""
    for role in ORIGINAL_ROLES:
        model = (data.get(role) or {}).get("model")
        if model is None:
            continue
        if "model_id" not in model:
            raise UsageError(f"{label}: [{role}.model] needs model_id", details={"key": f"{role}.model.model_id"})
        clash = sorted({"model_id", "api_base", "api_key"} & set(model.get("kwargs") or {}))
        if clash:
            raise UsageError(f"{label}: [{role}.model.kwargs] must not redefine {', '.join(clash)}")
    retrieve = data.get("retrieve") or {}
    backend, emb = retrieve.get("backend"), retrieve.get("embedding")
    if emb is not None and backend != "embedding":
        raise UsageError(f'{label}: [retrieve.embedding] needs backend = "embedding" in [retrieve]')
    if backend == "embedding":
        if "model" in retrieve:
            raise UsageError(f'{label}: [retrieve] backend = "embedding" cannot be combined with [retrieve.model]')
        if emb is None or "url" not in emb:
            raise UsageError(f'{label}: [retrieve] backend = "embedding" needs [retrieve.embedding] url',
                             details={"key": "retrieve.embedding.url"})
        candidates = emb.get("candidate_count", 40)
        if emb.get("result_count", 10) > candidates:
            raise UsageError(f"{label}: 'retrieve.embedding.result_count' must not exceed candidate_count ({candidates})")


def _validate(doc: Any, file: str, label: str) -> dict[str, Any]:
    """Check one parsed file against its schema; answer its plain data."""
    schema, other_name = SCHEMAS[file], (LOCAL_FILE if file == CONFIG_FILE else CONFIG_FILE)
    _walk(doc, schema, "", label, SCHEMAS[other_name] if file == LOCAL_FILE else None, other_name)
    data = doc.unwrap() if hasattr(doc, "unwrap") else dict(doc)
    if file == CONFIG_FILE:
        _original_rules(data, label)
    return data


def _parse(text: str, label: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise UsageError(f"{label}: malformed TOML: {exc}") from exc


def parse_config_text(text: str, path: Path, *, file: str | None = None) -> Config:
    """Validate the text of one config file (which one: ``file``, else the path's name)."""
    file = file or (LOCAL_FILE if Path(path).name == LOCAL_FILE else CONFIG_FILE)
    data = _validate(_parse(text, str(path)), file, str(path))
    if file == LOCAL_FILE:
        return Config(path=Path(path).parent / CONFIG_FILE, local=data)
    return Config(path=Path(path), data=data)


def validate_config_text(data: str | bytes, filename: str) -> None:
    """Refuse (``UsageError``) a config file's content the loader would refuse, bytes decoded as
    it decodes them; the supervisor's admission and ``validate`` check committed files with it."""
    path = Path(filename)
    text = _decode(data, path) if isinstance(data, bytes) else data
    parse_config_text(text, path)


# -- the loaded configuration --------------------------------------------------------------------

def _dig(data: dict[str, Any], parts: list[str]) -> tuple[bool, Any]:
    node: Any = data
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


@dataclass
class Config:
    """Validated configuration of one root; ``get`` falls back to schema defaults.

    ``data`` is rightmemory.toml, ``local`` rmtui.toml; ``notices`` says what a migration
    during this load moved.
    """

    path: Path
    data: dict[str, Any] = field(default_factory=dict)
    local: dict[str, Any] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)

    @property
    def local_path(self) -> Path:
        return self.path.parent / LOCAL_FILE

    def get(self, dotted: str) -> Any:
        original, local = _specs(dotted)
        parts = dotted.split(".")
        for data, spec in ((self.local, local), (self.data, original)):
            if spec is not None:
                found, value = _dig(data, parts)
                if found:
                    return value
        spec = local or original
        return spec.default if spec is not None else None

    def table(self, dotted: str) -> dict[str, Any] | None:
        """The table at ``dotted``, both files merged (rightmemory.toml wins a clash)."""
        parts = dotted.split(".")
        merged: dict[str, Any] = {}
        found = False
        for data in (self.local, self.data):
            ok, node = _dig(data, parts)
            if ok and isinstance(node, dict):
                merged.update(node)
                found = True
        return merged if found else None

    def source(self, dotted: str) -> str | None:
        """Which file sets ``dotted`` (None: it has its default)."""
        parts = dotted.split(".")
        if _dig(self.local, parts)[0]:
            return LOCAL_FILE
        if _dig(self.data, parts)[0]:
            return CONFIG_FILE
        return None


@dataclass(frozen=True)
class ServiceSettings:
    """An embedding service that is not the local warm one."""

    url: str
    api_key: str | None
    timeout_seconds: float
    candidate_count: int   # how many ranked candidates the reranker reorders
    result_count: int      # how many retrieve returns by default
    original: bool         # from [retrieve.embedding] (RightMemory's own setting)


def embedding_service(cfg: Config) -> ServiceSettings | None:
    """The configured embedding service: ``[retrieve.embedding]``, else rmtui's ``embedding.service_url``."""
    retrieve = cfg.data.get("retrieve") or {}
    emb = retrieve.get("embedding")
    if retrieve.get("backend") == "embedding" and emb:
        key = emb.get("api_key") or os.environ.get(EMBEDDING_API_KEY_ENV) or None
        return ServiceSettings(emb["url"].strip(), key, float(cfg.get("retrieve.embedding.timeout_seconds")),
                               int(cfg.get("retrieve.embedding.candidate_count")),
                               int(cfg.get("retrieve.embedding.result_count")), True)
    url = cfg.get("embedding.service_url")
    if url:
        env = cfg.get("embedding.service_token_env")
        return ServiceSettings(url, os.environ.get(env) if env else None, 60.0, int(cfg.get("embedding.rerank_top")),
                               int(cfg.get("retrieve.top_k")), False)
    return None


#: Which role tables the configured executors come from (set by the executor layer, which
#: sits above this one; None until it is imported).
executor_sources: Callable[[Config], set[str]] | None = None


def ignored_keys(cfg: Config) -> list[str]:
    """Keys rightmemory.toml sets that rmtui accepts but does not use."""
    import fnmatch

    out: list[str] = []

    def leaves(node: dict[str, Any], schema: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            spec = schema.get(key) if isinstance(schema, dict) else None
            if isinstance(spec, dict) and isinstance(value, dict):
                leaves(value, spec, dotted + ".")
            elif any(fnmatch.fnmatchcase(dotted, pat) or dotted == pat for pat in IGNORED_ORIGINAL_KEYS):
                out.append(dotted)

    leaves(cfg.data, ORIGINAL_SCHEMA, "")
    # executor tables of roles rmtui does not run count only when some rmtui role inherits them
    foreign = [r for r in ORIGINAL_ROLES if r not in ROLES]
    used = executor_sources(cfg) if executor_sources is not None else set()
    for role in foreign:
        for kind in ("model", "agent_cli"):
            if isinstance((cfg.data.get(role) or {}).get(kind), dict) and role not in used:
                out.append(f"{role}.{kind}")
    return sorted(out)


def config_warnings(cfg: Config) -> list[str]:
    """Settings that work but deserve a word (an API key in a tracked, synced file)."""
    out = []
    holders = [f"[{role}.model] api_key" for role in ORIGINAL_ROLES
               if ((cfg.data.get(role) or {}).get("model") or {}).get("api_key")]
    if ((cfg.data.get("retrieve") or {}).get("embedding") or {}).get("api_key"):
        holders.append("[retrieve.embedding] api_key")
    if holders:
        out.append(f"{CONFIG_FILE} holds an API key ({', '.join(holders)}); the file is tracked by Git, so the "
                   "key is committed and travels with the root: prefer the provider's environment variable "
                   "(or api_key_env in rmtui.toml, RIGHTMEMORY_EMBEDDING_API_KEY for the embedding service)")
    return out


# -- loading (and migrating) ---------------------------------------------------------------------

# Parsed configs keyed by the files' exact bytes: tomlkit parsing costs milliseconds and hot
# paths (every evidence submit) read the config, while reading the bytes costs microseconds
# and, unlike timestamps, never misses a rewrite.
_CACHE: dict[Path, tuple[tuple[bytes | None, bytes | None], dict[str, Any], dict[str, Any]]] = {}
_CACHE_MAX = 32

#: Where migration notices go (the CLI's stderr; a front may replace it).
NOTIFY: Callable[[str], None] = lambda text: print(f"rmtui: {text}", file=sys.stderr)  # noqa: E731


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror}") from exc


def _decode(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8-sig")  # a leading byte-order mark is tolerated, as in MEMORY.md
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not valid UTF-8") from exc


def load_config(root: Path) -> Config:
    root = Path(root)
    path, local_path = root / CONFIG_FILE, root / LOCAL_FILE
    raws = (_read(path), _read(local_path))
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == raws:
        return Config(path=path, data=copy.deepcopy(hit[1]), local=copy.deepcopy(hit[2]))
    notices: list[str] = []
    cacheable = True
    if raws[0] is not None:
        doc = _parse(_decode(raws[0], path), str(path))
        if _plan_migration(doc):
            try:
                notices = migrate_config(root)
                raws = (_read(path), _read(local_path))
            except OSError as exc:  # a read-only root still loads, with the keys moved in memory only
                _, orig_text, local_text = plan_texts(root)
                notices = [f"could not move rmtui-only settings out of {path} ({exc.strerror or exc}); "
                           "they apply from memory this time"]
                NOTIFY(notices[0])
                raws, cacheable = ((orig_text or "").encode(), (local_text or "").encode()), False
    data = _validate(_parse(_decode(raws[0], path), str(path)), CONFIG_FILE, str(path)) if raws[0] is not None else {}
    local = (_validate(_parse(_decode(raws[1], local_path), str(local_path)), LOCAL_FILE, str(local_path))
             if raws[1] is not None else {})
    if cacheable:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[path] = (raws, copy.deepcopy(data), copy.deepcopy(local))
    return Config(path=path, data=data, local=local, notices=notices)


def _plan_migration(doc: Any) -> list[tuple[tuple[str, ...], str, tuple[str, ...]]]:
    """Keys of rightmemory.toml the original does not know but rmtui does: (path, file, new path)."""
    moves: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = []

    def walk(node: Any, orig: Any, local: Any, path: tuple[str, ...]) -> None:
        for key, value in list(node.items()):
            p = path + (key,)
            o = orig.get(key) if isinstance(orig, dict) else None
            loc = local.get(key) if isinstance(local, dict) else None
            if p == ("retrieve", "backend") and not (value == "embedding" and "embedding" in node):
                moves.append((p, LOCAL_FILE, p))  # "agent", or rmtui's own embedding backend: rmtui's choice
                continue
            if o is not None:
                if isinstance(o, dict) and isinstance(value, dict):
                    walk(value, o, loc, p)
                continue
            if p in RENAMED:
                moves.append((p, CONFIG_FILE, RENAMED[p]))
            elif loc is not None:
                moves.append((p, LOCAL_FILE, p))

    walk(doc, ORIGINAL_SCHEMA, LOCAL_SCHEMA, ())
    return moves


def _container(node: Any) -> Any:
    return node.value if hasattr(node, "value") and not isinstance(node, tomlkit.TOMLDocument) else node


def _pluck(doc: Any, path: tuple[str, ...]) -> tuple[list[str], Any]:
    """Remove ``path`` from ``doc``; answer the comment lines just above it and its item."""
    from tomlkit.items import Comment, Null

    parent: Any = doc
    for part in path[:-1]:
        parent = parent[part]
    container = _container(parent)
    for part_table in getattr(parent, "_tables", ()):  # a table split by out-of-order sub-tables
        if path[-1] in part_table:
            container = part_table.value
    item = parent[path[-1]]
    comments: list[str] = []
    body = getattr(container, "body", None)
    if body is not None and not isinstance(item, dict):
        idx = next((i for i, (k, _) in enumerate(body) if k is not None and k.key == path[-1]), None)
        j = (idx or 0) - 1
        while idx is not None and j >= 0 and body[j][0] is None and isinstance(body[j][1], Comment):
            comments.insert(0, body[j][1].as_string().strip())
            body[j] = (None, Null())
            j -= 1
    del parent[path[-1]]
    return comments, item


def _has(doc: Any, path: tuple[str, ...]) -> bool:
    node = doc
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _put(doc: Any, path: tuple[str, ...], item: Any, comments: list[str]) -> None:
    node = doc
    for depth, part in enumerate(path[:-1]):
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):  # e.g. `retrieve = false` where a table must go
            raise UsageError(f"{LOCAL_FILE}: {'.'.join(path[:depth + 1])} must be a table to hold "
                             f"{'.'.join(path)}")
    if path[-1] in node:
        del node[path[-1]]
    for line in comments:
        node.add(tomlkit.comment(line.lstrip("#").strip()))
    plain = item.unwrap() if hasattr(item, "unwrap") else item
    if isinstance(plain, dict):
        node[path[-1]] = item if isinstance(item, dict) and not hasattr(item, "trivia") else _copy_table(item)
    else:
        node[path[-1]] = item


def _copy_table(item: Any) -> Any:
    """A table moved between documents keeps its comments: re-parse its own text."""
    try:
        return tomlkit.parse(tomlkit.dumps({"_": item}))["_"]
    except Exception:  # noqa: BLE001 - fall back to the values alone
        return item.unwrap()


def _prune_empty(doc: Any, paths: list[tuple[str, ...]]) -> None:
    """Drop tables a move emptied (an empty [update.model] would be a model without model_id)."""
    for path in sorted({p[:i] for p in paths for i in range(1, len(p))}, key=len, reverse=True):
        if _has(doc, path):
            parent = doc
            for part in path[:-1]:
                parent = parent[part]
            node = parent[path[-1]]
            if isinstance(node, dict) and not dict(node):
                del parent[path[-1]]


def plan_texts(root: Path) -> tuple[list[str], str | None, str | None]:
    """What a migration of ``root`` would do: notices and the new texts of both files."""
    root = Path(root)
    path, local_path = root / CONFIG_FILE, root / LOCAL_FILE
    raw = _read(path)
    if raw is None:
        return [], None, None
    doc = _parse(_decode(raw, path), str(path))
    moves = _plan_migration(doc)
    if not moves:
        return [], None, None
    local_raw = _read(local_path)
    local = _parse(_decode(local_raw, local_path), str(local_path)) if local_raw is not None else tomlkit.document()
    moved: list[str] = []
    renamed: list[str] = []
    for old, file, new in moves:
        comments, item = _pluck(doc, old)
        target = local if file == LOCAL_FILE else doc
        if file == CONFIG_FILE and _has(doc, new):
            renamed.append(f"{'.'.join(old)} dropped ({'.'.join(new)} is already set)")
            continue
        _put(target, new, item, comments)
        (moved if file == LOCAL_FILE else renamed).append(
            ".".join(old) if file == LOCAL_FILE else f"{'.'.join(old)} renamed to {'.'.join(new)}")
    _prune_empty(doc, [m[0] for m in moves])
    orig_text, local_text = tomlkit.dumps(doc), tomlkit.dumps(local)
    label = f"{path} (migrating rmtui-only keys to {LOCAL_FILE})"
    _validate(_parse(orig_text, label), CONFIG_FILE, str(path))
    _validate(_parse(local_text, label), LOCAL_FILE, label)
    notices = []
    if moved:
        notices.append(f"moved rmtui-only settings from {CONFIG_FILE} to {LOCAL_FILE}: {', '.join(moved)}")
    notices += [f"{CONFIG_FILE}: {r}" for r in renamed]
    notices.append(f"{CONFIG_FILE} was changed in the work tree only (not committed)")
    return notices, orig_text, local_text


def migrate_config(root: Path, *, notify: bool = True) -> list[str]:
    """Move rmtui-only keys out of rightmemory.toml into rmtui.toml; answer what moved.

    Nothing is written unless both resulting files are valid. rmtui.toml is written first, so
    a crash in between leaves a key in both files, and the next load moves it again.
    """
    from rmtui.engine.locks import file_lock

    root = Path(root)
    _ensure_runtime(root)
    with file_lock(root / ".runtime" / "config.lock"):
        notices, orig_text, local_text = plan_texts(root)
        if orig_text is None or local_text is None:
            return []
        atomic_write_text(root / LOCAL_FILE, local_text)
        ensure_local_ignored(root)
        atomic_write_text(root / CONFIG_FILE, orig_text)
    _CACHE.pop(root / CONFIG_FILE, None)
    if notify:
        for line in notices:
            NOTIFY(line)
    return notices


def _ensure_runtime(root: Path) -> None:
    rt = root / ".runtime"
    if not (rt / ".gitignore").exists():
        rt.mkdir(parents=True, exist_ok=True)
        atomic_write_text(rt / ".gitignore", "*\n")


def ensure_local_ignored(root: Path) -> None:
    """rmtui.toml must never be tracked: if the root's .gitignore does not already leave it out
    (the allow-list does), exclude it in ``.git/info/exclude``, which is never committed."""
    import subprocess

    root = Path(root)
    if not (root / ".git").is_dir():
        return
    try:
        r = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", LOCAL_FILE],
                           capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return
    if r.returncode == 1:  # not ignored
        exclude = root / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        old = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        atomic_write_text(exclude, old + ("" if old.endswith("\n") or not old else "\n") + f"/{LOCAL_FILE}\n")


def set_config_value(root: Path, dotted: str, value: Any) -> Config:
    """Set one key in its file, keeping every comment and the layout of the rest of the file."""
    from rmtui.engine.locks import file_lock

    file = key_file(dotted)
    original, local = _specs(dotted)
    spec = local if file == LOCAL_FILE else original
    root = Path(root)
    if spec is None:
        raise UsageError(f"unknown config key {dotted!r}")
    _check_value(dotted, spec, value, file)
    path = root / file
    _ensure_runtime(root)
    with file_lock(root / ".runtime" / "config.lock"):
        migrate_config(root)  # an older rightmemory.toml gives up its rmtui-only keys first
        raw = _read(path)
        doc = _parse(_decode(raw, path), str(path)) if raw is not None else tomlkit.document()
        parts = dotted.split(".")
        node = doc
        for part in parts[:-1]:
            if part not in node:
                node[part] = tomlkit.table()
            node = node[part]
        node[parts[-1]] = value
        if file == CONFIG_FILE and parts[:2] == ["retrieve", "embedding"]:
            doc["retrieve"]["backend"] = "embedding"  # the original needs both together
        text = tomlkit.dumps(doc)
        _validate(_parse(text, str(path)), file, str(path))
        atomic_write_text(path, text)
        if file == LOCAL_FILE:
            ensure_local_ignored(root)
    return load_config(root)


def api_key_from_env(provider: str, api_key_env: str | None) -> str | None:
    """An API key from the environment (the provider's usual variable unless one is named)."""
    name = api_key_env or {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}.get(provider, "")
    return os.environ.get(name) if name else None
