"""What shared views keep where (docs/formats.md, "Shared views"): ids, paths, ``shared_views.toml``, credentials,
provider tokens, pull state, and the one supervised write every tracked change goes through.

Tracked (synchronised): ``shared_views.toml`` (the consumer's connections) and, on the
provider side, ``shared_views/<view>/{view.md,recipe.toml,question.toml,retriever.md}``.
Untracked, under ``.runtime/shared_views/``: ``credentials.toml`` (the consumer's bearer
tokens, mode 0600), ``provider_tokens.toml`` (the provider's issued tokens, as SHA-256
hashes only), ``state.json`` (freshness of each import), ``imports/<view>/`` (validated
packages), ``builds/<view>/`` (the provider's last built package).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rmtui.engine.errors import UsageError
from rmtui.engine.fsutil import atomic_write_bytes, atomic_write_text
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views.address import check_view_id, parse_join_url

REGISTRY_FILE = "shared_views.toml"
PROVIDER_DIR = "shared_views"
VIEW_TYPES = ("file", "question")
RELATIONSHIPS = ("human", "owned-agent", "team-space", "external")
TARGET_KINDS = ("none", "http-file", "http-question", "revoked", "git-file")
# In the original's order; a Git file target names its share by git_url, git_branch, git_share_id.
TARGET_KEYS = ("kind", "view_id", "base_url", "credential_id", "question_base_url", "question_credential_id",
               "git_url", "git_branch", "git_share_id", "version_id", "accepted_from_url")
CONNECTION_KEYS = ("type", "ref", "relationship", "maintainer", "description", "accepted_from", "target")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- places --------------------------------------------------------------------------------

def runtime_dir(root: MemoryRoot) -> Path:
    return root.ensure_runtime() / "shared_views"


def imports_dir(root: MemoryRoot) -> Path:
    return runtime_dir(root) / "imports"


def builds_dir(root: MemoryRoot) -> Path:
    return runtime_dir(root) / "builds"


def lock_path(root: MemoryRoot, name: str) -> Path:
    return runtime_dir(root) / "locks" / f"{name}.lock"


def view_dir(root_path: Path, view_id: str) -> Path:
    return Path(root_path) / PROVIDER_DIR / check_view_id(view_id)


# -- TOML ------------------------------------------------------------------------------------

def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)


def toml_key(value: str) -> str:
    import re

    return value if re.fullmatch(r"[A-Za-z0-9_-]+", value) else toml_string(value)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_table(values: dict[str, object]) -> list[str]:
    return [f"{toml_key(k)} = {toml_value(v)}" for k, v in values.items() if v is not None]


def read_toml(path: Path, label: str) -> dict:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{label} does not exist") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{label}: malformed TOML: {exc}") from None
    return data


# -- connections (shared_views.toml) --------------------------------------------------------

@dataclass
class Connection:
    """One ``[connections.<id>]`` table: the local MF#/MQ# heading id and where its view lives."""

    id: str
    type: str  # file | question
    ref: str
    relationship: str = "human"
    maintainer: str | None = None
    description: str | None = None
    accepted_from: str | None = None
    target: dict[str, str] = field(default_factory=lambda: {"kind": "none"})

    @property
    def kind(self) -> str:
        return self.target.get("kind", "none")

    @property
    def view_id(self) -> str:
        """The provider's view id (the connection id unless it was connected under another name)."""
        return self.target.get("view_id") or self.id

    def to_json(self) -> dict:
        return asdict(self)


