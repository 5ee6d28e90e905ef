"""``rightmemory.toml``: a typed schema read and written with tomlkit, comments kept.

Unknown keys and wrong types are refused with the key's dotted name. Secrets never live
here: API keys come from environment variables (``api_key_env`` names which one).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from rmtui.engine.errors import UsageError
from rmtui.engine.fsutil import atomic_write_text

CONFIG_FILE = "rightmemory.toml"

ROLES = ("retrieve", "update", "update-correction", "pruner", "insight", "historian", "sync-reconciler")
WRITER_ROLES = ("update", "update-correction", "pruner", "insight", "sync-reconciler")


@dataclass(frozen=True)
class Key:
    """One schema entry: accepted Python types, default, optional choices."""

    types: tuple[type, ...]
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    free_table: bool = False  # a table whose keys are not checked (e.g. model kwargs)


def _role_tables() -> dict[str, Any]:
    return {
        "model": {
            "model_id": Key((str,)),
            "api_base": Key((str,)),
            "api_key_env": Key((str,)),
            "kwargs": Key((dict,), free_table=True),
            "max_requests": Key((int,), 40, minimum=1),
            "tool_retries": Key((int,), 3, minimum=0),
            "timeout_seconds": Key((int, float), 300, minimum=1),
        },
        "agent_cli": {
            "provider": Key((str,), choices=("claude", "codex")),
            "model": Key((str,)),
            "command": Key((str,)),
        },
    }


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = {
        "update": {
            "approval": Key((str,), "auto", choices=("auto", "required")),
            "max_evidence_bytes": Key((int,), 65536, minimum=1),
            "max_attempts": Key((int,), 3, minimum=1),
            "retry_backoff_seconds": Key((int, float), 30, minimum=0),
            "async": {
                "target_batch_candidates": Key((int,), 15, minimum=1),
                "debounce_seconds": Key((int, float), 3600, minimum=0),
                "max_wait_seconds": Key((int, float), 86400, minimum=0),
            },
            **_role_tables(),
        },
        "retrieve": {
            "backend": Key((str,), "embedding", choices=("embedding", "agent")),
            "max_output_chars": Key((int,), 100000, minimum=1),
            "top_k": Key((int,), 8, minimum=1),
            "min_score": Key((int, float), 0.0),
            "fallback_to_agent": Key((bool,), True),
            "max_selection_attempts": Key((int,), 3, minimum=1),
            "min_similarity": Key((int, float), 0.25),
            "lexical_weight": Key((int, float), 0.5, minimum=0),
            "neighbour_weight": Key((int, float), 0.3, minimum=0),
            **_role_tables(),
        },
        "embedding": {
            "model": Key((str,), "all-MiniLM-L6-v2"),
            "model_path": Key((str,)),
            "reranker_path": Key((str,)),
            "rerank_top": Key((int,), 30, minimum=1),
            "service_url": Key((str,)),
            "service_token_env": Key((str,)),
            "local_service": Key((bool,), True),
            "idle_timeout_seconds": Key((int, float), 900, minimum=1),
            "dense_budget_seconds": Key((int, float), 10, minimum=0),
            "fallback_lexical": Key((bool,), True),
        },
        "assistant": {
            "lease_seconds": Key((int, float), 3600, minimum=1),
        },
        "insight": {"threshold": Key((int,), 150, minimum=1), **_role_tables()},
        "pruner": {
            "generation_commits": Key((int,), 70, minimum=1),
            "revival_grace": Key((int,), 2, minimum=0),
            **_role_tables(),
        },
        "sync": {
            "remote": Key((str,)),
            "branch": Key((str,)),
            "queue": Key((str,), "local", choices=("local", "git")),
            **_role_tables(),
        },
        "debug": {"trace": Key((bool,), False)},
    }
    for role in ROLES:
        schema.setdefault(role, {}).update({k: v for k, v in _role_tables().items() if k not in schema[role]})
    return schema


SCHEMA = _schema()

DEFAULT_TEXT = """\
# rightmemory.toml: configuration of this memory root (no secrets: API keys come from
# environment variables, named with api_key_env where the provider's usual one is not used).

[update]
# "auto" queues evidence for Update at once; "required" holds it in an inbox until a
# person approves it (rmtui --headless evidence approve UID, or the workbench).
approval = "auto"
# Largest evidence text accepted by submit, in bytes.
max_evidence_bytes = 65536

[update.async]
# A batch forms when this many candidates are ready ...
target_batch_candidates = 15
# ... or this long after a session's last submit ...
debounce_seconds = 3600
# ... and never later than this after the oldest candidate arrived.
max_wait_seconds = 86400

