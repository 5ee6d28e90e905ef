"""The store of a served shared-view hub (docs/formats.md, "The hub"), laid out as the original's hub root.

A hub root holds ``hub.toml`` (``public_base_url``, ``[limits] max_package_bytes``),
``hub.db`` (SQLite: providers, views, view versions, invitations, connections, tokens,
interactions, audit events, share invitations; the same tables and columns as the
original's, so either tool can serve the other's hub root) and
``storage/views/<view>/versions/<version>/`` (each published package, unpacked). Tokens are
kept as ``sha256("<nonce>:<token>")`` with a per-token nonce; the raw token is returned
once. Every refusal is a :class:`HubRefused` carrying the HTTP status the routes answer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import sqlite3
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rmtui.engine.fsutil import atomic_write_text, fsync_dir
from rmtui.engine.views.package import (
    META_FILE,
    PackageRefused,
    candidate_beside,
    extract_zip,
    remove_tree,
    validate_package,
    walk_package,
)

HUB_DB = "hub.db"
HUB_CONFIG = "hub.toml"
DEFAULT_PUBLIC_BASE_URL = "http://127.0.0.1:8765"
DEFAULT_MAX_PACKAGE_BYTES = 10 * 1024 * 1024
DEFAULT_NOTE_BYTES_PER_DAY = 2 * 1024 * 1024
#: The inbox's page without paging (the original's 100), and the largest page asked for.
INBOX_PAGE = 100
MAX_INBOX_PAGE = 200
#: Where rmtui notes the ``public_base_url`` it wrote itself (so it may move it with the server).
WRITTEN_BASE_URL = ".runtime/rmtui-public-base-url"
_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
_INVITATION_METADATA_KEYS = ("kind", "question_base_url", "question_url", "ask_base_url", "question_token")

_SCHEMA = (
    "CREATE TABLE providers(id TEXT PRIMARY KEY, label TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
    "CREATE TABLE views(id TEXT PRIMARY KEY, provider_id TEXT, title TEXT NOT NULL, ref TEXT NOT NULL, "
    "description TEXT, current_version_id TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
    "FOREIGN KEY(provider_id) REFERENCES providers(id))",
    "CREATE TABLE view_versions(id TEXT PRIMARY KEY, view_id TEXT NOT NULL, package_hash TEXT NOT NULL, "
    "storage_path TEXT NOT NULL, manifest_json TEXT NOT NULL, created_at TEXT NOT NULL, created_by_token_id TEXT, "
    "FOREIGN KEY(view_id) REFERENCES views(id), FOREIGN KEY(created_by_token_id) REFERENCES tokens(id))",
    "CREATE TABLE invitations(id TEXT PRIMARY KEY, view_id TEXT NOT NULL, token_id TEXT, label TEXT, "
    "expires_at TEXT, revoked_at TEXT, created_at TEXT NOT NULL, accepted_count INTEGER NOT NULL DEFAULT 0, "
    "FOREIGN KEY(view_id) REFERENCES views(id), FOREIGN KEY(token_id) REFERENCES tokens(id))",
    "CREATE TABLE connections(id TEXT PRIMARY KEY, invitation_id TEXT, view_id TEXT NOT NULL, token_id TEXT, "
    "consumer_label TEXT, created_at TEXT NOT NULL, revoked_at TEXT, "
    "FOREIGN KEY(invitation_id) REFERENCES invitations(id), FOREIGN KEY(view_id) REFERENCES views(id), "
    "FOREIGN KEY(token_id) REFERENCES tokens(id))",
    "CREATE TABLE tokens(id TEXT PRIMARY KEY, nonce TEXT NOT NULL, token_hash TEXT NOT NULL, action TEXT NOT NULL, "
    "provider_id TEXT, view_id TEXT, label TEXT, created_at TEXT NOT NULL, revoked_at TEXT, "
    "FOREIGN KEY(provider_id) REFERENCES providers(id), UNIQUE(nonce, token_hash))",
    "CREATE TABLE interactions(id TEXT PRIMARY KEY, view_id TEXT NOT NULL, connection_id TEXT, actor_id TEXT, "
    "payload_json TEXT NOT NULL, created_at TEXT NOT NULL, FOREIGN KEY(view_id) REFERENCES views(id), "
    "FOREIGN KEY(connection_id) REFERENCES connections(id))",
    "CREATE TABLE audit_events(id TEXT PRIMARY KEY, kind TEXT NOT NULL, actor_id TEXT, provider_id TEXT, "
    "view_id TEXT, details_json TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE INDEX idx_tokens_action ON tokens(action)",
    "CREATE INDEX idx_tokens_provider_view ON tokens(provider_id, view_id)",
    "CREATE INDEX idx_view_versions_view ON view_versions(view_id, created_at)",
    "CREATE INDEX idx_interactions_view ON interactions(view_id, created_at)",
    "CREATE INDEX idx_audit_events_kind ON audit_events(kind, created_at)",
)
_SCHEMA_2 = (
    "CREATE TABLE IF NOT EXISTS share_invitations(id TEXT PRIMARY KEY, share_id TEXT NOT NULL, "
    "provider_id TEXT NOT NULL, token_id TEXT NOT NULL, title TEXT NOT NULL, label TEXT, expires_at TEXT, "
    "revoked_at TEXT, created_at TEXT NOT NULL, accepted_count INTEGER NOT NULL DEFAULT 0, "
    "payload_json TEXT NOT NULL, FOREIGN KEY(token_id) REFERENCES tokens(id))",
    "CREATE INDEX IF NOT EXISTS idx_share_invitations_token ON share_invitations(token_id)",
    "CREATE INDEX IF NOT EXISTS idx_share_invitations_provider ON share_invitations(provider_id, created_at)",
)


class HubRefused(Exception):
    """A request the hub refuses; ``status`` is the HTTP status, ``detail`` the one-line reason."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Actor:
    """Whose token a request carried."""

    token_id: str
    action: str
    provider_id: str | None
    view_id: str | None


