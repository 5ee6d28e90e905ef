"""Configuration of a root, in two files (docs/architecture.md, "The memory root").

``rightmemory.toml`` is shared with RightMemory and holds exactly the original's schema
(docs/formats.md, "Configuration"): every key the original accepts is read, a key neither tool knows is
refused with the nearest known key, and rmtui never writes a key the original does not know.
``rmtui.toml`` beside it holds the settings only rmtui has (approval mode, model paths,
ranking knobs, executor limits); the root's allow-list ``.gitignore`` leaves it untracked, so
it is never committed or synced.

Callers see one namespace of dotted keys and never need to know which file holds a key:
``Config.get("update.approval")`` reads rmtui.toml, ``Config.get("update.async.max_wait_seconds")``
rightmemory.toml, and ``set_config_value`` writes each key to its own file. A root written
before the split (rmtui-only keys in rightmemory.toml) is migrated when it is loaded: those
keys move to rmtui.toml with their comments, and a notice says what moved.

The schemas, default texts and value checks are in ``config_schema``; the rewriting of an
older file in ``config_migrate``; this module reads, caches and writes the files.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from rmtui.engine.errors import UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.config_migrate import migrated_texts, plan_migration
from rmtui.engine.memory.config_schema import (
    CONFIG_FILE,
    EMBEDDING_API_KEY_ENV,
    IGNORED_ORIGINAL_KEYS,
    LOCAL_FILE,
    ORIGINAL_ROLES,
    ORIGINAL_SCHEMA,
    check_value,
    key_file,
    parse_toml,
    specs,
    validate_doc,
)
from rmtui.engine.memory.role_table import ROLES


def parse_config_text(text: str, path: Path, *, file: str | None = None) -> Config:
    """Validate the text of one config file (which one: ``file``, else the path's name)."""
    file = file or (LOCAL_FILE if Path(path).name == LOCAL_FILE else CONFIG_FILE)
    data = validate_doc(parse_toml(text, str(path)), file, str(path))
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
        original, local = specs(dotted)
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
        out.append(f"{CONFIG_FILE} holds an API key ({', '.join(holders)}) in plain text; where the file is "
                   "tracked by Git (an older root's), the key is committed and travels with the root: prefer the "
                   "provider's environment variable (or api_key_env in rmtui.toml, RIGHTMEMORY_EMBEDDING_API_KEY "
                   "for the embedding service)")
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
        doc = parse_toml(_decode(raws[0], path), str(path))
        if plan_migration(doc):
            try:
                notices = migrate_config(root)
                raws = (_read(path), _read(local_path))
            except OSError as exc:  # a read-only root still loads, with the keys moved in memory only
                _, orig_text, local_text = plan_texts(root)
                notices = [f"could not move rmtui-only settings out of {path} ({exc.strerror or exc}); "
                           "they apply from memory this time"]
                NOTIFY(notices[0])
                raws, cacheable = ((orig_text or "").encode(), (local_text or "").encode()), False
    data = (validate_doc(parse_toml(_decode(raws[0], path), str(path)), CONFIG_FILE, str(path))
            if raws[0] is not None else {})
    local = (validate_doc(parse_toml(_decode(raws[1], local_path), str(local_path)), LOCAL_FILE, str(local_path))
             if raws[1] is not None else {})
    if cacheable:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[path] = (raws, copy.deepcopy(data), copy.deepcopy(local))
    return Config(path=path, data=data, local=local, notices=notices)


def plan_texts(root: Path) -> tuple[list[str], str | None, str | None]:
    """What a migration of ``root`` would do: notices and the new texts of both files."""
    root = Path(root)
    path, local_path = root / CONFIG_FILE, root / LOCAL_FILE
    raw = _read(path)
    if raw is None:
        return [], None, None
    doc = parse_toml(_decode(raw, path), str(path))
    moves = plan_migration(doc)
    if not moves:
        return [], None, None
    local_raw = _read(local_path)
    local = parse_toml(_decode(local_raw, local_path), str(local_path)) if local_raw is not None else tomlkit.document()
    return migrated_texts(doc, local, moves, path)


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
    original, local = specs(dotted)
    spec = local if file == LOCAL_FILE else original
    root = Path(root)
    if spec is None:
        raise UsageError(f"unknown config key {dotted!r}")
    check_value(dotted, spec, value, file)
    path = root / file
    _ensure_runtime(root)
    with file_lock(root / ".runtime" / "config.lock"):
        migrate_config(root)  # an older rightmemory.toml gives up its rmtui-only keys first
        raw = _read(path)
        doc = parse_toml(_decode(raw, path), str(path)) if raw is not None else tomlkit.document()
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
        validate_doc(parse_toml(text, str(path)), file, str(path))
        atomic_write_text(path, text)
        if file == LOCAL_FILE:
            ensure_local_ignored(root)
    return load_config(root)


def api_key_from_env(provider: str, api_key_env: str | None) -> str | None:
    """An API key from the environment (the provider's usual variable unless one is named)."""
    name = api_key_env or {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}.get(provider, "")
    return os.environ.get(name) if name else None