# The model that runs Update, e.g. "anthropic:claude-sonnet-4-5" or "openai:gpt-5".
# [update.model]
# model_id = "anthropic:claude-sonnet-4-5"
# api_base = "http://127.0.0.1:8080"   # any compatible endpoint
# api_key_env = "ANTHROPIC_API_KEY"

[retrieve]
# "embedding" (default, no API key needed) or "agent" (a model selects the memory).
backend = "embedding"
# Rendered output above this size is an error, never a silent truncation.
max_output_chars = 100000
# How many ranked items retrieve returns.
top_k = 8

[embedding]
# Sentence-transformers model name (the bundled one by default) or a local path.
model = "all-MiniLM-L6-v2"
# model_path = "/models/my-embedder"
# reranker_path = "/models/my-cross-encoder"
# service_url = "http://127.0.0.1:8765"   # a RightMemory embedding service
"""


def _walk(doc: Any, schema: dict[str, Any], prefix: str) -> None:
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        spec = schema.get(key)
        if spec is None:
            raise UsageError(f"{CONFIG_FILE}: unknown key {dotted!r}")
        if isinstance(spec, dict):
            if not isinstance(value, dict):
                raise UsageError(f"{CONFIG_FILE}: {dotted!r} must be a table")
            _walk(value, spec, dotted + ".")
            continue
        _check_value(dotted, spec, value)


def _check_value(dotted: str, spec: Key, value: Any) -> None:
    plain = value.unwrap() if hasattr(value, "unwrap") else value
    ok = isinstance(plain, spec.types) and not (isinstance(plain, bool) and bool not in spec.types)
    if not ok:
        names = " or ".join(t.__name__ for t in spec.types).replace("dict", "table")
        raise UsageError(f"{CONFIG_FILE}: {dotted!r} must be {names}, got {type(plain).__name__}")
    if spec.choices is not None and plain not in spec.choices:
        raise UsageError(f"{CONFIG_FILE}: {dotted!r} must be one of {', '.join(map(repr, spec.choices))}")
    if spec.minimum is not None and plain < spec.minimum:
        raise UsageError(f"{CONFIG_FILE}: {dotted!r} must be at least {spec.minimum}")


def _lookup_spec(dotted: str) -> Key:
    node: Any = SCHEMA
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise UsageError(f"{CONFIG_FILE}: unknown key {dotted!r}")
        node = node[part]
    if not isinstance(node, Key):
        raise UsageError(f"{CONFIG_FILE}: {dotted!r} is a table, not a value")
    return node


@dataclass
class Config:
    """Validated configuration of one root; ``get`` falls back to schema defaults."""

    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    def get(self, dotted: str) -> Any:
        spec = _lookup_spec(dotted)
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return spec.default
            node = node[part]
        return node

    def table(self, dotted: str) -> dict[str, Any] | None:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node if isinstance(node, dict) else None


def parse_config_text(text: str, path: Path) -> Config:
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise UsageError(f"{path.name}: malformed TOML: {exc}") from exc
    _walk(doc, SCHEMA, "")
    return Config(path=path, data=doc.unwrap())


# Parsed configs keyed by the file's exact bytes: tomlkit parsing costs milliseconds and hot
# paths (every evidence submit) read the config, while reading the bytes costs microseconds
# and, unlike timestamps, never misses a rewrite.
_CACHE: dict[Path, tuple[bytes, dict[str, Any]]] = {}
_CACHE_MAX = 32


def load_config(root: Path) -> Config:
    path = Path(root) / CONFIG_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Config(path=path)
    except OSError as exc:
        raise UsageError(f"{CONFIG_FILE}: cannot be read: {exc.strerror}") from exc
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == raw:
        return Config(path=path, data=copy.deepcopy(hit[1]))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{CONFIG_FILE}: not valid UTF-8") from exc
    cfg = parse_config_text(text, path)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[path] = (raw, copy.deepcopy(cfg.data))
    return cfg


def set_config_value(root: Path, dotted: str, value: Any) -> Config:
    """Set one key, keeping every comment and the layout of the rest of the file."""
    spec = _lookup_spec(dotted)
    _check_value(dotted, spec, value)
    path = Path(root) / CONFIG_FILE
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    parts = dotted.split(".")
    node = doc
    for part in parts[:-1]:
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
    node[parts[-1]] = value
    text = tomlkit.dumps(doc)
    cfg = parse_config_text(text, path)
    atomic_write_text(path, text)
    return cfg


def api_key_from_env(provider: str, api_key_env: str | None) -> str | None:
    """API keys only ever come from the environment."""
    name = api_key_env or {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}.get(provider, "")
    return os.environ.get(name) if name else None
