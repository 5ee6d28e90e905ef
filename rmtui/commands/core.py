"""Foundation commands: init, profile, validate, outline, submit, evidence, status, config."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from rmtui.commands import Result
from rmtui.engine.errors import UsageError
from rmtui.engine.memory.roots import MemoryRoot


def root_of(args: argparse.Namespace) -> MemoryRoot:
    from rmtui.engine.memory.roots import resolve_root

    return resolve_root(args.root, args.profile)


def register(sub, common) -> None:
    p = sub.add_parser("init", parents=[common], help="create a memory root")
    p.add_argument("path", nargs="?", help="folder to create (default: the resolved root)")
    p.add_argument("--force", action="store_true", help="initialise a non-empty folder")
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("profile", parents=[common], help="manage named roots in profiles.toml")
    psub = p.add_subparsers(dest="profile_cmd", required=True)
    psub.add_parser("list", parents=[common], help="every profile and its root").set_defaults(handler=cmd_profile_list)
    q = psub.add_parser("create", parents=[common], help="name a root")
    q.add_argument("name")
    q.add_argument("path")
    q.add_argument("--description")
    q.set_defaults(handler=cmd_profile_create)
    for verb, fn, what in (("show", cmd_profile_show, "one profile"),
                           ("remove", cmd_profile_remove, "forget a profile (the root stays)")):
        q = psub.add_parser(verb, parents=[common], help=what)
        q.add_argument("name")
        q.set_defaults(handler=fn)

    p = sub.add_parser("validate", parents=[common], help="validate the memory graph")
    p.add_argument("--path", help="validate this folder (a worktree) instead of the root")
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("outline", parents=[common], help="print the memory graph outline (what the outline tool shows)")
    p.add_argument("--path", help="outline this folder (a worktree) instead of the root")
    p.add_argument("--role", help="leave out the files this role may not read")
    p.set_defaults(handler=cmd_outline)

    p = sub.add_parser("submit", parents=[common], help="submit evidence to the Update queue")
    p.add_argument("--session", required=True)
    p.add_argument("--request")
    p.add_argument("file", nargs="?", default="-", help="evidence file, or - for stdin")
    p.set_defaults(handler=cmd_submit)

    p = sub.add_parser("evidence", parents=[common], help="list, show, approve or reject evidence")
    esub = p.add_subparsers(dest="evidence_cmd", required=True)
    q = esub.add_parser("list", parents=[common], help="evidence with its state, session and first line")
    q.add_argument("--state", help="inbox, queued, claimed, consumed or rejected")
    q.add_argument("--session", help="only this session's")
    q.set_defaults(handler=cmd_evidence_list)
    ref_help = "a uid, a unique uid prefix (the workbench shows 8 characters), or a display id"
    q = esub.add_parser("show", parents=[common], help="one piece of evidence, whole")
    q.add_argument("uid", help=ref_help)
    q.add_argument("--session", help="the session whose display id UID is")
    q.set_defaults(handler=cmd_evidence_show)
    q = esub.add_parser("approve", parents=[common], help="let inbox evidence into the Update queue")
    q.add_argument("uids", nargs="*", help=ref_help)
    q.add_argument("--all", action="store_true", help="approve everything in the inbox")
    q.add_argument("--session", help="the session whose display ids UIDS are")
    q.set_defaults(handler=cmd_evidence_approve)
    q = esub.add_parser("cancel", parents=[common], help="withdraw evidence not yet claimed (with sync: from the "
                        "shared queue, for every machine)")
    q.add_argument("ref", help=ref_help)
    q.add_argument("--session", help="the session whose display id REF is")
    q.set_defaults(handler=cmd_evidence_cancel)
    q = esub.add_parser("reject", parents=[common], help="keep evidence out of memory, with a reason")
    q.add_argument("uids", nargs="+", help=ref_help)
    q.add_argument("--reason", required=True)
    q.add_argument("--session", help="the session whose display ids UIDS are")
    q.set_defaults(handler=cmd_evidence_reject)

    p = sub.add_parser("status", parents=[common], help="root, head, items, evidence by state")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("config", parents=[common],
                       help="read or set settings (rightmemory.toml, or rmtui.toml for rmtui-only keys)")
    csub = p.add_subparsers(dest="config_cmd", required=True)
    q = csub.add_parser("get", parents=[common], help="a key's value (or its default)")
    q.add_argument("key")
    q.set_defaults(handler=cmd_config_get)
    q = csub.add_parser("set", parents=[common], help="set a key in its file (checked first)")
    q.add_argument("key")
    q.add_argument("value", help="a TOML value, e.g. \"required\" or 15 or true")
    q.set_defaults(handler=cmd_config_set)
    q = csub.add_parser("migrate", parents=[common], help="move an older rightmemory.toml's rmtui-only settings "
                        "to rmtui.toml (reading the config never does)")
    q.set_defaults(handler=cmd_config_migrate)


def cmd_init(args) -> Result:
    from rmtui.engine.gitutil import head_commit
    from rmtui.engine.memory.roots import init_root, resolve_root_path

    if args.path is not None and not args.path.strip():
        raise UsageError("the root path is empty")
    path = args.path or resolve_root_path(args.root, args.profile)[0]
    moved: list[str] = []
    root = init_root(path, force=args.force, report=moved)
    data = {"root": str(root.path), "head": head_commit(root.path), "config_migration": moved}
    return Result(data, "\n".join([f"initialised memory root {root.path}", *moved]))


def cmd_profile_list(args) -> Result:
    from rmtui.engine.memory.roots import list_profiles

    profiles = list_profiles()
    text = "\n".join(f"{n}\t{p['root']}" for n, p in sorted(profiles.items())) or "no profiles"
    return Result([{"name": n, **p} for n, p in sorted(profiles.items())], text)


def cmd_profile_create(args) -> Result:
    from rmtui.engine.memory.roots import create_profile

    prof = create_profile(args.name, args.path, description=args.description)
    return Result(prof, f"profile {prof['name']} -> {prof['root']}")


def cmd_profile_show(args) -> Result:
    from rmtui.engine.memory.roots import get_profile

    prof = get_profile(args.name)
    return Result(prof, "\n".join(f"{k}: {v}" for k, v in prof.items()))


def cmd_profile_remove(args) -> Result:
    from rmtui.engine.memory.roots import remove_profile

    prof = remove_profile(args.name)
    return Result(prof, f"removed profile {prof['name']}")


def _tree_of(args) -> Path:
    """The folder ``--path`` names (a worktree a host child edits), else the root's."""
    if not args.path:
        return root_of(args).path
    path = Path(args.path)
    if not path.is_dir():
        raise UsageError(f"{args.path} is not a folder")
    return path


