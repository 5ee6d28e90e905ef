"""Supervisor commands: operations, receipts, diff, recover, maintain."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from rmtui.commands import Result
from rmtui.commands.core import root_of


def register(sub, common) -> None:
    p = sub.add_parser("operations", parents=[common], help="operation records")
    s = p.add_subparsers(dest="ops_cmd", required=True)
    q = s.add_parser("list", parents=[common], help="every operation with its phase and role")
    q.add_argument("--unfinished", action="store_true", help="only those not finished")
    q.set_defaults(handler=cmd_ops_list)
    ref_help = "an operation id, a unique prefix of it, or its tail as the workbench shows it"
    q = s.add_parser("show", parents=[common], help="one operation's record")
    q.add_argument("id", help=ref_help)
    q.set_defaults(handler=cmd_ops_show)

    p = sub.add_parser("receipts", parents=[common], help="receipts of finished operations")
    s = p.add_subparsers(dest="receipts_cmd", required=True)
    q = s.add_parser("list", parents=[common], help="the receipts, newest first")
    q.add_argument("--limit", type=int, help="at most this many")
    q.set_defaults(handler=cmd_receipts_list)
    q = s.add_parser("show", parents=[common], help="one receipt: outcome, commits, files")
    q.add_argument("id", help=ref_help + " (or its batch id)")
    q.set_defaults(handler=cmd_receipts_show)

    p = sub.add_parser("diff", parents=[common],
                       help="diff of an operation or receipt (a running one: its worktree so far)")
    p.add_argument("id", help=ref_help)
    p.set_defaults(handler=cmd_diff)

    p = sub.add_parser("recover", parents=[common], help="finish or abandon unfinished operations")
    p.set_defaults(handler=cmd_recover)

    p = sub.add_parser("maintain", parents=[common], help="manual maintenance in a temporary worktree")
    s = p.add_subparsers(dest="maintain_cmd", required=True)
    s.add_parser("begin", parents=[common], help="open a worktree at the head to edit by hand"
                 ).set_defaults(handler=cmd_maintain_begin)
    s.add_parser("status", parents=[common], help="the open worktree, its changes and validation"
                 ).set_defaults(handler=cmd_maintain_status)
    q = s.add_parser("land", parents=[common], help="validate the edits and land them as one commit")
    q.add_argument("-m", "--message", default="maintain: manual edit")
    q.add_argument("--discard-untracked", action="store_true", help=DISCARD_HELP)
    q.set_defaults(handler=cmd_maintain_land)
    q = s.add_parser("abort", parents=[common], help="drop the worktree and its edits")
    q.add_argument("--discard-untracked", action="store_true", help=DISCARD_HELP)
    q.set_defaults(handler=cmd_maintain_abort)


DISCARD_HELP = ("delete the worktree's files that are not memory files (names the root's allow-list leaves out); "
                "without it, land and abort refuse while there are any (exit 3)")


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _store(args):
    from rmtui.engine.writes.operations import OperationStore

    return OperationStore(root_of(args))


def cmd_ops_list(args) -> Result:
    with _store(args) as st:
        ops = st.list(unfinished=args.unfinished)
    text = "\n".join(f"{o.id}  {o.phase:9} {o.role:12} {_ts(o.updated_at)}  {o.error or ''}" for o in ops)
    return Result([o.to_json() for o in ops], text or "no operations")


def cmd_ops_show(args) -> Result:
    with _store(args) as st:
        op = st.get(st.resolve(args.id))
    return Result(op.to_json(), _operation_text(op))


def _lease_text(lease: dict | None) -> str:
    if not lease:
        return "-"
    who = lease.get("holder") or (f"pid {lease['pid']}" if lease.get("pid") else "?")
    if lease.get("host"):
        who += f" on {lease['host']}"
    return who + (f", until {_ts(lease['until'])}" if isinstance(lease.get("until"), (int, float)) else "")


def _operation_text(op) -> str:
    """One operation record for a person: one fact a line, lists joined, no Python reprs."""
    def effect(e) -> str:
        tries = f", {e.attempts} attempt{'s' if e.attempts != 1 else ''}" if e.attempts else ""
        return f"{e.name} {e.state}{tries}" + (f" ({e.error})" if e.error else "")

    lines = [f"operation: {op.id}", f"kind: {op.kind}", f"role: {op.role}", f"phase: {op.phase}",
             f"batch: {op.batch_id or '-'}", f"candidates: {', '.join(op.candidate_uids) or '-'}",
             f"base: {op.base_commit}", f"candidate commit: {op.candidate_commit or '-'}",
             f"landed: {op.landed_commit or 'none'}", f"changed: {', '.join(op.changed_paths) or '-'}",
             f"summary: {op.summary or '-'}", f"worktree: {op.worktree or '-'}", f"branch: {op.branch or '-'}",
             f"lease: {_lease_text(op.lease)}", f"started: {_ts(op.created_at)}", f"updated: {_ts(op.updated_at)}"]
    if op.external_finalizer:
        lines.append(f"lands through: {op.external_finalizer}")
    if op.error:
        lines.append(f"error: {op.error}")
    lines += [f"effect: {effect(e)}" for e in op.effects]
    lines += [f"warning: {w}" for w in op.warnings]
    return "\n".join(lines)


def _receipt_text(r) -> str:
    lines = [f"operation: {r.operation_id}", f"phase: {r.phase}", f"batch: {r.batch_id or '-'}",
             f"base: {r.base_commit}", f"landed: {r.landed_commit or 'none'}",
             f"changed: {', '.join(r.changed_paths) or '-'}", f"summary: {r.summary or '-'}"]
    if r.error:
        lines.append(f"error: {r.error}")
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def cmd_receipts_list(args) -> Result:
    with _store(args) as st:
        rs = st.receipts(args.limit)
    text = "\n".join(f"{r.operation_id}  {r.phase:9} {(r.landed_commit or '-')[:10]}  {', '.join(r.changed_paths)}"
                     for r in rs)
    return Result([r.to_json() for r in rs], text or "no receipts")


def cmd_receipts_show(args) -> Result:
    with _store(args) as st:
        r = st.receipt(st.resolve_receipt(args.id))
    return Result(r.to_json(), _receipt_text(r))


def cmd_diff(args) -> Result:
    from rmtui.engine.writes.diffs import operation_diff

    d = operation_diff(root_of(args), args.id)
    if d.live and not getattr(args, "json", False):  # stdout stays a plain diff
        sys.stderr.write(f"rmtui: {d.id} is {d.phase}: its worktree so far, not committed yet\n")
        sys.stderr.flush()
    empty = "no landed change" if d.final else "no change so far"
    return Result(d.to_json(), d.text or f"{d.id}: {empty}")


def cmd_recover(args) -> Result:
    from rmtui.engine.writes.supervisor import Supervisor

    with Supervisor(root_of(args)) as sup:
        out = sup.recover()
    text = "\n".join(f"{k}: {', '.join(v)}" for k, v in out.items() if v) or "nothing to recover"
    return Result(out, text, exit_code=1 if out["errors"] else 0)  # an operation still stuck is a failure


def cmd_maintain_begin(args) -> Result:
    from rmtui.engine.writes import maintain

    op = maintain.begin(root_of(args))
    return Result({"operation_id": op.id, "worktree": op.worktree, "captured_head": op.base_commit},
                  f"worktree: {op.worktree}\ncaptured head: {op.base_commit}")


def cmd_maintain_status(args) -> Result:
    from rmtui.engine.writes import maintain

    st = maintain.status(root_of(args))
    if st is None:
        return Result({"active": False}, "no maintenance in progress")
    d = {"active": True, **st.to_json()}
    lines = [f"worktree: {st.operation.worktree}", f"captured head: {st.operation.base_commit}",
             f"head current: {'yes' if st.current else 'no (landing will stop)'}",
             f"changed: {', '.join(st.dirty) or '-'}"] + [str(i) for i in st.issues]
    if st.untracked:
        lines.append(f"not memory files (land and abort refuse until moved or deleted): {', '.join(st.untracked)}")
    return Result(d, "\n".join(lines))


def cmd_maintain_land(args) -> Result:
    from rmtui.engine.writes import maintain

    r = maintain.land(root_of(args), args.message, discard_untracked=args.discard_untracked)
    return Result(r.to_json(), _receipt_text(r))


def cmd_maintain_abort(args) -> Result:
    from rmtui.engine.writes import maintain

    r = maintain.abort(root_of(args), discard_untracked=args.discard_untracked)
    return Result(r.to_json(), f"aborted {r.operation_id}")
