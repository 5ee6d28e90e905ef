"""Configuration of a root, in two files (docs/architecture.md, "The memory root").

``rightmemory.toml`` is shared with RightMemory and holds exactly the original's schema
(docs/formats.md, "Configuration"): every key the original accepts is read, a key neither tool knows is
refused with the nearest known key, and rmtui never writes a key the original does not know.
``rmtui.toml`` beside it holds the settings only rmtui has (approval mode, model paths,
ranking knobs, executor limits); the root's allow-list ``.gitignore`` leaves it untracked, so
it is never committed or synced.

Callers see one namespace of dotted keys and never need to know which file holds a key:
``Config.get("update.approval")`` reads rmtui.toml, ``Config.get("update.async.max_wait_seconds")``
rightmemory.toml, and ``set_config_value`` writes each key to its own file.

Reading only reads: no file is written and no lock taken, and each file is parsed and checked
once per process while it stays the same. A root written before the split (rmtui-only keys in
rightmemory.toml) is read as if migrated, with one notice naming ``config migrate``, the
explicit step (also run by ``init``) that moves those keys to rmtui.toml with their comments.
As in the original, a problem inside one role's executor table refuses only the roles that
run on that table (``Config.role_problems``), not every command.

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
from rmtui.engine.memory.config_migrate import Moved, apply_moves, migrated_texts, plan_migration
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
    """Validate the text of one config file (which one: ``file``, else the path's name) as the
    loader does: a problem inside a role's executor table is kept for that role, not refused."""
    file = file or (LOCAL_FILE if Path(path).name == LOCAL_FILE else CONFIG_FILE)
    problems: dict[str, str] = {}
    data = validate_doc(parse_toml(text, str(path)), file, str(path), deferred=problems)
    if file == LOCAL_FILE:
        return Config(path=Path(path).parent / CONFIG_FILE, local=data)
    return Config(path=Path(path), data=data, role_problems=problems)


def validate_config_text(data: str | bytes, filename: str) -> None:
    """Refuse (``UsageError``) a config file's content the loader would refuse, bytes decoded as
    it decodes them; the supervisor's admission and ``validate`` check committed files with it
    (a file the original loads for some roles is not refused here either)."""
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

    ``data`` is rightmemory.toml, ``local`` rmtui.toml; ``notices`` says that rightmemory.toml is
    in an older layout (applied from memory; ``config migrate`` writes it); ``role_problems``
    holds, per role table (``agent_cli``: the top-level one), why the original would refuse a
    role that runs on it.
    """

    path: Path
    data: dict[str, Any] = field(default_factory=dict)
    local: dict[str, Any] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    role_problems: dict[str, str] = field(default_factory=dict)

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
    out = [f"{problem}: a role that runs on this table is refused until it is fixed; the others run"
           for problem in cfg.role_problems.values()]

    def model_table(role: str) -> dict[str, Any]:
        section = cfg.data.get(role)
        model = section.get("model") if isinstance(section, dict) else None
        return model if isinstance(model, dict) else {}

    holders = [f"[{role}.model] api_key" for role in ORIGINAL_ROLES if model_table(role).get("api_key")]
    if ((cfg.data.get("retrieve") or {}).get("embedding") or {}).get("api_key"):
        holders.append("[retrieve.embedding] api_key")
    if holders:
        out.append(f"{CONFIG_FILE} holds an API key ({', '.join(holders)}) in plain text; where the file is "
                   "tracked by Git (an older root's), the key is committed and travels with the root: prefer the "
                   "provider's environment variable (or api_key_env in rmtui.toml, RIGHTMEMORY_EMBEDDING_API_KEY "
                   "for the embedding service)")
    return out


# -- loading -------------------------------------------------------------------------------------

# Loaded configs keyed by both files' (mtime, size, inode): tomlkit parsing costs milliseconds
# and hot paths (every evidence submit, every retrieve) read the config many times, so each
# file is parsed and validated once per process while it stays the same file. Every write
# here replaces the file (a new inode), so a rewrite is never missed.
_StatKey = tuple[int, int, int] | None


@dataclass(frozen=True)
class _Loaded:
    keys: tuple[_StatKey, _StatKey]
    data: dict[str, Any]
    local: dict[str, Any]
    notices: list[str]
    problems: dict[str, str]


_CACHE: dict[Path, _Loaded] = {}
_CACHE_MAX = 32
_TOLD: set[tuple[Path, tuple[_StatKey, _StatKey]]] = set()  # older layouts already reported

#: Where the one-line notice of an older layout goes (the CLI's stderr; a front may replace it).
NOTIFY: Callable[[str], None] = lambda text: print(f"rmtui: {text}", file=sys.stderr)  # noqa: E731


def _stat(path: Path) -> _StatKey:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror}") from exc
    return (st.st_mtime_ns, st.st_size, st.st_ino)


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


def _parse(path: Path) -> tomlkit.TOMLDocument | None:
    raw = _read(path)
    return None if raw is None else parse_toml(_decode(raw, path), str(path))


def migrate_hint(root: Path) -> str:
    import shlex

    return f"rmtui --headless config migrate --root {shlex.quote(str(root))}"


def _load(root: Path, keys: tuple[_StatKey, _StatKey]) -> _Loaded:
    """Parse and validate both files once; an older layout is applied in memory, never written."""
    path, local_path = root / CONFIG_FILE, root / LOCAL_FILE
    doc, local_doc = _parse(path), _parse(local_path)
    notices: list[str] = []
    if doc is not None:
        moves = plan_migration(doc)
        if moves:
            local_doc = local_doc if local_doc is not None else tomlkit.document()
            done = apply_moves(doc, local_doc, moves)
            notices.append(f"{path} is in an older layout: {done.summary()}; they apply from memory, and "
                           f"`{migrate_hint(root)}` moves them for good")
    problems: dict[str, str] = {}
    data = validate_doc(doc, CONFIG_FILE, str(path), deferred=problems) if doc is not None else {}
    local = validate_doc(local_doc, LOCAL_FILE, str(local_path)) if local_doc is not None else {}
    return _Loaded(keys, data, local, notices, problems)


def load_config(root: Path) -> Config:
    """The root's configuration, read only: no file is written and no lock is taken (an older
    layout is applied in memory and reported once, naming ``config migrate``)."""
    root = Path(root)
    path = root / CONFIG_FILE
    keys = (_stat(path), _stat(root / LOCAL_FILE))
    hit = _CACHE.get(path)
    if hit is None or hit.keys != keys:
        hit = _load(root, keys)
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[path] = hit
    if hit.notices and (path, keys) not in _TOLD:
        _TOLD.add((path, keys))
        for line in hit.notices:
            NOTIFY(line)
    return Config(path=path, data=copy.deepcopy(hit.data), local=copy.deepcopy(hit.local),
                  notices=list(hit.notices), role_problems=dict(hit.problems))


def read_config(root: Path, *, unreadable_ok: bool = False) -> tuple[Config, str | None]:
    """The configuration for ``status`` and ``config get``, which must show a file the loader
    refuses so a person can see and fix it: the checked config and None, or the values as
    written and why the loader refuses them. A file that is not TOML at all refuses (nothing
    in it can be shown; the error names the line) unless ``unreadable_ok``: then it counts as
    empty, for ``status``, which reports the error and needs no value."""
    root = Path(root)
    try:
        return load_config(root), None
    except UsageError as exc:
        refused = exc.message

    def values(path: Path) -> dict[str, Any]:
        try:
            doc = _parse(path)
        except UsageError:
            if not unreadable_ok:
                raise
            return {}
        return doc.unwrap() if doc is not None else {}

    path = root / CONFIG_FILE
    return Config(path=path, data=values(path), local=values(root / LOCAL_FILE)), refused


def plan_texts(root: Path) -> tuple[Moved, str | None, str | None]:
    """What a migration of ``root`` would do: what moves and the new texts of both files
    (None, None: nothing to move)."""
    root = Path(root)
    return migrated_texts_of(root / CONFIG_FILE, root)


def migrated_texts_of(path: Path, root: Path) -> tuple[Moved, str | None, str | None]:
    """The migration of the rightmemory.toml at ``path`` into ``root``'s rmtui.toml (the file
    may be a supervisor worktree's copy; rmtui.toml is always the root's own)."""
    doc = _parse(path)
    moves = plan_migration(doc) if doc is not None else []
    if doc is None or not moves:
        return Moved(), None, None
    local = _parse(Path(root) / LOCAL_FILE)
    return migrated_texts(doc, local if local is not None else tomlkit.document(), moves, path)


def migrate_config(root: Path) -> Moved:
    """Move rmtui-only keys out of rightmemory.toml into rmtui.toml (``config migrate``, ``init``);
    answer what moved.

    Nothing is written unless both resulting files are valid. rmtui.toml is written first, so
    a crash in between leaves a key in both files, and the next migration moves it again.
    """
    from rmtui.engine.locks import file_lock

    root = Path(root)
    _ensure_runtime(root)
    with file_lock(root / ".runtime" / "config.lock"):
        done, orig_text, local_text = plan_texts(root)
        if orig_text is None or local_text is None:
            return done
        write_migrated(root, orig_text, local_text)
    return done


def write_migrated(root: Path, orig_text: str | None, local_text: str) -> None:
    """Write a migration's texts: rmtui.toml first (kept out of Git), then rightmemory.toml
    (None: it is written elsewhere, e.g. through a supervised commit)."""
    atomic_write_text(root / LOCAL_FILE, local_text)
    ensure_local_ignored(root)
    if orig_text is not None:
        atomic_write_text(root / CONFIG_FILE, orig_text)


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
        if plan_texts(root)[1] is not None:  # its old keys would shadow the value set (and move only by hand)
            raise UsageError(f"{root / CONFIG_FILE} is in an older layout (rmtui-only settings in it): run "
                             f"`{migrate_hint(root)}` first, then set {dotted} again")
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