def cmd_validate(args) -> Result:
    from rmtui.engine.writes.validate import report_text, validate_worktree

    report = validate_worktree(_tree_of(args))  # the same function, and text, as the validate_memory role tool
    return Result(report.to_json(), report_text(report), exit_code=0 if report.ok else 1)


def cmd_outline(args) -> Result:
    from rmtui.engine.memory.outline import outline_text

    text = outline_text(_tree_of(args), args.role)
    return Result({"outline": text}, text)


def cmd_submit(args) -> Result:
    from rmtui.engine.evidence.queue import EvidenceQueue, read_evidence_input

    root = root_of(args)
    data = read_evidence_input(args.file, max_bytes=root.config().get("update.max_evidence_bytes"))
    with EvidenceQueue(root) as q:
        out = q.submit(args.session, data, request=args.request)
    where = {"inbox": "in the inbox, waiting for approval", "queued": "queued for Update"}.get(
        out["queue_state"], out["queue_state"])
    # `saved` / `duplicate` lead, as in the JSON answer (`--json`) the skills tell agents about
    said = "duplicate (already saved)" if out["state"] == "duplicate" else "saved"
    return Result(out, f"{said} {out['uid']}: {where}")


def _age(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def cmd_evidence_list(args) -> Result:
    from rmtui.engine.evidence.queue import EvidenceQueue

    with EvidenceQueue(root_of(args)) as q:
        items = q.list(state=args.state, session=args.session)
    text = "\n".join(f"{e.uid}  {e.state:9} {e.session:20} {_age(e.created_at)}  {e.first_line[:60]}" for e in items)
    return Result([e.to_json() for e in items], text or "no evidence")


def cmd_evidence_show(args) -> Result:
    from rmtui.engine.evidence.queue import EvidenceQueue

    with EvidenceQueue(root_of(args)) as q:
        e = q.get(q.resolve(args.uid, args.session))
    head = [f"uid: {e.uid}", f"state: {e.state}", f"session: {e.session}", f"request: {e.request or '-'}",
            f"submitted: {_age(e.created_at)}"]
    if e.reason:
        head.append(f"reason: {e.reason}")
    return Result(e.to_json(with_text=True), "\n".join(head) + "\n\n" + e.text)


def cmd_evidence_approve(args) -> Result:
    from rmtui.engine.evidence.queue import EvidenceQueue

    with EvidenceQueue(root_of(args)) as q:
        uids = q.resolve_all(args.uids, args.session)
        if args.all:
            uids += [e.uid for e in q.list(state="inbox")]
            if not uids:
                return Result([], "the inbox is empty")
        if not uids:
            raise UsageError("name evidence uids to approve, or --all")
        done = q.approve(uids)
    return Result([e.to_json() for e in done], "\n".join(f"approved {e.uid}" for e in done))


def cmd_evidence_cancel(args) -> Result:
    from rmtui.engine.evidence.queue import EvidenceQueue
    from rmtui.engine.sync import coordinator_for
    from rmtui.engine.sync.queue_git import CANCELLED

    root = root_of(args)
    shared = coordinator_for(root)
    if shared is not None:
        out = shared.cancel(args.ref, args.session)
        text = f"cancelled {out.uid} in the shared queue"
        if out.superseded:
            text += f" (re-keyed {len(out.superseded)} recovery record(s))"
        return Result(out.to_json(), text)
    with EvidenceQueue(root) as q:
        done = q.reject([q.resolve(args.ref, args.session)], CANCELLED)
    return Result([e.to_json() for e in done], "\n".join(f"cancelled {e.uid}" for e in done))


def cmd_evidence_reject(args) -> Result:
    from rmtui.engine.evidence.queue import EvidenceQueue

    with EvidenceQueue(root_of(args)) as q:
        done = q.reject(q.resolve_all(args.uids, args.session), args.reason)
    return Result([e.to_json() for e in done], "\n".join(f"rejected {e.uid}: {e.reason}" for e in done))


def cmd_status(args) -> Result:
    from rmtui.engine.host.status import root_status

    st = root_status(root_of(args))
    ev = ", ".join(f"{k} {v}" for k, v in st["evidence"].items())
    it = st["items"]
    valid = "yes" if st["valid"] else f"no ({st['errors']} errors)"
    if st.get("warnings"):  # warnings never make the root invalid
        valid += f" ({st['warnings']} warnings)" if st["valid"] else f", {st['warnings']} warnings"
    text = (f"root: {st['root']}\nhead: {st['head']}\nvalid: {valid}\n"
            f"items: {it['headings']} headings, {it['nodes']} nodes, {it['files']} files\nevidence: {ev}")
    if st["config"]["error"]:
        text += f"\nconfig: refused (commands that load it stop until it is fixed): {st['config']['error']}"
    if st["config"]["ignored"]:
        text += f"\nignored by rmtui (accepted for RightMemory): {', '.join(st['config']['ignored'])}"
    text += "".join(f"\nwarning: {w}" for w in st["config"]["warnings"])
    text += _cycles_text(st["cycles"]) if st["cycles"] else ""
    return Result(st, text)


def _cycles_text(cycles: list[dict]) -> str:
    from rmtui.commands.outcomes import outcome_line

    lines = ["", "cycles:"]
    for c in cycles:
        line = f"  {c['name']:8} {c['state']:11} {c['detail']}"
        if c.get("host_task"):
            line += f"; host task {c['host_task']}"
        if c.get("backoff"):
            line += f"; {c['backoff']}"
        lines.append(line + f" · {outcome_line(c.get('last_outcome'))}")
    return "\n".join(lines)


def _toml_text(value) -> str:
    """``value`` as a person types it in a TOML file (``true``, ``0.5``, ``{a = 1}``); a string bare."""
    import tomlkit

    def item(v):
        if isinstance(v, dict):
            table = tomlkit.inline_table()
            table.update({k: item(x) for k, x in v.items()})
            return table
        if isinstance(v, list):
            array = tomlkit.array()
            array.extend(item(x) for x in v)
            return array
        return tomlkit.item(v)

    return value if isinstance(value, str) else item(value).as_string()


def cmd_config_get(args) -> Result:
    import sys

    from rmtui.engine.memory.config import read_config

    cfg, refused = read_config(root_of(args).path)
    value = cfg.get(args.key)
    if refused:  # shown as written, so the file can be fixed
        sys.stderr.write(f"rmtui: {refused} (the value is shown as written; other commands refuse the file)\n")
    data = {"key": args.key, "value": value, "file": cfg.source(args.key)}
    if value is None:  # a known key nobody set and without a default: say so (exit 1, as `git config`)
        import shlex

        sys.stderr.write(f"rmtui: {args.key} is not set and has no default (set it with "
                         f"`rmtui --headless config set {shlex.quote(args.key)} VALUE`)\n")
        return Result(data, "", exit_code=1)
    return Result(data, _toml_text(value))


def cmd_config_set(args) -> Result:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from rmtui.engine.writes.settings import set_value

    try:  # the document's unwrap: a bare ``v = true`` item is a plain bool, which has no unwrap
        value = tomlkit.parse(f"v = {args.value}").unwrap()["v"]
    except TOMLKitError:
        value = args.value  # a bare word is taken as a string
    # a tracked rightmemory.toml changes through the supervisor (admitted, one commit), never in place
    out = set_value(root_of(args), args.key, value)
    landed = f"; landed {out['landed_commit'][:10]}" if out["landed_commit"] else ""
    shown = tomlkit.item(value).as_string() if isinstance(value, str) else _toml_text(value)
    return Result(out, f"{args.key} = {shown} (in {out['file']}{landed})")


def cmd_config_migrate(args) -> Result:
    from rmtui.engine.writes.settings import migrate

    out = migrate(root_of(args))
    landed = [f"landed {out['landed_commit'][:10]}"] if out["landed_commit"] else []
    return Result(out, "\n".join(out["lines"] + landed) or f"nothing to move: {out['root']} is in the current layout")
