"""rmtui as a client of a shared-view hub (docs/formats.md, "The hub"): publish, invite, accept, notes, inbox.

The hub is the original's (or rmtui's own, served by ``shared-view serve``). A provider
publishes a built version-2 package (``POST /api/views/<view>/versions``, a zip) and makes an
invitation (``POST /api/views/<view>/invitations`` → ``invitation_url`` ``<hub>/i/<token>``).
A consumer accepts it (``GET /api/invitations/<token>/view``, ``POST …/accept`` → a connection
token): the connection is recorded as an ``http-file`` target on the hub (credential
``http-<id>``, as the original names it), the ``MF#`` heading lands in ``MEMORY.md`` and the
package is pulled from ``GET /api/views/<view>/package``. A consumer's note goes to ``POST
/api/views/<view>/interactions`` and is kept in ``.runtime/shared_views/notes/<id>.jsonl``; the
provider reads them from ``GET /api/providers/<provider>/inbox``. Every answer is checked for
the fields it must carry before anything is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from rmtui.engine.display import remote_text
from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.fsutil import atomic_write_bytes
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files
from rmtui.engine.views.client import ProviderClient, ProviderError

if TYPE_CHECKING:
    from rmtui.engine.views import consumer, provider
    from rmtui.engine.views.deadline import Deadline

MAX_NOTE_CHARS = 4000
#: The inbox is read in pages of this many notes: a page of the largest notes a hub keeps
#: (16 kB each) stays well inside the 1 MiB an answer may hold.
INBOX_PAGE = 25
MAX_INBOX_ITEMS = 10000
#: A bearer token a hub hands out: visible ASCII, no blanks (it goes into a header as it is).
_TOKEN = re.compile(r"^[\x21-\x7e]{1,512}$")
#: Relationships whose notes reach a person: sending one needs an explicit yes (as in the original).
CONFIRM_RELATIONSHIPS = ("human", "external")


@dataclass(frozen=True)
class Invitation:
    base_url: str
    token: str
    share: bool = False  # ``…/i/share/<token>``: an invitation to a whole share


def parse_invitation_url(url: str) -> Invitation:
    """``http(s)://host[:port]/…/i/<token>`` (one view) or ``…/i/share/<token>`` (a share): the
    hub's base URL and the invitation token."""
    p = urlsplit(url.strip())
    if p.scheme not in ("http", "https") or not p.hostname:
        raise UsageError(f"{url!r} must be an http(s):// invitation URL (…/i/<token>)")
    if p.username or p.password or p.query or p.fragment:
        raise UsageError(f"{url!r}: an invitation URL carries only …/i/<token>")
    if "/i/" not in p.path:
        raise UsageError(f"{url!r} must contain /i/<token>")
    token = p.path.rsplit("/i/", 1)[1].strip("/")
    share = token.startswith("share/")
    if share:
        token = token[len("share/"):]
    if not token or "/" in token or len(token) > 256 or not token.isascii() or not token.isprintable():
        raise UsageError(f"{url!r} must end in /i/<token> (or /i/share/<token>)")
    return Invitation(f"{p.scheme}://{p.netloc}", token, share)


def _text(data: dict, key: str, what: str) -> str:
    """A string field the hub's answer must carry (non-empty, bounded)."""
    value = data.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > 2000:
        raise ProviderError(f"{what}: the hub's answer lacks a valid {key!r}")
    return value.strip()