@dataclass(frozen=True)
class HubConfig:
    public_base_url: str | None
    max_package_bytes: int


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(16)}"


def hash_token(raw: str, nonce: str) -> str:
    return hashlib.sha256(f"{nonce}:{raw}".encode()).hexdigest()


def check_id(value: object, label: str) -> str:
    """A hub id (view, provider, token, …): letters, digits, ``_.-``; no path parts."""
    if not isinstance(value, str) or not value.strip():
        raise HubRefused(400, f"{label} must be a non-empty string")
    clean = value.strip()
    if clean in (".", "..") or len(clean) > 128 or not _ID.fullmatch(clean):
        raise HubRefused(400, f"{label} contains invalid characters: {value!r}")
    return clean


def optional_text(value: object, label: str, limit: int = 1000) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise HubRefused(400, f"{label} must be a string")
    clean = value.strip()
    if len(clean) > limit:
        raise HubRefused(400, f"{label} is longer than {limit} characters")
    return clean or None


def parse_time(value: str) -> datetime:
    """An ISO time in UTC; ValueError for anything else, including a time that leaves the calendar
    once moved to UTC (``9999-12-31T23:59:59-23:59``), which ``astimezone`` reports as OverflowError."""
    clean = value.strip()
    if clean.endswith("Z"):
        clean = clean[:-1] + "+00:00"
    parsed = datetime.fromisoformat(clean)
    try:
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value!r} lies outside the calendar in UTC") from None


def iso_time(value: str | None, label: str) -> str | None:
    """A time the hub keeps (``expires_at``): UTC ISO to the second, or a 400 naming the field."""
    if value is None:
        return None
    try:
        return parse_time(value).replace(microsecond=0).isoformat()
    except ValueError:
        raise HubRefused(400, f"{label} must be an ISO datetime") from None


def _expired(value: str | None) -> bool:
    if not value:
        return False
    try:
        return parse_time(value) <= datetime.now(UTC)
    except ValueError:
        return True