def _optional(entry: dict, key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{REGISTRY_FILE}: {where}.{key} must be a string")
    return value.strip() or None


def parse_connections(text: str) -> dict[str, Connection]:
    """Connections from the registry's text; anything the original would refuse is refused."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{REGISTRY_FILE}: malformed TOML: {exc}") from None
    raw = data.get("connections", {})
    if not isinstance(raw, dict):
        raise UsageError(f"{REGISTRY_FILE} must hold a [connections] table")
    out: dict[str, Connection] = {}
    for cid, entry in raw.items():
        check_view_id(cid, f"{REGISTRY_FILE}: connection id")
        where = f"connections.{cid}"
        if not isinstance(entry, dict):
            raise UsageError(f"{REGISTRY_FILE}: [{where}] must be a table")
        unknown = sorted(set(entry) - set(CONNECTION_KEYS))
        if unknown:
            raise UsageError(f"{REGISTRY_FILE}: [{where}] has unsupported keys: {', '.join(unknown)}")
        vtype = entry.get("type")
        if vtype not in VIEW_TYPES:
            raise UsageError(f"{REGISTRY_FILE}: {where}.type must be file or question")
        ref = _optional(entry, "ref", where)
        if not ref:
            raise UsageError(f"{REGISTRY_FILE}: {where}.ref is required")
        relationship = _optional(entry, "relationship", where) or "human"
        if relationship not in RELATIONSHIPS:
            raise UsageError(f"{REGISTRY_FILE}: {where}.relationship must be one of {', '.join(RELATIONSHIPS)}")
        target_raw = entry.get("target", {})
        if not isinstance(target_raw, dict):
            raise UsageError(f"{REGISTRY_FILE}: [{where}.target] must be a table")
        if "path" in target_raw:
            raise UsageError(f"{REGISTRY_FILE}: {where}.target.path is not supported (use a Git or HTTP target)")
        unknown = sorted(set(target_raw) - set(TARGET_KEYS))
        if unknown:
            raise UsageError(f"{REGISTRY_FILE}: [{where}.target] has unsupported keys: {', '.join(unknown)}")
        target = {k: v for k in TARGET_KEYS if (v := _optional(target_raw, k, f"{where}.target")) is not None}
        target.setdefault("kind", "none")
        if target["kind"] not in TARGET_KINDS:
            raise UsageError(f"{REGISTRY_FILE}: {where}.target.kind must be one of {', '.join(TARGET_KINDS)}")
        if target["kind"] in ("http-file", "http-question") and not (target.get("base_url")
                                                                    and target.get("credential_id")):
            raise UsageError(f"{REGISTRY_FILE}: {where}.target of kind {target['kind']} needs base_url "
                             "and credential_id")
        if target["kind"] == "git-file":
            _git_target(target, where)
        for key in ("view_id", "credential_id", "question_credential_id", "git_share_id"):
            if key in target:
                check_view_id(target[key], f"{REGISTRY_FILE}: {where}.target.{key}")
        out[cid] = Connection(cid, vtype, ref, relationship, _optional(entry, "maintainer", where),
                              _optional(entry, "description", where), _optional(entry, "accepted_from", where),
                              target)
    return out


def _git_target(target: dict, where: str) -> None:
    """A Git file target names its share as the original does (git_url, git_share_id, optional
    git_branch); an entry written by an earlier rmtui has only accepted_from_url, the join URL,
    and gets the three keys from it."""
    if not target.get("git_url") or not target.get("git_share_id"):
        url = target.get("accepted_from_url")
        if not url:
            raise UsageError(f"{REGISTRY_FILE}: {where}.target of kind git-file needs git_url and git_share_id")
        ref = parse_join_url(url)
        target.setdefault("git_url", ref.repo_url)
        target.setdefault("git_share_id", ref.share_id)
        if ref.branch:
            target.setdefault("git_branch", ref.branch)
    branch = target.get("git_branch")
    if branch is not None and (branch.startswith("-") or ".." in branch or any(c.isspace() for c in branch)):
        raise UsageError(f"{REGISTRY_FILE}: {where}.target.git_branch {branch!r} is not a branch name")


def load_connections(root_path: Path) -> dict[str, Connection]:
    path = Path(root_path) / REGISTRY_FILE
    if path.is_symlink():
        raise UsageError(f"{REGISTRY_FILE} is a symbolic link")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise UsageError(f"{REGISTRY_FILE} is not valid UTF-8") from None
    return parse_connections(text)


def render_connections(connections: dict[str, Connection]) -> str:
    lines = ["# RightMemory shared view registry", ""]
    for cid in sorted(connections):
        c = connections[cid]
        key = toml_key(cid)
        lines.append(f"[connections.{key}]")
        lines += toml_table({"type": c.type, "ref": c.ref, "relationship": c.relationship,
                             "maintainer": c.maintainer, "description": c.description,
                             "accepted_from": c.accepted_from})
        if c.kind != "none":
            lines += ["", f"[connections.{key}.target]"]
            lines += toml_table({k: c.target.get(k) for k in TARGET_KEYS})
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def connection(root_path: Path, cid: str) -> Connection:
    check_view_id(cid)
    found = load_connections(root_path).get(cid)
    if found is None:
        raise UsageError(f"no shared view connection `{cid}` in {REGISTRY_FILE} (connect one first)")
    return found


# -- credentials (consumer) and tokens (provider) ------------------------------------------

def _credentials_path(root: MemoryRoot) -> Path:
    return runtime_dir(root) / "credentials.toml"


def _load_private(path: Path, table: str) -> dict[str, dict]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from None
    got = data.get(table, {})
    if not isinstance(got, dict):
        raise UsageError(f"{path}: [{table}] must be a table")
    return {k: v for k, v in got.items() if isinstance(v, dict)}


def _save_private(path: Path, table: str, entries: dict[str, dict], header: str) -> None:
    lines = [header, ""]
    for key in sorted(entries):
        lines.append(f"[{table}.{toml_key(key)}]")
        lines += toml_table({k: v for k, v in entries[key].items() if isinstance(v, (str, bool, int))})
        lines.append("")
    atomic_write_bytes(path, ("\n".join(lines).rstrip() + "\n").encode(), mode=0o600)


def save_credential(root: MemoryRoot, cid: str, *, kind: str, token: str, base_url: str, view_id: str) -> None:
    """A bearer token for a connection, under ``.runtime/`` (never tracked), readable by the owner only."""
    path = _credentials_path(root)
    with _file_lock(lock_path(root, "credentials")):
        entries = _load_private(path, "credentials")
        entries[check_view_id(cid)] = {"kind": kind, "token": token, "base_url": base_url, "view_id": view_id,
                                       "created_at": now_iso()}
        _save_private(path, "credentials", entries, "# RightMemory shared view credentials (private)")


def credential(root: MemoryRoot, cid: str) -> dict:
    entry = _load_private(_credentials_path(root), "credentials").get(cid)
    if entry is None or not isinstance(entry.get("token"), str):
        raise UsageError(f"no credential `{cid}` in .runtime/shared_views/credentials.toml; connect again")
    return entry


def _tokens_path(root: MemoryRoot) -> Path:
    return runtime_dir(root) / "provider_tokens.toml"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(root: MemoryRoot, view_id: str, kind: str, label: str | None = None) -> tuple[str, str]:
    """A new bearer token for one consumer of ``view_id``; only its hash is kept. (token id, token)."""
    check_view_id(view_id)
    token = "rmv_" + secrets.token_urlsafe(32)
    tid = f"{view_id}-{secrets.token_hex(4)}"
    with _file_lock(lock_path(root, "tokens")):
        entries = _load_private(_tokens_path(root), "tokens")
        entries[tid] = {"view_id": view_id, "kind": kind, "label": label or "", "sha256": token_hash(token),
                        "created_at": now_iso()}
        _save_private(_tokens_path(root), "tokens", entries, "# shared view tokens issued by this provider (hashes)")
    return tid, token


def revoke_token(root: MemoryRoot, tid: str) -> bool:
    with _file_lock(lock_path(root, "tokens")):
        entries = _load_private(_tokens_path(root), "tokens")
        if entries.pop(tid, None) is None:
            return False
        _save_private(_tokens_path(root), "tokens", entries, "# shared view tokens issued by this provider (hashes)")
        return True


def token_hashes(root: MemoryRoot) -> dict[str, dict]:
    """Issued tokens by id: view_id, kind, label, sha256, created_at."""
    return _load_private(_tokens_path(root), "tokens")


# -- pull state --------------------------------------------------------------------------------

def _state_path(root: MemoryRoot) -> Path:
    return runtime_dir(root) / "state.json"


def load_state(root: MemoryRoot) -> dict[str, dict]:
    try:
        data = json.loads(_state_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    views = data.get("views") if isinstance(data, dict) else None
    return {k: v for k, v in views.items() if isinstance(v, dict)} if isinstance(views, dict) else {}


def update_state(root: MemoryRoot, cid: str, **fields: object) -> dict:
    with _file_lock(lock_path(root, "state")):
        views = load_state(root)
        entry = views.setdefault(cid, {})
        entry.update(fields)
        atomic_write_text(_state_path(root), json.dumps({"views": views}, indent=1, sort_keys=True))
        return dict(entry)


def _file_lock(path: Path, timeout: float = 60):
    from rmtui.engine.locks import file_lock

    return file_lock(path, timeout=timeout)


# -- the supervised write --------------------------------------------------------------------

def land(root: MemoryRoot, message: str, edit: Callable[[Path], list[str]]) -> dict:
    """Change the tracked root through the supervisor as the ``shared-views`` program writer.

    ``edit(worktree)`` writes its files in the operation's worktree and returns the paths it
    touched; they are committed (``-f``: the root's allow-list names only some files under
    ``shared_views/``) and landed like any other writer's work, with admission's checks.
    """
    from rmtui.engine.writes.program import program_write

    receipt = program_write(root, "shared-views", "shared-views", edit, message, force_add=True,
                            what="the shared view change")
    return {"operation_id": receipt.operation_id, "phase": receipt.phase, "landed_commit": receipt.landed_commit}


def write_text(base: Path, rel: str, text: str) -> str:
    """Write ``rel`` under ``base`` (a worktree) and return it, for :func:`land`."""
    target = base / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    target.write_text(text, encoding="utf-8")
    os.chmod(target, 0o644)
    return rel