class HubClient(ProviderClient):
    """The hub's routes; the token is a provider's publish token or a consumer's connection token."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        super().__init__(base_url, token or "", timeout=timeout)

    def publish(self, view_id: str, archive: bytes) -> dict:
        what = f"publishing {view_id}"
        data = self._json("POST", f"/api/views/{quote(view_id, safe='')}/versions", None, what, ok=(200, 201),
                          body=archive, content_type="application/zip")
        for key in ("view_id", "version_id", "package_hash"):
            _text(data, key, what)
        return data

    def create_invitation(self, view_id: str, *, label: str | None = None, expires_at: str | None = None) -> dict:
        what = f"inviting to {view_id}"
        payload = {k: v for k, v in (("label", label), ("expires_at", expires_at)) if v}
        data = self._json("POST", f"/api/views/{quote(view_id, safe='')}/invitations", payload, what, ok=(200, 201))
        parse_invitation_url(_text(data, "invitation_url", what))
        return data

    def invitation_view(self, token: str) -> dict:
        what = "the invitation"
        data = self._json("GET", f"/api/invitations/{quote(token, safe='')}/view", None, what)
        files.check_view_id(_text(data, "view_id", what), "the invitation's view id")
        return data

    def accept(self, token: str, consumer_label: str | None = None) -> dict:
        what = "accepting the invitation"
        payload = {"consumer_label": consumer_label} if consumer_label else {}
        data = self._json("POST", f"/api/invitations/{quote(token, safe='')}/accept", payload, what, ok=(200, 201))
        if not isinstance(data.get("connection_token"), str) or not _TOKEN.match(data["connection_token"]):
            raise ProviderError(f"{what}: the hub's answer lacks a valid 'connection_token'")
        return data

    def create_share_invitation(self, share_id: str, *, title: str, parts: list[dict[str, str]],
                                label: str | None = None, expires_at: str | None = None) -> dict:
        what = f"inviting to share {share_id}"
        payload: dict[str, object] = {"title": title, "parts": parts}
        payload |= {k: v for k, v in (("label", label), ("expires_at", expires_at)) if v}
        data = self._json("POST", f"/api/shares/{quote(share_id, safe='')}/invitations", payload, what,
                          ok=(200, 201))
        if not parse_invitation_url(_text(data, "invitation_url", what)).share:
            raise ProviderError(f"{what}: the hub's invitation_url is not …/i/share/<token>")
        return data

    def share_invitation_view(self, token: str) -> dict:
        what = "the share invitation"
        data = self._json("GET", f"/api/share-invitations/{quote(token, safe='')}/view", None, what)
        files.check_view_id(_text(data, "share_id", what), "the invitation's share id")
        return data

    def accept_share(self, token: str, consumer_label: str | None = None) -> dict:
        what = "accepting the share invitation"
        payload = {"consumer_label": consumer_label} if consumer_label else {}
        return self._json("POST", f"/api/share-invitations/{quote(token, safe='')}/accept", payload, what,
                          ok=(200, 201))

    def post_interaction(self, view_id: str, record: dict) -> dict:
        return self._json("POST", f"/api/views/{quote(view_id, safe='')}/interactions", record,
                          f"note to {view_id}", ok=(200, 201))

    def inbox(self, provider_id: str) -> list[dict]:
        """Every note, read a page at a time (each page within what one answer may hold).

        A hub that ignores paging (the original's inbox answers its newest 100 to any page) is
        read until a page brings nothing new; a hub that never stops is read to ``MAX_INBOX_ITEMS``."""
        what = f"inbox of {provider_id}"
        route = f"/api/providers/{quote(provider_id, safe='')}/inbox"
        out: list[dict] = []
        seen: set[str] = set()
        while len(out) < MAX_INBOX_ITEMS:
            data = self._json("GET", f"{route}?limit={INBOX_PAGE}&offset={len(out)}", None, what)
            items = data.get("interactions")
            if not isinstance(items, list):
                raise ProviderError(f"{what}: the hub's answer has no interactions list")
            fresh = [item for item in items if isinstance(item, dict) and _new(item, seen)]
            out += fresh
            if len(items) < INBOX_PAGE or not fresh:
                break
        return out[:MAX_INBOX_ITEMS]


def _new(item: dict, seen: set[str]) -> bool:
    key = item.get("interaction_id")
    key = key if isinstance(key, str) else json.dumps(item, sort_keys=True, default=str)
    if key in seen:
        return False
    seen.add(key)
    return True


# -- provider -----------------------------------------------------------------------------------

def publish_package(folder: Path, view_id: str, hub_url: str, token: str) -> dict:
    """Publish a built package folder to the hub as the view's new current version."""
    from rmtui.engine.views.package import zip_package

    return HubClient(hub_url, token).publish(view_id, zip_package(folder))


@dataclass(frozen=True)
class Invited:
    """A view built, published and invited to: the build, the hub's answers to the publish
    (``version_id``, ``package_hash``, ...) and to the invitation (``invitation_url``, ...), as
    the hub client checked them. ``to_json`` is the JSON the fronts print, in its key order."""

    build: provider.BuildResult
    hub: dict[str, Any]
    invitation: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"build": self.build.to_json(), "hub": self.hub, "invitation": self.invitation}


