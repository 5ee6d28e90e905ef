"""``prune``, ``insight``, ``history``, ``pursuit`` and ``update correct``: the fronts of the
maintenance cycles and the Pursuit editor.

Registering also wraps the ``daemon`` command so it installs the Pruner and Insight checks
into the daemon's cycles first (:func:`rmtui.engine.cycles.install_daemon_cycles`); other
commands never import them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rmtui.commands import Result
from rmtui.commands.core import root_of
from rmtui.commands.outcomes import outcome_line

if TYPE_CHECKING:
    from rmtui.engine.pursuit import PursuitState


def register(sub, common) -> None:
    _with_daemon_cycles(sub)

    p = sub.add_parser("prune", parents=[common], help="the Pruner: due status, or a run")
    psub = p.add_subparsers(dest="prune_cmd", required=True)
    psub.add_parser("status", parents=[common], help="whether a prune is due and why").set_defaults(
        handler=cmd_prune_status)
    q = psub.add_parser("run", parents=[common], help="run the Pruner if due (or --force)")
    q.add_argument("--force", action="store_true", help="run even when not due")
    q.set_defaults(handler=cmd_prune_run)

    p = sub.add_parser("insight", parents=[common], help="Insight: points and the last run, or a run")
    isub = p.add_subparsers(dest="insight_cmd", required=True)
    isub.add_parser("status", parents=[common], help="points, threshold and the last outcome").set_defaults(
        handler=cmd_insight_status)
    q = isub.add_parser("run", parents=[common], help="claim and run Insight at the threshold (or --force)")
    q.add_argument("--force", action="store_true", help="run even below the threshold")
    q.set_defaults(handler=cmd_insight_run)

    p = sub.add_parser("history", parents=[common], help="ask the Historian about past memory")
    hsub = p.add_subparsers(dest="history_cmd", required=True)
    q = hsub.add_parser("ask", parents=[common], help="a read-only answer from history, labelled historical")
    q.add_argument("question")
    q.set_defaults(handler=cmd_history_ask)

    p = sub.add_parser("pursuit", parents=[common], help="the Pursuit editor: show, apply, undo, redo, checkpoint")
    esub = p.add_subparsers(dest="pursuit_cmd", required=True)
    esub.add_parser("show", parents=[common], help="the Pursuit map, its revision and pending edits").set_defaults(
        handler=cmd_pursuit_show)
    q = esub.add_parser("apply", parents=[common], help="apply one operation against the expected revision")
    q.add_argument("--op", required=True, help='the operation as JSON, e.g. {"type": "create", "title": "…"}')
    q.add_argument("--expected-revision", required=True, help="the revision `pursuit show` gave")
    q.add_argument("--session", help="who edits (pending edits belong to one session)")
    q.set_defaults(handler=cmd_pursuit_apply)
    for verb, fn, what in (("undo", cmd_pursuit_undo, "undo the last pending edit"),
                           ("redo", cmd_pursuit_redo, "redo the edit undone last"),
                           ("checkpoint", cmd_pursuit_checkpoint, "land the pending edits as one commit")):
        q = esub.add_parser(verb, parents=[common], help=what)
        q.add_argument("--expected-revision", help="refuse unless the map is at this revision")
        q.add_argument("--session", help="who edits")
        q.set_defaults(handler=fn)
    q = esub.add_parser("discard", parents=[common], help="drop every pending edit")
    q.add_argument("--session", help="drop them only if they are this session's (refused, exit 3, otherwise)")
    q.set_defaults(handler=cmd_pursuit_discard)

    update = _subcommands(sub, "update")
    if update is not None:
        q = update.add_parser("correct", parents=[common], help="send a landed Update back for correction")
        q.add_argument("receipt", help="the operation id on the landed Update's receipt (a unique prefix will do)")
        q.add_argument("--comment", required=True, help="what is wrong with the landing, or an answer to its question")
        q.set_defaults(handler=cmd_update_correct)


def _with_daemon_cycles(sub) -> None:
    daemon = sub.choices.get("daemon")
    if daemon is None:
        return
    original = daemon.get_default("handler")

    def cmd_daemon_with_cycles(args) -> Result:
        from rmtui.engine.cycles import install_daemon_cycles

        install_daemon_cycles()
        return original(args)

    daemon.set_defaults(handler=cmd_daemon_with_cycles)


def _subcommands(sub, name: str):
    """The subcommand table of an already registered command (``update`` lives in its own module)."""
    parser = sub.choices.get(name)
    if parser is None:
        return None
    for action in parser._actions:  # argparse keeps no public handle on a parser's subparsers
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


# -- prune ---------------------------------------------------------------------------------

def cmd_prune_status(args) -> Result:
    from rmtui.engine.cycles.pruner import prune_status

    st = prune_status(root_of(args))
    since = f"since {st.last_prune_commit[:12]}" if st.last_prune_commit else "(no prune commit yet)"
    lines = [f"{'due' if st.due else 'not due'}: {st.memory_commits_since_prune} of "
             f"{st.generation_commits} Memory commits {since}"]
    for g in st.revival_grace:
        lines.append(f"revival grace: {g['id']} (next checkpoint {g['next_checkpoint']}/{g['of']})")
    lines.append(outcome_line(st.last_outcome))
    if st.backoff:
        lines.append(f"daemon: {st.backoff}")
    return Result(st.to_json(), "\n".join(lines))


def cmd_prune_run(args) -> Result:
    from rmtui.engine.cycles.pruner import run_prune

    out = run_prune(root_of(args), force=args.force)
    if out.state == "idle" and out.status is not None:
        return Result(out.to_json(), f"not due: {out.status.memory_commits_since_prune} of "
                                     f"{out.status.generation_commits} Memory commits since the last prune "
                                     "(use --force to run anyway)")
    if out.state == "failed":
        return Result(out.to_json(), f"prune failed: {out.message}", exit_code=out.exit_code)
    text = f"{out.message} as {(out.landed_commit or '')[:12]}\noperation: {out.operation_id}"
    if out.removed:
        text += "\nremoved: " + ", ".join(out.removed)
    if out.revival_grace:
        text += "\nrevival grace: " + ", ".join(f"{g['id']} {g['grace']}" for g in out.revival_grace)
    return Result(out.to_json(), text)


# -- insight -------------------------------------------------------------------------------

def cmd_insight_status(args) -> Result:
    from rmtui.engine.cycles.insight import insight_status

    st = insight_status(root_of(args))
    lines = [f"points: {st.points:g} of {st.threshold:g}" + (" (due)" if st.due else "")]
    if st.active_operation_id:
        lines.append(f"claimed: {st.active_operation_id} ({st.active_operation_points:g} points)")
    lines.append(outcome_line(st.last_run))
    if st.backoff:
        lines.append(f"daemon: {st.backoff}")
    return Result(st.to_json(), "\n".join(lines))


def cmd_insight_run(args) -> Result:
    from rmtui.engine.cycles.insight import run_insight

    out = run_insight(root_of(args), force=args.force)
    if out.state == "idle":
        return Result(out.to_json(), f"below the threshold: {out.points:g} of {out.threshold:g} points "
                                     "(use --force to run anyway)")
    if out.state == "failed":
        return Result(out.to_json(), f"insight failed: {out.message} (points kept: {out.points:g})",
                      exit_code=out.exit_code)
    if out.state == "artifact":
        return Result(out.to_json(), f"wrote {out.log} as {(out.landed_commit or '')[:12]}\n"
                                     f"operation: {out.operation_id}\npoints now {out.points:g}")
    return Result(out.to_json(), f"no insight this time (no-op)\noperation: {out.operation_id}\n"
                                 f"points now {out.points:g}")


# -- history -------------------------------------------------------------------------------

def cmd_history_ask(args) -> Result:
    from rmtui.engine.cycles.historian import ask

    out = ask(root_of(args), args.question)
    return Result(out.to_json(), f"[historical answer, from history up to {out.head[:12]}]\n\n{out.answer}")


# -- update correct ------------------------------------------------------------------------

def cmd_update_correct(args) -> Result:
    from rmtui.engine.cycles.corrections import correct_landing

    out = correct_landing(root_of(args), args.receipt, args.comment)
    text = f"{out.status}: {out.message}"
    if out.landed_commit:
        text += f"\nlanded as {out.landed_commit[:12]} (operation {out.operation_id})"
    if out.status == "needs_input":
        text += f"\n(answer with `update correct {out.receipt} --comment \"…\"`)"
    return Result(out.to_json(), text, exit_code=out.exit_code)


# -- pursuit editor --------------------------------------------------------------------------

def _pursuit_text(st: PursuitState, head: str = "") -> str:
    lines = [head] if head else []
    lines.append(f"revision {st.revision}")
    by_id = {p["id"]: p for p in st.pursuits}
    focus = st.focus
    for p in st.pursuits:
        depth = 0
        parent = p["parent_id"]
        while parent in by_id:
            depth += 1
            parent = by_id[parent]["parent_id"]
        mark = f" [focus {focus.index(p['id']) + 1}]" if p["id"] in focus else ""
        kind = "" if p["kind"] == "#" else f" ({p['kind']})"
        lines.append(f"{'  ' * depth}- {p['title']} `{p['id']}`{kind}{mark}")
    lines.append(f"pending edits: {st.pending_edits}"
                 + (f" ({', '.join(st.changed_files)})" if st.changed_files else "")
                 + (" · undo" if st.can_undo else "") + (" · redo" if st.can_redo else ""))
    if st.conflicts:
        lines.append("conflict: memory changed under the pending edits: " + ", ".join(st.conflicts))
    return "\n".join(lines)


def cmd_pursuit_show(args) -> Result:
    from rmtui.engine import pursuit

    st = pursuit.show(root_of(args))
    return Result(st.to_json(), _pursuit_text(st))


def cmd_pursuit_apply(args) -> Result:
    from rmtui.engine import pursuit
    from rmtui.engine.pursuit.edits import parse_op

    st = pursuit.apply(root_of(args), parse_op(args.op), expected_revision=args.expected_revision,
                       session=args.session)
    head = (st.description or "") if st.changed else "no change"
    return Result(st.to_json(), _pursuit_text(st, head))


def cmd_pursuit_undo(args) -> Result:
    from rmtui.engine import pursuit

    st = pursuit.undo(root_of(args), expected_revision=args.expected_revision, session=args.session)
    return Result(st.to_json(), _pursuit_text(st, st.description or ""))


def cmd_pursuit_redo(args) -> Result:
    from rmtui.engine import pursuit

    st = pursuit.redo(root_of(args), expected_revision=args.expected_revision, session=args.session)
    return Result(st.to_json(), _pursuit_text(st, st.description or ""))


def cmd_pursuit_checkpoint(args) -> Result:
    from rmtui.engine import pursuit

    st = pursuit.checkpoint(root_of(args), expected_revision=args.expected_revision, session=args.session)
    if not st.landed_commit:
        return Result(st.to_json(), "nothing to checkpoint")
    return Result(st.to_json(), f"{st.message} as {st.landed_commit[:12]}\noperation: {st.operation_id}\n"
                                f"changed: {', '.join(st.changed_paths or [])}")


def cmd_pursuit_discard(args) -> Result:
    from rmtui.engine import pursuit

    st = pursuit.discard(root_of(args), session=args.session)
    return Result(st.to_json(), _pursuit_text(st, f"pending edits of {args.session!r} dropped" if args.session
                                              else "pending edits dropped"))
