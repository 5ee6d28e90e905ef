"""``sync pull|push|status``: the front of memory across machines (engine: rmtui.engine.sync)."""

from __future__ import annotations

from rmtui.commands import Result
from rmtui.commands.core import root_of

#: Statuses that mean the command did not do its job (scripts test the exit code).
EXIT = {"error": 1, "conflict": 3, "dirty": 3, "offline": 4, "unconfigured": 2}
#: Refusals that mean the upstream moved under this machine (stale), not that something broke.
STALE_RULES = ("history-rewritten",)


def register(sub, common) -> None:
    p = sub.add_parser("sync", parents=[common], help="synchronise memory with the branch's Git upstream")
    s = p.add_subparsers(dest="sync_cmd", required=True)
    s.add_parser("pull", parents=[common], help="fetch, validate and publish the upstream's memory") \
        .set_defaults(handler=cmd_sync, action="pull")
    q = s.add_parser("push", parents=[common], help="push local landings (pulls and retries once if refused)")
    q.add_argument("--quiet", action="store_true", help="print nothing (the post-landing push)")
    q.set_defaults(handler=cmd_sync, action="push")
    s.add_parser("status", parents=[common], help="last pull/push, ahead/behind, last failure (no network)") \
        .set_defaults(handler=cmd_sync, action="status")


def cmd_sync(args) -> Result:
    from rmtui.engine import sync

    root = root_of(args)
    result = {"pull": sync.pull, "push": sync.push, "status": sync.status}[args.action](root)
    data = result.to_json()
    lines = [f"{result.status}: {result.message}"]
    if result.upstream:
        lines.append(f"upstream {result.upstream}: ahead {result.ahead}, behind {result.behind}")
    lines += [f"  {f}" for f in result.files[:20]]
    code = 0 if args.action == "status" else EXIT.get(result.status, 0)
    if code and result.rule in STALE_RULES:
        code = 3
    if code:  # as every failing command's JSON: the error's kind beside the status
        data["error"] = result.status
    if getattr(args, "quiet", False):
        return Result(data, "", code)
    return Result(data, "\n".join(lines), code)