def invite(root: MemoryRoot, view_id: str, hub_url: str, token: str, *, label: str | None = None,
           expires_at: str | None = None) -> Invited:
    """Build and publish ``view_id`` (as the original does before inviting), then make one invitation."""
    from rmtui.engine.views import provider

    res = provider.build(root, view_id)
    published = publish_package(res.package, view_id, hub_url, token)
    return Invited(res, published,
                   HubClient(hub_url, token).create_invitation(view_id, label=label, expires_at=expires_at))


def inbox(hub_url: str, token: str, provider_id: str) -> list[dict]:
    return HubClient(hub_url, token).inbox(files.check_view_id(provider_id, "provider id"))


# -- consumer -----------------------------------------------------------------------------------

def accept(root: MemoryRoot, url: str, *, as_id: str | None = None, title: str | None = None,
           relationship: str = "human", consumer_label: str | None = None,
           pull_now: bool = True, timeout: float | None = None) -> consumer.InvitationAccepted | ShareJoined:
    """Accept an invitation: the connection, its credential, the ``MF#`` heading, then a pull;
    the hub's answers and the pull share one budget of ``timeout`` seconds.
    A share's invitation (``…/i/share/<token>``) joins every file view of the share."""
    from rmtui.engine.views import consumer
    from rmtui.engine.views.deadline import Deadline

    if relationship not in files.RELATIONSHIPS:
        raise UsageError(f"unknown relationship {relationship!r}; one of {', '.join(files.RELATIONSHIPS)}")
    inv = parse_invitation_url(url)
    client = HubClient(inv.base_url, timeout=consumer.PULL_TIMEOUT)
    client.deadline = deadline = Deadline.after(timeout or consumer.PULL_TIMEOUT)
    if inv.share:
        if as_id or title:
            raise UsageError("--as and --title name one view; a share's views keep their own ids and titles")
        return _accept_share(root, client, inv, relationship, consumer_label, pull_now, deadline)
    info = client.invitation_view(inv.token)
    if info.get("kind") == "question" or str(info.get("ref", "")).startswith("rightmemory://mq/"):
        raise UsageError("this invitation is to a question view; rmtui joins file views through a hub "
                         "(connect a question view with `shared-view connect URL --token-env NAME`)")
    view_id = files.check_view_id(str(info["view_id"]), "the invitation's view id")
    cid = files.check_view_id(as_id or view_id, "connection id")
    consumer.check_free_id(root, cid, "MF#")
    accepted = client.accept(inv.token, consumer_label)
    if accepted.get("view_id") not in (None, view_id):
        raise ProviderError(f"the hub accepted the invitation for {accepted.get('view_id')!r}, not {view_id!r}")
    return _join_file(root, inv.base_url, cid, view_id, str(accepted["connection_token"]), info, relationship,
                      title, pull_now, accepted.get("connection_id"), deadline)


