"""``shared-view …``: the front of shared views (engine: rmtui.engine.views, docs/formats.md, "Shared views").

Provider: ``create VIEW --include ID…`` (or ``--question``), ``build VIEW``,
``publish VIEW [--git REPO_URL | --hub URL --token-env NAME]``, ``token VIEW``, ``serve``;
through a hub: ``hub-token --provider ID``, ``invite VIEW --hub URL --token-env NAME`` (``invite VIEW…
--share ID``: one invitation to several views),
``inbox --hub URL --provider ID --token-env NAME``. Consumer:
``connect REPO_URL#share=VIEW`` (Git) or ``connect URL --token-env NAME`` (HTTP),
``accept INVITATION_URL`` (a hub; ``…/i/share/<token>`` joins a share), ``note VIEW MESSAGE``,
``pull [VIEW]``, ``list`` (``--json``: each view with ``view_id`` and ``status``),
``ask VIEW "question"``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from rmtui.commands import Result
from rmtui.commands.core import root_of
from rmtui.commands.table import Sub, add_group, arg
from rmtui.engine.errors import UsageError

if TYPE_CHECKING:
    from rmtui.engine.views.consumer import PullResult, ViewConnected

#: Pull outcomes that mean the command did not do its job (scripts test the exit code).
FAILED = ("stale", "unavailable")


def register(sub, common) -> None:
    add_group(sub, common, "shared-view", "share memory with other roots (MF#/MQ# views)", "view_cmd", SUBCOMMANDS)


def cmd_create(args) -> Result:
    from rmtui.engine.views import provider

    root = root_of(args)
    if args.question:
        instructions = None
        if args.instructions_file:
            with open(args.instructions_file, encoding="utf-8") as fh:
                instructions = fh.read()
        data = provider.create_question_view(root, args.view, title=args.title, intent=args.intent,
                                             instructions=instructions, include=args.include, exclude=args.exclude)
        return Result(data, f"question view {args.view} defined (shared_views/{args.view}/)")
    data = provider.create_file_view(root, args.view, args.include, title=args.title, intent=args.intent,
                                     exclude=args.exclude)
    return Result(data, f"file view {args.view} defined: {', '.join(args.include)}")


def _built_text(res) -> str:
    info = res.info
    lines = [f"built {res.view_id}: {info.items} item(s), {len(info.files)} file(s), version {info.digest[:12]}",
             f"  {res.package}"]
    lines += [f"  warning: {w}" for w in res.warnings + info.warnings]
    return "\n".join(lines)


def cmd_build(args) -> Result:
    from rmtui.engine.views import provider

    res = provider.build(root_of(args), args.view)
    return Result(res.to_json(), _built_text(res))


def cmd_publish(args) -> Result:
    from rmtui.engine.views import gitshare, provider

    root = root_of(args)
    res = provider.build(root, args.view)
    data = {"build": res.to_json()}
    text = [_built_text(res)]
    if args.git:
        who = args.provider or _provider_id()
        pub = gitshare.publish(root, res.package, repo_url=args.git, view_id=args.view, title=res.info.title,
                               description=res.info.description, share_id=args.share, branch=args.branch,
                               provider_id=who, push=not args.no_push)
        data["git"] = pub
        state = "pushed" if pub["pushed"] else ("unchanged" if not pub["changed"] else "committed, not pushed")
        text += [f"git share {pub['share_id']} on {pub['branch']}: {state}", f"  join: {pub['join_url']}"]
    if args.hub:
        from rmtui.engine.views import hub

        pub = hub.publish_package(res.package, args.view, args.hub, _token(args.token_env, "--hub"))
        data["hub"] = pub
        text.append(f"published {args.view} to {args.hub}: version {pub['version_id']}")
    if not args.git and not args.hub:
        text.append("served by `shared-view serve` (issue consumer tokens with `shared-view token`)")
    return Result(data, "\n".join(text))


def _token(env: str | None, what: str) -> str:
    if not env:
        raise UsageError(f"{what} needs --token-env NAME (the variable holding the bearer token)")
    token = os.environ.get(env, "")
    if not token:
        raise UsageError(f"${env} is empty or unset")
    return token


def cmd_invite(args) -> Result:
    from rmtui.engine.views import hub

    if args.share:
        shared = hub.invite_share(root_of(args), args.share, args.view, args.hub, _token(args.token_env, "invite"),
                                  title=args.title, label=args.label, expires_at=args.expires_at)
        inv = shared.invitation
        return Result(shared.to_json(), f"{inv['invitation_url']}\n(invitation {inv.get('invitation_id')} to share "
                                        f"{args.share}: {', '.join(args.view)})")
    if len(args.view) > 1 or args.title:
        raise UsageError("several views, or a --title, make a share: add --share ID")
    data = hub.invite(root_of(args), args.view[0], args.hub, _token(args.token_env, "invite"), label=args.label,
                      expires_at=args.expires_at)
    inv = data.invitation
    return Result(data.to_json(), f"{inv['invitation_url']}\n(invitation {inv.get('invitation_id')} to "
                                  f"{args.view[0]}; version {data.hub['version_id']})")


def cmd_inbox(args) -> Result:
    from rmtui.engine.display import remote_text
    from rmtui.engine.views import hub

    items = hub.inbox(args.hub, _token(args.token_env, "inbox"), args.provider)
    lines = []
    for it in items:  # every field came from the hub: quoted, never printed raw
        raw = it.get("payload")
        payload = raw if isinstance(raw, dict) else {}
        lines.append("  ".join(remote_text(v, 200) for v in (it.get("created_at"), it.get("view_id")))
                     + f"  {remote_text(payload.get('actor', '?'), 80)}: {remote_text(payload.get('message', ''))}")
    return Result({"provider_id": args.provider, "interactions": items},
                  "\n".join(lines) or f"no notes for {args.provider}")


def cmd_hub_token(args) -> Result:
    from pathlib import Path

    from rmtui.engine.views.hubstore import HubRefused, HubStore
    from rmtui.engine.views.server import hub_root_of

    where = Path(args.hub_root) if args.hub_root else hub_root_of(root_of(args))
    try:
        data = HubStore(where).create_provider_token(args.provider, args.label)
    except HubRefused as exc:
        raise UsageError(exc.detail) from None
    data["hub_root"] = str(where)
    return Result(data, f"{data['token']}\n(publish token {data['token_id']} for provider {data['provider_id']} "
                        f"on the hub at {where}; shown once, only its hash is kept)")


def _provider_id() -> str:
    import re

    raw = os.environ.get("USER") or os.environ.get("USERNAME") or "rmtui"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", raw) or "rmtui"


def cmd_token(args) -> Result:
    from rmtui.engine.views import files, provider

    root = root_of(args)
    if args.revoke:
        if not files.revoke_token(root, args.revoke):
            raise UsageError(f"no issued token {args.revoke!r}")
        return Result({"revoked": args.revoke}, f"revoked {args.revoke}")
    kind = provider.view_kind(root.path, files.check_view_id(args.view))
    if kind is None:
        raise UsageError(f"no view `{args.view}` in shared_views/ (create it first)")
    tid, token = files.issue_token(root, args.view, kind, args.label)
    return Result({"token_id": tid, "view_id": args.view, "kind": kind, "token": token},
                  f"{token}\n(token {tid} for {kind} view {args.view}; shown once, only its hash is kept)")


def cmd_serve(args) -> Result:
    from pathlib import Path

    from rmtui.engine.views.server import Limits, ViewServer

    root = root_of(args)
    srv = ViewServer(root, host=args.host, port=args.port, allow_remote=args.allow_remote,
                     limits=Limits(max_answers=max(1, args.max_answers)),
                     hub_root=Path(args.hub_root) if args.hub_root else None, public_url=args.public_url)
    sys.stderr.write(f"rmtui: serving shared views at {srv.url} (Ctrl-C stops)\n{srv.connect_lines()}")
    sys.stderr.flush()
    srv.serve_forever()
    return Result({"url": srv.url, "state": "stopped"}, "stopped")


def cmd_connect(args) -> Result:
    from rmtui.engine.views import consumer

    root = root_of(args)
    if "#" in args.url and "share=" in args.url.split("#", 1)[1]:
        if args.token_env:
            raise UsageError("a Git share needs no token; --token-env is for HTTP providers")
        data = consumer.connect_git(root, args.url, as_id=args.as_id, relationship=args.relationship,
                                    pull_now=not args.no_pull)
    else:
        if not args.token_env:
            raise UsageError("an HTTP connection needs --token-env NAME (the variable holding the bearer token)")
        token = os.environ.get(args.token_env, "")
        if not token:
            raise UsageError(f"${args.token_env} is empty or unset")
        data = consumer.connect_http(root, args.url, token, as_id=args.as_id, relationship=args.relationship,
                                     title=args.title, pull_now=not args.no_pull)
    conn = data.connection
    return _joined(data, f"connected {conn.id} ({conn.type} view via {conn.kind})")


def _joined(data: ViewConnected, line: str) -> Result:
    """A new connection's result: its line, and the first pull's (exit 4 when that pull failed)."""
    text, code = [line], 0
    if data.pull is not None:
        text.append(_pull_line(data.pull))
        code = 4 if data.pull.status in FAILED else 0
    return Result(data.to_json(), "\n".join(text), code)


def cmd_accept(args) -> Result:
    from rmtui.engine.views import hub

    data = hub.accept(root_of(args), args.url, as_id=args.as_id, title=args.title, relationship=args.relationship,
                      consumer_label=args.consumer_label, pull_now=not args.no_pull, timeout=args.timeout)
    if isinstance(data, hub.ShareJoined):
        lines = [f"joined share {data.share_id} ({len(data.joined)} file view(s))"]
        for one in data.joined:
            lines.append(_joined(one, f"accepted {one.connection.id} (file view via "
                                      f"{one.connection.target['base_url']})").text)
        failed = any(one.pull is not None and one.pull.status in FAILED for one in data.joined)
        return Result(data.to_json(), "\n".join(lines), 4 if failed else 0)
    conn = data.connection
    return _joined(data, f"accepted {conn.id} (file view via {conn.target['base_url']})")


def cmd_note(args) -> Result:
    from rmtui.engine.views import hub

    rec = hub.send_note(root_of(args), args.view, " ".join(args.message), task_context=args.task_context,
                        confirmed=args.yes)
    return Result(rec, f"note for {args.view}: {rec['status']}")


def _pull_line(r: PullResult) -> str:
    if r.status in FAILED:
        return f"{r.view_id}: {r.status}: {r.reason}"
    what = "new version" if r.changed else "unchanged"
    return f"{r.view_id}: {r.status}, {what} ({r.items} item(s), version {str(r.version)[:12]})"


def cmd_pull(args) -> Result:
    from rmtui.engine.views import consumer

    results = consumer.pull(root_of(args), args.view, timeout=args.timeout)
    code = 4 if any(r.status in FAILED for r in results) else 0
    return Result([r.to_json() for r in results],
                  "\n".join(_pull_line(r) for r in results) or "no file views are connected", code)


def cmd_list(args) -> Result:
    from rmtui.engine.views import consumer, provider

    root = root_of(args)
    if args.provided:
        views = provider.list_views(root)
        return Result(views, "\n".join(_provided_line(v) for v in views) or "this root defines no views")
    rows = consumer.list_connections(root)
    lines = []
    for r in rows:
        line = f"{r['view_id']}  {r['type']}  {r['status']}"
        if r.get("items") is not None:
            line += f"  {r['items']} item(s)"
        if r.get("last_success_at"):
            line += f"  pulled {r['last_success_at']}"
        if r.get("reason") and r["status"] != "fresh":
            line += f"  ({r['reason']})"
        lines.append(line)
    return Result(rows, "\n".join(lines) or "no shared views are connected")


def _provided_line(v: dict) -> str:
    """One view this root defines: its kind, what it shares, its build (file views) and tokens."""
    parts = [v["view_id"], v["kind"]]
    scope = v.get("scope")
    if scope is None:
        parts.append(f"unreadable: {v.get('error')}")
    elif scope["whole_memory"]:
        parts.append("answers from the whole memory")
    else:
        parts.append(f"shares {', '.join(scope['include'])}"
                     + (f" (not {', '.join(scope['exclude'])})" if scope["exclude"] else ""))
    if v["kind"] == "file":
        parts.append(f"built {str(v.get('version'))[:12]}, {v.get('items')} item(s)" if v.get("built")
                     else "not built")
    parts.append(f"tokens {v['tokens']}")
    return "  ".join(parts)


def cmd_ask(args) -> Result:
    from rmtui.engine.views import consumer

    data = consumer.ask(root_of(args), args.view, " ".join(args.question))
    return Result(data.to_json(), data.text.rstrip("\n"), 0 if data.status == "answered" else 4)


# -- the argparse tree of `shared-view`, as data --------------------------------------------------

_VIEW = arg("view")
_HUB_ROOT = arg("--hub-root", metavar="DIR", help="the hub root (default: .runtime/hub of this root)")
_AS = arg("--as", dest="as_id", metavar="ID", help="local heading id (default: the view id)")
_TITLE = arg("--title", help="title of the local heading")
_RELATIONSHIP = arg("--relationship", default="human", choices=("human", "owned-agent", "team-space", "external"))
_NO_PULL = arg("--no-pull", action="store_true", help="record the connection only")
_TOKEN_ENV = arg("--token-env", metavar="NAME", required=True, help="variable holding the hub publish token")

SUBCOMMANDS: tuple[Sub, ...] = (
    Sub("create", "define a view: the items it shares (or a question view)", cmd_create, (
        _VIEW,
        arg("--include", nargs="+", default=[], metavar="ID",
            help="headings (with everything under them), nodes, or MEMORY_<id>.md backing files"),
        arg("--exclude", nargs="+", default=[], metavar="ID", help="ids to leave out of included subtrees"),
        arg("--title"),
        arg("--intent", help="what the view is for (view.md, the package description)"),
        arg("--question", action="store_true", help="a question view (MQ#) instead of a file view"),
        arg("--instructions-file", help="question view: the private retriever.md instructions"))),
    Sub("build", "render and validate a view's version-2 package", cmd_build, (_VIEW,)),
    Sub("publish", "build, then push to a Git share repository (or serve it)", cmd_publish, (
        _VIEW,
        arg("--git", metavar="REPO_URL", help="Git share repository (created on first publish if empty)"),
        arg("--branch", help="branch of the share repository (default: its default branch)"),
        arg("--share", help="share id in the repository (default: the view id)"),
        arg("--provider", help="provider id recorded in share.toml (default: $USER)"),
        arg("--no-push", action="store_true", help="commit in the local cache only"),
        arg("--hub", metavar="URL", help="a shared-view hub to publish the version to"),
        arg("--token-env", metavar="NAME", help="environment variable holding the hub publish token"))),
    Sub("invite", "publish a view to a hub and make an invitation URL", cmd_invite, (
        arg("view", nargs="+", help="the view (with --share: each view of the share)"),
        arg("--share", metavar="ID", help="invite to a whole share of these views (…/i/share/<token>)"),
        arg("--title", help="with --share: the share's title"),
        arg("--hub", metavar="URL", required=True),
        _TOKEN_ENV,
        arg("--label", help="who the invitation is for"),
        arg("--expires-at", metavar="ISO_TIME", help="when the invitation stops working"))),
    Sub("inbox", "the notes consumers sent about your views (from a hub)", cmd_inbox, (
        arg("--hub", metavar="URL", required=True),
        arg("--provider", required=True, help="your provider id on the hub"),
        _TOKEN_ENV)),
    Sub("hub-token", "issue a hub publish token for a provider (served hub)", cmd_hub_token, (
        arg("--provider", required=True),
        arg("--label"),
        _HUB_ROOT)),
    Sub("token", "issue a bearer token for one consumer of a view", cmd_token, (
        _VIEW,
        arg("--label", help="who the token is for"),
        arg("--revoke", metavar="TOKEN_ID", help="revoke an issued token instead"))),
    Sub("serve", "serve built views and answer question views over HTTP", cmd_serve, (
        arg("--host", default="127.0.0.1"),
        arg("--port", type=int, default=8767, help="0 picks a free port"),
        arg("--allow-remote", action="store_true", help="listen on a non-loopback address"),
        arg("--max-answers", type=int, default=2, help="questions answered at once"),
        arg("--hub-root", metavar="DIR", help="the hub root to serve (default: .runtime/hub of this root)"),
        arg("--public-url", metavar="URL", help="base of invitation URLs (default: hub.toml's, else this server)"))),
    Sub("connect", "connect a view: REPO_URL#share=VIEW, or an HTTP URL", cmd_connect, (
        arg("url"),
        arg("--token-env", metavar="NAME", help="environment variable holding the HTTP bearer token"),
        _AS, _TITLE, _RELATIONSHIP, _NO_PULL)),
    Sub("accept", "accept a hub invitation (…/i/<token>) and pull the view", cmd_accept, (
        arg("url"),
        _AS, _TITLE, _RELATIONSHIP,
        arg("--consumer-label", help="how the provider sees this connection"),
        _NO_PULL,
        arg("--timeout", type=float, default=30.0,
            help="seconds the hub's answers and the first pull may take in all"))),
    Sub("note", "send a note about a connected view to its provider's inbox", cmd_note, (
        _VIEW,
        arg("message", nargs="+"),
        arg("--task-context", help="what you were doing when the note arose"),
        arg("--yes", action="store_true", help="confirm sending to a person (relationship human/external)"))),
    Sub("pull", "download, validate and import file views", cmd_pull, (
        arg("view", nargs="?"),
        arg("--timeout", type=float, default=30.0))),
    Sub("list", "connected views and their freshness (or --provided)", cmd_list, (
        arg("--provided", action="store_true", help="the views this root defines instead"),)),
    Sub("ask", "ask a question view; the answer is shown, not stored", cmd_ask, (
        _VIEW,
        arg("question", nargs="+"))),
)