class HubStore:
    """One hub root; every write is one SQLite transaction, every package lands by rename."""

    def __init__(self, root: Path, *, public_base_url: str | None = None, serving_url: str | None = None,
                 note_bytes_per_day: int = DEFAULT_NOTE_BYTES_PER_DAY) -> None:
        """``public_base_url`` overrides ``hub.toml``'s; ``serving_url`` is used when neither names one."""
        self.root = Path(root)
        self.public_base_url = public_base_url
        self.serving_url = serving_url
        self.note_bytes_per_day = note_bytes_per_day

    @property
    def db_path(self) -> Path:
        return self.root / HUB_DB

    @property
    def config_path(self) -> Path:
        return self.root / HUB_CONFIG

    @property
    def storage_root(self) -> Path:
        return self.root / "storage"

    # -- setup --------------------------------------------------------------------------------

    def initialize(self) -> None:
        """Create the hub root (config, storage, schema) when missing; an existing one is kept."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.storage_root / "views").mkdir(parents=True, exist_ok=True)
        (self.root / ".runtime").mkdir(exist_ok=True)
        if not self.config_path.exists():
            atomic_write_text(self.config_path, f"[limits]\nmax_package_bytes = {DEFAULT_MAX_PACKAGE_BYTES}\n")
        with self._db() as db:
            self._audit(db, "hub.initialized")

    def record_public_base_url(self) -> str | None:
        """Write into ``hub.toml`` the ``public_base_url`` this server hands out, where the original
        hub reads it (without it, the original serving this folder would send consumers to its
        own default port). ``--public-url`` is a person's word and is written as given; otherwise
        the serving URL replaces only a value rmtui itself wrote (noted in ``.runtime/``), never
        one a person set. Returns the URL written, or None when the file keeps its own."""
        import tomlkit

        self.initialize()
        text = self.config_path.read_text(encoding="utf-8")
        try:
            doc = tomlkit.parse(text)
        except Exception as exc:  # noqa: BLE001 - tomlkit's parse errors share no base class but Exception
            raise HubRefused(500, f"invalid hub config {self.config_path}: {exc}") from None
        current = doc.get("public_base_url")
        current = current.strip() if isinstance(current, str) and current.strip() else None
        mark = self.root / WRITTEN_BASE_URL
        written = mark.read_text(encoding="utf-8").strip() if mark.is_file() else None
        want = self.public_base_url or self.serving_url
        if want is None or current == want:
            return None
        if self.public_base_url is None and current is not None and current != written:
            return None  # a person's value: this server hands it out too (see config())
        doc["public_base_url"] = want
        body = doc.as_string()
        if current is None:  # the original writes it first, above [limits]
            body = f"public_base_url = {json.dumps(want)}\n" + ("\n" if text.strip() else "") + text
        atomic_write_text(self.config_path, body)
        if self.public_base_url is None:
            atomic_write_text(mark, want + "\n")
        else:
            mark.unlink(missing_ok=True)
        return want

    def config(self) -> HubConfig:
        if not self.config_path.exists():
            return HubConfig(self.public_base_url or self.serving_url, DEFAULT_MAX_PACKAGE_BYTES)
        try:
            data = tomllib.loads(self.config_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise HubRefused(500, f"invalid hub config {self.config_path}: {exc}") from None
        limits = data.get("limits") or {}
        size = limits.get("max_package_bytes", DEFAULT_MAX_PACKAGE_BYTES) if isinstance(limits, dict) else None
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise HubRefused(500, "hub config limits.max_package_bytes must be a positive integer")
        base = data.get("public_base_url")
        base = base.strip() if isinstance(base, str) and base.strip() else None
        return HubConfig(self.public_base_url or base or self.serving_url, size)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.root.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            db.execute("PRAGMA foreign_keys = ON")
            # one writer at a time from the first statement on: a check and the write it guards
            # (who owns a view, which invitation a token opens) see the same state
            db.execute("BEGIN IMMEDIATE")
            try:
                self._migrate(db)
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS schema_migrations("
                   "version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        applied = {row["version"] for row in db.execute("SELECT version FROM schema_migrations")}
        for version, statements in ((1, _SCHEMA), (2, _SCHEMA_2)):
            if version not in applied:
                for statement in statements:
                    db.execute(statement)
                db.execute("INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)", (version, now_iso()))

    @staticmethod
    def _audit(db: sqlite3.Connection, kind: str, *, actor_id: str | None = None, provider_id: str | None = None,
               view_id: str | None = None, details: dict | None = None) -> None:
        db.execute("INSERT INTO audit_events(id, kind, actor_id, provider_id, view_id, details_json, created_at) "
                   "VALUES(?, ?, ?, ?, ?, ?, ?)", (new_id("aud"), kind, actor_id, provider_id, view_id,
                                                  json.dumps(details or {}, sort_keys=True), now_iso()))

    # -- tokens -------------------------------------------------------------------------------

    @staticmethod
    def _create_token(db: sqlite3.Connection, action: str, provider_id: str | None, view_id: str | None,
                      label: str | None) -> tuple[str, str]:
        token_id, raw, nonce = new_id("tok"), secrets.token_urlsafe(32), secrets.token_urlsafe(16)
        db.execute("INSERT INTO tokens(id, nonce, token_hash, action, provider_id, view_id, label, created_at, "
                   "revoked_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                   (token_id, nonce, hash_token(raw, nonce), action, provider_id, view_id, label, now_iso()))
        return token_id, raw

    def create_provider_token(self, provider_id: str, label: str | None = None) -> dict:
        """A publish token for ``provider_id`` (made a provider when new); the raw token is shown once."""
        pid = check_id(provider_id, "provider_id")
        clean_label = optional_text(label, "label")
        self.initialize()
        with self._db() as db:
            now = now_iso()
            db.execute("INSERT INTO providers(id, label, created_at, updated_at) VALUES(?, ?, ?, ?) "
                       "ON CONFLICT(id) DO UPDATE SET label = COALESCE(excluded.label, providers.label), "
                       "updated_at = excluded.updated_at", (pid, clean_label, now, now))
            token_id, raw = self._create_token(db, "publish", pid, None, clean_label)
            self._audit(db, "token.created", actor_id=token_id, provider_id=pid,
                        details={"action": "publish", "label": clean_label})
        return {"token_id": token_id, "token": raw, "action": "publish", "provider_id": pid}

    def find_token(self, raw: str | None, action: str, *, provider_id: str | None = None,
                   view_id: str | None = None) -> Actor | None:
        """The live token of ``action`` matching ``raw`` (compared by hash in constant time), or None.

        A token scoped to a view matches only that view; one without a view matches any."""
        if not raw or not self.db_path.is_file():
            return None
        with self._db() as db:
            rows = db.execute("SELECT id, nonce, token_hash, action, provider_id, view_id FROM tokens "
                              "WHERE action = ? AND revoked_at IS NULL", (action,)).fetchall()
        found = None
        for row in rows:
            if provider_id is not None and row["provider_id"] != provider_id:
                continue
            if view_id is not None and row["view_id"] is not None and row["view_id"] != view_id:
                continue
            if hmac.compare_digest(row["token_hash"], hash_token(raw, row["nonce"])) and found is None:
                found = Actor(row["id"], row["action"], row["provider_id"], row["view_id"])
        return found

    def reject(self, action: str, view_id: str | None = None) -> None:
        """Note a refused token in the audit log (the hub's console counts them)."""
        if self.db_path.is_file():
            with self._db() as db:
                self._audit(db, "token.rejected", view_id=view_id, details={"action": action})

    # -- views and versions -------------------------------------------------------------------

    def view(self, view_id: str) -> sqlite3.Row | None:
        if not self.db_path.is_file():
            return None
        with self._db() as db:
            return db.execute("SELECT * FROM views WHERE id = ?", (view_id,)).fetchone()

    def current_version(self, view_id: str) -> Path | None:
        """The folder of the view's current version, or None when nothing was published."""
        if not self.db_path.is_file():
            return None
        with self._db() as db:
            row = db.execute("SELECT vv.storage_path FROM views v JOIN view_versions vv ON vv.id = "
                             "v.current_version_id WHERE v.id = ?", (view_id,)).fetchone()
        if row is None:
            return None
        folder = (self.root / row["storage_path"]).resolve()
        if self.storage_root.resolve() not in folder.parents:
            raise HubRefused(500, f"stored version of {view_id} lies outside the hub's storage")
        return folder

    def publish(self, view_id: str, archive: bytes, actor: Actor) -> dict:
        """Store ``archive`` (a version-2 package zip of ``view_id``) as the view's new current version."""
        vid = check_id(view_id, "view_id")
        if actor.provider_id is None:
            raise HubRefused(403, "publisher token has no provider scope")
        self.initialize()
        existing = self.view(vid)
        if existing is not None and existing["provider_id"] not in (None, actor.provider_id):
            raise HubRefused(403, "token cannot manage this view")
        version_id = new_id("ver")
        versions = self.storage_root / "views" / vid / "versions"
        versions.mkdir(parents=True, exist_ok=True)
        _sweep_dead_candidates(versions)
        final = versions / version_id
        candidate = candidate_beside(final)
        try:
            extract_zip(archive, candidate)
            info = validate_package(candidate, vid)
            meta = tomllib.loads((candidate / META_FILE).read_text(encoding="utf-8"))
            digest, files = info.digest, info.files  # the digest is the original hub's package hash
            size = sum(size for _, size in walk_package(candidate))
            os.rename(candidate, final)
            fsync_dir(versions)
        except PackageRefused as exc:
            remove_tree(candidate)
            raise HubRefused(400, f"package refused ({exc.rule}): {exc.message}") from None
        except BaseException:
            remove_tree(candidate)
            raise
        ref = str(meta.get("ref") or f"rightmemory://mf/{vid}")
        manifest = {"view_id": vid, "title": info.title, "ref": ref, "description": info.description or None,
                    "maintainer": None, "files": files, "size_bytes": size, "package_hash": digest,
                    "version_id": version_id,
                    "invitation_metadata": {k: str(meta[k]).strip() for k in _INVITATION_METADATA_KEYS
                                            if isinstance(meta.get(k), str) and meta[k].strip()}}
        now = now_iso()
        try:
            with self._db() as db:
                owner = db.execute("SELECT provider_id FROM views WHERE id = ?", (vid,)).fetchone()
                if owner is not None and owner["provider_id"] not in (None, actor.provider_id):
                    raise HubRefused(403, "token cannot manage this view")  # another provider made it meanwhile
                db.execute("INSERT INTO providers(id, label, created_at, updated_at) VALUES(?, NULL, ?, ?) "
                           "ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at",
                           (actor.provider_id, now, now))
                db.execute("INSERT INTO views(id, provider_id, title, ref, description, current_version_id, "
                           "created_at, updated_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                           "title = excluded.title, ref = excluded.ref, description = excluded.description, "
                           "current_version_id = excluded.current_version_id, updated_at = excluded.updated_at",
                           (vid, actor.provider_id, info.title, ref, manifest["description"], version_id, now, now))
                db.execute("INSERT INTO view_versions(id, view_id, package_hash, storage_path, manifest_json, "
                           "created_at, created_by_token_id) VALUES(?, ?, ?, ?, ?, ?, ?)",
                           (version_id, vid, digest, final.relative_to(self.root).as_posix(),
                            json.dumps(manifest, sort_keys=True), now, actor.token_id))
                self._audit(db, "view.version.created", actor_id=actor.token_id, provider_id=actor.provider_id,
                            view_id=vid, details={"version_id": version_id, "package_hash": digest})
        except BaseException:
            remove_tree(final)
            raise
        return {"view_id": vid, "provider_id": actor.provider_id, "version_id": version_id,
                "current_version_id": version_id, "package_hash": digest, "title": info.title}

    # -- invitations and connections ----------------------------------------------------------

    def create_invitation(self, view_id: str, actor: Actor, *, label: str | None, expires_at: str | None) -> dict:
        vid = check_id(view_id, "view_id")
        existing = self.view(vid)
        if existing is not None and existing["provider_id"] not in (None, actor.provider_id):
            raise HubRefused(403, "token cannot manage this view")
        expires = iso_time(expires_at, "expires_at")  # checked before the view, as the original does
        if existing is None:
            raise HubRefused(404, "view not found")
        with self._db() as db:
            token_id, raw = self._create_token(db, "invite", existing["provider_id"], vid, label)
            invitation_id = new_id("inv")
            db.execute("INSERT INTO invitations(id, view_id, token_id, label, expires_at, revoked_at, created_at, "
                       "accepted_count) VALUES(?, ?, ?, ?, ?, NULL, ?, 0)",
                       (invitation_id, vid, token_id, label, expires, now_iso()))
            self._audit(db, "invitation.created", actor_id=actor.token_id, provider_id=existing["provider_id"],
                        view_id=vid, details={"invitation_id": invitation_id, "label": label})
        base = (self.config().public_base_url or DEFAULT_PUBLIC_BASE_URL).rstrip("/")
        return {"invitation_id": invitation_id, "token_id": token_id, "view_id": vid,
                "invitation_url": f"{base}/i/{raw}", "expires_at": expires}

    def _invitation(self, db: sqlite3.Connection, actor: Actor | None) -> sqlite3.Row:
        """The live invitation of an invite token (looked up before ``db`` was opened), else 404."""
        if actor is None:
            raise HubRefused(404, "invitation not found")
        row = db.execute(
            "SELECT i.id AS invitation_id, i.view_id, i.label, i.expires_at, i.revoked_at, i.created_at, "
            "i.accepted_count, v.provider_id, v.title, v.ref, v.description, v.current_version_id, "
            "vv.manifest_json FROM invitations i JOIN views v ON v.id = i.view_id "
            "LEFT JOIN view_versions vv ON vv.id = v.current_version_id WHERE i.token_id = ?",
            (actor.token_id,)).fetchone()
        if row is None or row["revoked_at"] is not None or _expired(row["expires_at"]):
            raise HubRefused(404, "invitation not found")
        return row

    def describe_invitation(self, raw: str) -> dict:
        actor = self.find_token(raw, "invite")
        with self._db() as db:
            row = self._invitation(db, actor)
        out = {"invitation_id": row["invitation_id"], "view_id": row["view_id"], "provider_id": row["provider_id"],
               "title": row["title"], "ref": row["ref"], "description": row["description"],
               "current_version_id": row["current_version_id"], "label": row["label"],
               "expires_at": row["expires_at"], "accepted_count": row["accepted_count"],
               "created_at": row["created_at"]}
        metadata = _metadata(row["manifest_json"])
        kind = metadata.get("kind") or _kind_of_ref(row["ref"])
        if kind:
            out["kind"] = kind
        for key in ("question_base_url", "question_url", "ask_base_url"):
            if metadata.get(key):
                out[key] = metadata[key]
        return out

    def accept_invitation(self, raw: str, consumer_label: str | None) -> dict:
        actor = self.find_token(raw, "invite")
        with self._db() as db:
            row = self._invitation(db, actor)
            token_id, token = self._create_token(db, "connect", row["provider_id"], row["view_id"], consumer_label)
            connection_id = new_id("con")
            db.execute("INSERT INTO connections(id, invitation_id, view_id, token_id, consumer_label, created_at, "
                       "revoked_at) VALUES(?, ?, ?, ?, ?, ?, NULL)",
                       (connection_id, row["invitation_id"], row["view_id"], token_id, consumer_label, now_iso()))
            db.execute("UPDATE invitations SET accepted_count = accepted_count + 1 WHERE id = ?",
                       (row["invitation_id"],))
            self._audit(db, "invitation.accepted", actor_id=token_id, provider_id=row["provider_id"],
                        view_id=row["view_id"], details={"invitation_id": row["invitation_id"],
                                                         "connection_id": connection_id,
                                                         "consumer_label": consumer_label})
        out = {"connection_id": connection_id, "token_id": token_id, "connection_token": token,
               "view_id": row["view_id"], "consumer_label": consumer_label}
        question_token = _metadata(row["manifest_json"]).get("question_token")
        if question_token:
            out["question_token"] = question_token
        return out

    # -- share invitations (a whole share: several views of one provider) ---------------------

    def create_share_invitation(self, share_id: str, actor: Actor, *, title: str, parts: list[dict],
                                label: str | None, expires_at: str | None) -> dict:
        """One invitation to every part (a published view of this provider) of the share ``share_id``."""
        sid = check_id(share_id, "share_id")
        if actor.provider_id is None:
            raise HubRefused(403, "publisher token has no provider scope")
        clean_parts = self._share_parts(actor.provider_id, parts)
        expires = iso_time(expires_at, "expires_at")
        payload = {"share_id": sid, "title": title, "provider_id": actor.provider_id, "parts": clean_parts}
        with self._db() as db:
            token_id, raw = self._create_token(db, "share-invite", actor.provider_id, None, label)
            invitation_id = new_id("sinv")
            db.execute("INSERT INTO share_invitations(id, share_id, provider_id, token_id, title, label, expires_at, "
                       "revoked_at, created_at, accepted_count, payload_json) VALUES(?, ?, ?, ?, ?, ?, ?, NULL, ?, "
                       "0, ?)", (invitation_id, sid, actor.provider_id, token_id, title, label, expires, now_iso(),
                                 json.dumps(payload, sort_keys=True)))
            self._audit(db, "share_invitation.created", actor_id=actor.token_id, provider_id=actor.provider_id,
                        details={"share_id": sid, "invitation_id": invitation_id, "label": label})
        base = (self.config().public_base_url or DEFAULT_PUBLIC_BASE_URL).rstrip("/")
        return {"invitation_id": invitation_id, "token_id": token_id, "share_id": sid,
                "invitation_url": f"{base}/i/share/{raw}", "expires_at": expires}

    def _share_parts(self, provider_id: str, parts: list[dict]) -> list[dict]:
        """Each part names a published view of ``provider_id`` of its kind (``file`` or ``question``).

        The original answers a part naming no view (or no version) with the text of a Python
        KeyError, quotes included; so does this, for either tool's client to read alike."""
        clean: list[dict] = []
        with self._db() as db:
            for part in parts:
                kind = part["type"]
                if kind not in ("file", "question"):
                    raise HubRefused(400, f"share part type must be file or question: {kind!r}")
                vid = check_id(part["view_id"], "view_id")
                row = db.execute("SELECT v.provider_id, v.current_version_id, v.ref, vv.manifest_json FROM views v "
                                 "LEFT JOIN view_versions vv ON vv.id = v.current_version_id WHERE v.id = ?",
                                 (vid,)).fetchone()
                if row is None:
                    raise HubRefused(400, repr(f"view not found: {vid}"))
                if row["provider_id"] != provider_id:
                    raise HubRefused(400, f"share part view belongs to another provider: {vid}")
                if not row["current_version_id"]:
                    raise HubRefused(400, repr(f"view has no current version: {vid}"))
                actual = _metadata(row["manifest_json"]).get("kind") or _kind_of_ref(row["ref"]) or "file"
                if actual != kind:
                    raise HubRefused(400, f"share part type does not match view kind for {vid}")
                clean.append({"type": kind, "view_id": vid})
        return clean

    def _share_invitation(self, raw: str) -> tuple[sqlite3.Row, dict]:
        """The live share invitation of a share-invite token and its stored payload, else 404."""
        actor = self.find_token(raw, "share-invite")
        if actor is None:
            raise HubRefused(404, "share invitation not found")
        with self._db() as db:
            row = db.execute("SELECT * FROM share_invitations WHERE token_id = ?", (actor.token_id,)).fetchone()
        payload = _json_object(row["payload_json"]) if row is not None else {}
        if row is None or row["revoked_at"] is not None or _expired(row["expires_at"]) or not payload:
            raise HubRefused(404, "share invitation not found")
        return row, payload

    def describe_share_invitation(self, raw: str) -> dict:
        _row, payload = self._share_invitation(raw)
        parts = []
        with self._db() as db:
            for part in _payload_parts(payload):
                out = dict(part)
                view = db.execute("SELECT v.title, v.description, vv.manifest_json FROM views v LEFT JOIN "
                                  "view_versions vv ON vv.id = v.current_version_id WHERE v.id = ?",
                                  (part["view_id"],)).fetchone()
                if view is not None:
                    out["title"] = view["title"]
                    if view["description"]:
                        out["description"] = view["description"]
                    base = _metadata(view["manifest_json"]).get("question_base_url")
                    if base:
                        out["question_base_url"] = base
                parts.append(out)
        return {"share_id": str(payload.get("share_id")), "title": str(payload.get("title")),
                "provider_id": str(payload.get("provider_id")), "parts": parts}

    def accept_share_invitation(self, raw: str, consumer_label: str | None) -> dict:
        """A connection (and its token) for every part of the share, in one transaction."""
        row, payload = self._share_invitation(raw)
        accepted = []
        with self._db() as db:
            for part in _payload_parts(payload):
                vid = part["view_id"]
                token_id, token = self._create_token(db, "connect", row["provider_id"], vid, consumer_label)
                connection_id = new_id("con")
                db.execute("INSERT INTO connections(id, invitation_id, view_id, token_id, consumer_label, created_at, "
                           "revoked_at) VALUES(?, NULL, ?, ?, ?, ?, NULL)",
                           (connection_id, vid, token_id, consumer_label, now_iso()))
                out = {"type": part["type"], "view_id": vid, "connection_id": connection_id, "token_id": token_id,
                       "connection_token": token}
                if part["type"] == "question":
                    current = db.execute("SELECT vv.manifest_json FROM views v JOIN view_versions vv ON vv.id = "
                                         "v.current_version_id WHERE v.id = ?", (vid,)).fetchone()
                    question_token = _metadata(current["manifest_json"] if current else None).get("question_token")
                    if question_token:
                        out["question_token"] = question_token
                accepted.append(out)
            db.execute("UPDATE share_invitations SET accepted_count = accepted_count + 1 WHERE id = ?", (row["id"],))
            self._audit(db, "share_invitation.accepted", provider_id=row["provider_id"],
                        details={"share_id": row["share_id"], "invitation_id": row["id"],
                                 "consumer_label": consumer_label})
        return {"share_id": str(payload.get("share_id")), "title": str(payload.get("title")),
                "provider_id": str(payload.get("provider_id")), "consumer_label": consumer_label,
                "parts": accepted}

    # -- interactions -------------------------------------------------------------------------

    def record_interaction(self, view_id: str, actor: Actor, payload: dict) -> dict:
        """Keep one note of a connection, within what one connection may store in a day
        (``note_bytes_per_day``): one consumer can fill neither the hub nor the provider's inbox."""
        payload_json = json.dumps(payload, sort_keys=True)
        with self._db() as db:
            row = db.execute("SELECT c.id AS connection_id, v.provider_id FROM connections c JOIN views v ON "
                             "v.id = c.view_id JOIN tokens t ON t.id = c.token_id WHERE c.view_id = ? AND "
                             "c.token_id = ? AND c.revoked_at IS NULL AND t.revoked_at IS NULL",
                             (view_id, actor.token_id)).fetchone()
            if row is None:
                raise HubRefused(403, "token is not scoped to view")
            since = datetime.fromtimestamp(time.time() - 86400, UTC).replace(microsecond=0).isoformat()
            used = db.execute("SELECT COALESCE(SUM(LENGTH(CAST(payload_json AS BLOB))), 0) FROM interactions "
                              "WHERE connection_id = ? AND created_at > ?", (row["connection_id"], since)).fetchone()[0]
            if used + len(payload_json.encode()) > self.note_bytes_per_day:
                raise HubRefused(429, f"this connection has stored {used} bytes of notes in the last 24 hours; "
                                      f"the hub keeps at most {self.note_bytes_per_day} per connection a day")
            interaction_id = new_id("int")
            db.execute("INSERT INTO interactions(id, view_id, connection_id, actor_id, payload_json, created_at) "
                       "VALUES(?, ?, ?, ?, ?, ?)", (interaction_id, view_id, row["connection_id"], actor.token_id,
                                                    payload_json, now_iso()))
            self._audit(db, "interaction.created", actor_id=actor.token_id, provider_id=row["provider_id"],
                        view_id=view_id, details={"interaction_id": interaction_id})
        return {"status": "recorded", "interaction_id": interaction_id, "view_id": view_id,
                "connection_id": row["connection_id"]}

    def inbox(self, provider_id: str, limit: int = INBOX_PAGE, offset: int = 0) -> list[dict]:
        """One page of the provider's interactions, newest first (``limit`` 1 to 200, as the
        original's listings page them; without paging, the original's page of 100)."""
        if not self.db_path.is_file():
            return []
        with self._db() as db:
            rows = db.execute("SELECT i.id, i.view_id, i.connection_id, i.actor_id, i.payload_json, i.created_at, "
                              "v.provider_id FROM interactions i JOIN views v ON v.id = i.view_id "
                              "WHERE v.provider_id = ? ORDER BY i.created_at DESC, i.id DESC LIMIT ? OFFSET ?",
                              (provider_id, max(1, min(limit, MAX_INBOX_PAGE)), max(0, offset))).fetchall()
        out = []
        for row in rows:
            payload = _json_object(row["payload_json"])
            out.append({"interaction_id": row["id"], "provider_id": row["provider_id"], "view_id": row["view_id"],
                        "connection_id": row["connection_id"], "actor_id": row["actor_id"],
                        "payload": payload, "created_at": row["created_at"]})
        return out

#: A candidate folder older than this belongs to a publish that died (killed, or the machine stopped).
DEAD_CANDIDATE_SECONDS = 3600


def _sweep_dead_candidates(versions: Path) -> None:
    """Remove the hidden candidates (``.ver_….incoming-…``) dead publishes left; a live one is younger."""
    for entry in versions.iterdir():
        try:
            dead = entry.name.startswith(".") and time.time() - entry.lstat().st_mtime > DEAD_CANDIDATE_SECONDS
        except FileNotFoundError:
            continue
        if dead:
            remove_tree(entry)


def _metadata(manifest_json: object) -> dict[str, str]:
    """The invitation metadata a stored version's manifest carries (strings only)."""
    if not isinstance(manifest_json, str):
        return {}
    try:
        manifest = json.loads(manifest_json)
    except ValueError:
        return {}
    meta = manifest.get("invitation_metadata") if isinstance(manifest, dict) else None
    if not isinstance(meta, dict):
        return {}
    return {k: meta[k].strip() for k in _INVITATION_METADATA_KEYS if isinstance(meta.get(k), str) and meta[k].strip()}


def _json_object(text: object) -> dict:
    """A stored JSON object (a note's payload, a share's parts); anything else reads as empty."""
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text, parse_constant=lambda name: None)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _payload_parts(payload: dict) -> list[dict]:
    """The well-formed parts a stored share invitation names."""
    parts = payload.get("parts")
    return [{"type": p["type"], "view_id": p["view_id"]} for p in (parts if isinstance(parts, list) else [])
            if isinstance(p, dict) and isinstance(p.get("type"), str) and isinstance(p.get("view_id"), str)
            and _ID.fullmatch(p["view_id"])]


def _kind_of_ref(ref: object) -> str | None:
    if isinstance(ref, str) and ref.startswith("rightmemory://mq/"):
        return "question"
    if isinstance(ref, str) and ref.startswith("rightmemory://mf/"):
        return "file"
    return None