def _join_file(root: MemoryRoot, base_url: str, cid: str, view_id: str, token: str, info: dict, relationship: str,
               title: str | None, pull_now: bool, connection_id: object,
               deadline: Deadline | None) -> consumer.InvitationAccepted:
    """Record one accepted file view: its credential, the ``http-file`` connection, the heading, a pull."""
    from rmtui.engine.views import consumer

    credential_id = files.check_view_id(f"http-{cid}", "credential id")
    files.save_credential(root, credential_id, kind="http-connection", token=token, base_url=base_url,
                          view_id=view_id)
    description = info.get("description") if isinstance(info.get("description"), str) else None
    maintainer = info.get("provider_id") if isinstance(info.get("provider_id"), str) else None
    version = info.get("current_version_id") if isinstance(info.get("current_version_id"), str) else None
    # the invitation URL holds the invitation token: the tracked entry names the hub, never the token
    target = {"kind": "http-file", "view_id": view_id, "base_url": base_url, "credential_id": credential_id,
              "accepted_from_url": base_url} | ({"version_id": version} if version else {})
    conn = files.Connection(cid, "file", f"rightmemory://mf/{view_id}", relationship,
                            maintainer=remote_text(maintainer, 200) if maintainer else None,
                            description=remote_text(description, 1000) if description else None,
                            accepted_from=base_url, target=target)
    # the provider's words sit inside our sentence, on one line: they can never start a heading or a node
    body = (f"Read-only shared file view `{view_id}` from the hub {base_url}"
            + (f": {remote_text(description, 1000)}" if description else "")
            + ". Its items are imported, not edited here.")
    heading = title or (remote_text(info["title"], 200) if isinstance(info.get("title"), str) else view_id)
    landed = consumer.record(root, conn, heading, body)
    return consumer.InvitationAccepted(conn, landed, consumer.pull_one(root, conn, deadline=deadline) if pull_now
                                       else None,
                                       connection_id=connection_id if isinstance(connection_id, str) else None)


# -- shares: several views of one provider behind one invitation ------------------------------------

@dataclass(frozen=True)
class ShareInvited:
    """Each view of a share built and published, then one invitation to the whole share."""

    builds: list[Invited]
    invitation: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"views": [{"build": b.build.to_json(), "hub": b.hub} for b in self.builds],
                "invitation": self.invitation}


@dataclass(frozen=True)
class ShareJoined:
    """A share's invitation accepted: the share as the hub names it, and each file view joined."""

    share_id: str
    title: str
    provider_id: str | None
    joined: list[consumer.InvitationAccepted]

    def to_json(self) -> dict[str, Any]:
        return {"share_id": self.share_id, "title": self.title, "provider_id": self.provider_id,
                "views": [j.to_json() for j in self.joined]}


def invite_share(root: MemoryRoot, share_id: str, views: list[str], hub_url: str, token: str, *,
                 title: str | None = None, label: str | None = None, expires_at: str | None = None) -> ShareInvited:
    """Build and publish each file view, then make one invitation to all of them as share ``share_id``."""
    from rmtui.engine.views import provider

    sid = files.check_view_id(share_id, "share id")
    if not views:
        raise UsageError("a share needs at least one view")
    client = HubClient(hub_url, token)
    builds = []
    for view_id in dict.fromkeys(views):
        res = provider.build(root, view_id)
        builds.append(Invited(res, publish_package(res.package, view_id, hub_url, token), {}))
    parts = [{"type": "file", "view_id": b.build.view_id} for b in builds]
    return ShareInvited(builds, client.create_share_invitation(sid, title=title or sid, parts=parts, label=label,
                                                               expires_at=expires_at))


