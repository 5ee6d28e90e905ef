"""``update run|run-now|retry|status`` and ``daemon``: the Update batch driver's fronts."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rmtui.commands import Result
from rmtui.commands.core import root_of

if TYPE_CHECKING:
    from rmtui.engine.roles.update_driver import DriverPass


def register(sub, common) -> None:
    p = sub.add_parser("update", parents=[common], help="run, retry or inspect Update batches")
    usub = p.add_subparsers(dest="update_cmd", required=True)
    usub.add_parser("run", parents=[common], help="one pass by the readiness rules").set_defaults(handler=cmd_run)
    usub.add_parser("run-now", parents=[common], help="form a batch from whatever is queued and run it") \
        .set_defaults(handler=cmd_run_now)
    q = usub.add_parser("retry", parents=[common], help="retry a batch held after repeated failures")
    q.add_argument("batch", nargs="?", help="batch id, a unique prefix of it or of its hex part "
                                           "(default: every held batch)")
    q.set_defaults(handler=cmd_retry)
    usub.add_parser("status", parents=[common], help="evidence counts and batches").set_defaults(handler=cmd_status)

    p = sub.add_parser("daemon", parents=[common], help="run the Update driver until stopped")
    p.add_argument("--poll-seconds", type=float, default=5.0, help="wait between passes (default 5)")
    p.add_argument("--max-passes", type=int, help="stop after this many passes")
    p.set_defaults(handler=cmd_daemon)


def _outcome(out: DriverPass) -> Result:
    from rmtui.engine.roles.update_driver import BatchFailed, BatchLanded

    if isinstance(out, BatchLanded):
        r = out.receipt
        landed = (r.landed_commit or "")[:12]
        head = f"{out.state} {out.batch_id}" + (f" as {landed}" if landed else "")
        paths = ", ".join(r.changed_paths) or "no memory change"
        text = f"{head}\noperation: {r.operation_id}\nchanged: {paths}\n\n{r.summary}".rstrip()
    elif isinstance(out, BatchFailed):
        text = (f"batch {out.batch_id} failed (attempt {out.attempts}): {out.failure.message}\n"
                f"batch is now {out.batch_state}")
        if out.batch_state == "needs_manual_recovery":
            text += "; run `rmtui --headless update retry` after fixing the cause"
    else:
        counts = out.evidence or {}
        text = out.message or (f"idle: nothing ready ({counts.get('queued', 0)} queued"
                               + (f"; {out.held_batches} batch(es) wait for a retry, see `update status`"
                                  if out.held_batches else "") + ")")
    return Result(out.to_json(), text, exit_code=out.exit_code)


def cmd_run(args) -> Result:
    from rmtui.engine.roles.update_driver import UpdateDriver
    from rmtui.engine.sync import coordinator_for

    root = root_of(args)
    return _outcome(UpdateDriver(root, coordinator=coordinator_for(root)).run_once())


def cmd_run_now(args) -> Result:
    from rmtui.engine.roles.update_driver import UpdateDriver
    from rmtui.engine.sync import coordinator_for

    root = root_of(args)
    return _outcome(UpdateDriver(root, coordinator=coordinator_for(root)).run_once(force=True))


def cmd_retry(args) -> Result:
    from rmtui.engine.roles.update_driver import UpdateDriver
    from rmtui.engine.sync import coordinator_for

    root = root_of(args)
    return _outcome(UpdateDriver(root, coordinator=coordinator_for(root)).retry(args.batch))


def cmd_status(args) -> Result:
    from rmtui.engine.roles.update_driver import UpdateDriver

    st = UpdateDriver(root_of(args)).status()
    lines = ["evidence: " + ", ".join(f"{k} {v}" for k, v in st["evidence"].items())]
    for b in st["batches"]:
        line = f"{b['batch_id'][:25]}…  {b['state']:22} attempts {b['attempts']}  {len(b['uids'])} candidates"
        if b["last_error"] and b["state"] not in ("committed", "no_change"):
            line += f"  last error: {b['last_error'][:80]}"
        lines.append(line)
    return Result(st, "\n".join(lines))


def cmd_daemon(args) -> Result:
    from rmtui.engine.roles.update_driver import run_daemon
    from rmtui.engine.sync import coordinator_for

    def log(msg: str) -> None:
        sys.stderr.write(f"rmtui daemon: {msg}\n")
        sys.stderr.flush()

    out = run_daemon(root_of(args), poll_seconds=args.poll_seconds, max_passes=args.max_passes, log=log,
                     coordinator_factory=coordinator_for)
    return Result(out, f"daemon stopped after {out['passes']} passes")