def _accept_share(root: MemoryRoot, client: HubClient, inv: Invitation, relationship: str,
                  consumer_label: str | None, pull_now: bool, deadline: Deadline | None) -> ShareJoined:
    """Read the share, check every part before anything is accepted, accept, then join each view."""
    from rmtui.engine.views import consumer

    info = client.share_invitation_view(inv.token)
    raw_parts = info.get("parts")
    if not isinstance(raw_parts, list) or not raw_parts or not all(isinstance(p, dict) for p in raw_parts):
        raise ProviderError("the share invitation: the hub's answer lacks a valid 'parts' list")
    parts: dict[str, dict] = {}
    for part in raw_parts:
        vid = files.check_view_id(str(part.get("view_id")), "a share part's view id")
        if part.get("type") != "file":
            raise UsageError(f"share {info['share_id']} has a {remote_text(part.get('type'), 40)} part ({vid}); "
                             "rmtui joins shares of file views (connect a question view with "
                             "`shared-view connect URL --token-env NAME`)")
        if vid in parts:
            raise ProviderError(f"the share invitation names view {vid} twice")
        consumer.check_free_id(root, vid, "MF#")
        parts[vid] = part
    accepted = client.accept_share(inv.token, consumer_label)
    got = accepted.get("parts")
    tokens: dict[str, dict] = {}
    for part in got if isinstance(got, list) else []:
        if isinstance(part, dict) and part.get("view_id") in parts and isinstance(part.get("connection_token"), str) \
                and _TOKEN.match(part["connection_token"]):
            tokens[part["view_id"]] = part
    missing = sorted(set(parts) - set(tokens))
    if missing:
        raise ProviderError(f"accepting the share invitation: the hub's answer lacks a valid connection token "
                            f"for {', '.join(missing)}")
    provider_id = info.get("provider_id") if isinstance(info.get("provider_id"), str) else None
    joined = []
    for vid, part in parts.items():
        view_info = dict(part) | ({"provider_id": provider_id} if provider_id else {})
        joined.append(_join_file(root, inv.base_url, vid, vid, tokens[vid]["connection_token"], view_info,
                                 relationship, None, pull_now, tokens[vid].get("connection_id"), deadline))
    return ShareJoined(str(info["share_id"]), remote_text(info.get("title") or info["share_id"], 200), provider_id,
                       joined)


def _notes_path(root: MemoryRoot, cid: str):
    return files.runtime_dir(root) / "notes" / f"{cid}.jsonl"


def send_note(root: MemoryRoot, view: str, message: str, *, task_context: str | None = None,
              confirmed: bool = False, actor: str = "user") -> dict:
    """Send a note about a connected view to its provider's inbox; the record is kept either way."""
    conn = files.connection(root.path, view)
    message = message.strip()
    if not message or len(message) > MAX_NOTE_CHARS:
        raise UsageError(f"the note must be 1 to {MAX_NOTE_CHARS} characters")
    if conn.relationship in CONFIRM_RELATIONSHIPS and not confirmed:
        who = f" ({conn.maintainer})" if conn.maintainer else ""
        raise UsageError(f"`{conn.id}` is maintained by a person{who}: confirm sending the note with --yes")
    if conn.kind not in ("http-file", "http-question"):
        raise UsageError(f"`{conn.id}` is not reached over HTTP (target {conn.kind}); notes go through a hub")
    record: dict[str, object] = {"created_at": files.now_iso(), "heading_id": conn.id, "view_type": conn.type,
                                 "ref": conn.ref, "relationship": conn.relationship, "maintainer": conn.maintainer,
                                 "actor": actor, "message": message}
    if task_context and task_context.strip():
        record["task_context"] = task_context.strip()
    cred = files.credential(root, conn.target.get("credential_id") or "")
    try:
        answer = HubClient(conn.target["base_url"], cred["token"]).post_interaction(conn.view_id, record)
        record["status"] = str(answer.get("status") or "recorded")[:40]
        if isinstance(answer.get("interaction_id"), str):
            record["interaction_id"] = answer["interaction_id"][:128]
    except UnavailableError as exc:
        record["status"] = "failed"
        record["error"] = exc.message
    _append(root, conn.id, record)
    if record["status"] == "failed":
        raise UnavailableError(f"the note for {conn.id} was not delivered: {record['error']}",
                               details={"note": record})
    return record


def _append(root: MemoryRoot, cid: str, record: dict) -> None:
    """Append one JSON line, rewriting the file atomically under its lock (a reader never sees half a line)."""
    path = _notes_path(root, cid)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(files.lock_path(root, f"notes-{cid}")):
        old = path.read_bytes() if path.exists() else b""
        line = json.dumps(record, ensure_ascii=False, sort_keys=True).encode() + b"\n"
        atomic_write_bytes(path, old + line, mode=0o600)
