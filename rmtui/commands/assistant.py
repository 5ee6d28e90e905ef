"""Native assistant protocol, guidance capture and skills installation (all JSON)."""

from __future__ import annotations

import json
import sys

from rmtui.commands import Result
from rmtui.commands.core import cmd_submit, root_of


def register(sub, common) -> None:
    p = sub.add_parser("assistant", parents=[common], help="native assistant protocol (JSON)")
    s = p.add_subparsers(dest="assistant_cmd", required=True)
    q = s.add_parser("context", parents=[common], help="what the host needs at a session's start")
    q.add_argument("--session", required=True)
    q.set_defaults(handler=cmd_context)
    q = s.add_parser("submit", parents=[common], help="submit evidence (the answer is JSON)")
    q.add_argument("--session", required=True)
    q.add_argument("--request", required=True)
    q.add_argument("file", nargs="?", default="-")
    q.set_defaults(handler=cmd_assistant_submit)
    q = s.add_parser("begin", parents=[common], help="hand a cycle's task to the host (Update, Pruner, Insight, "
                     "a correction, a sync repair)")
    q.add_argument("--role", required=True, help="update, pruner, insight, update-correction or sync-reconciler")
    q.add_argument("--retry", action="store_true", help="replace the role's open task and fence its edits")
    q.add_argument("--force", action="store_true", help="pruner, insight: begin even when not due")
    q.add_argument("--receipt", help="update-correction: the landed Update's operation id (a unique prefix will do)")
    q.add_argument("--comment", help="update-correction: what is wrong with the landing, or an answer to its question")
    q.set_defaults(handler=cmd_begin_role)
    q = s.add_parser("complete", parents=[common], help="admit and land a host task's work")
    q.add_argument("--task", required=True)
    q.add_argument("--summary", help="the child's report (default: its commit's subject)")
    q.add_argument("--result", help='update-correction: {"status": "applied"|"no_change"|"needs_input", "message": …}')
    q.set_defaults(handler=cmd_complete_task)
    q = s.add_parser("status", parents=[common], help="one host task, or every open one")
    q.add_argument("--task")
    q.set_defaults(handler=cmd_task_status)
    u = s.add_parser("update", parents=[common], help="the Update task: begin, status, complete")
    u = u.add_subparsers(dest="assistant_update_cmd", required=True)
    q = u.add_parser("begin", parents=[common], help="claim a batch and hand it to the host")
    q.add_argument("--retry", action="store_true", help="replace the current task and fence its edits")
    q.set_defaults(handler=cmd_begin)
    q = u.add_parser("status", parents=[common], help="the Update task's state")
    q.add_argument("--task")
    q.set_defaults(handler=cmd_status)
    q = u.add_parser("complete", parents=[common], help="admit and land the Update task's work")
    q.add_argument("--task", required=True)
    q.set_defaults(handler=cmd_complete)

    p = sub.add_parser("guidance", parents=[common], help="capture pending agent guidance")
    s = p.add_subparsers(dest="guidance_cmd", required=True)
    q = s.add_parser("submit", parents=[common], help="add guidance to AGENT_GUIDANCE_INBOX.md")
    q.add_argument("--session", required=True)
    q.add_argument("file", nargs="?", default="-")
    q.set_defaults(handler=cmd_guidance)

    p = sub.add_parser("mcp", parents=[common], help="serve the MCP tools over stdio")
    p.set_defaults(handler=cmd_mcp)

    p = sub.add_parser("skills", parents=[common], help="skills for host agents")
    s = p.add_subparsers(dest="skills_cmd", required=True)
    s.add_parser("list", parents=[common], help="the skills rmtui ships").set_defaults(handler=cmd_skills_list)
    q = s.add_parser("install", parents=[common], help="copy the skills where the host finds them")
    q.add_argument("--target", required=True, help="folder where the host looks for skills")
    q.add_argument("--force", action="store_true", help="overwrite skills already there")
    q.set_defaults(handler=cmd_skills_install)


def _json(data) -> Result:
    return Result(data, json.dumps(data, indent=2, ensure_ascii=False))


def cmd_assistant_submit(args) -> Result:
    """``submit`` whose answer is JSON either way: the protocol a host reads."""
    return _json(cmd_submit(args).data)


def cmd_context(args) -> Result:
    from rmtui.engine.host import assistant

    return _json(assistant.context(root_of(args), args.session).to_json())


def cmd_begin(args) -> Result:
    from rmtui.engine.host import assistant

    return _json(assistant.begin(root_of(args), retry=args.retry).to_json())


def cmd_status(args) -> Result:
    from rmtui.engine.host import assistant

    return _json(assistant.status(root_of(args), args.task).to_json())


def cmd_complete(args) -> Result:
    from rmtui.engine.host import assistant

    receipt = assistant.complete(root_of(args), args.task)
    if receipt.warnings:  # e.g. published, but the disk refused the bookkeeping: a person sees it too
        from rmtui.engine.display import warning_lines

        sys.stderr.write(warning_lines(receipt.warnings))
        sys.stderr.flush()
    return _json(receipt.to_json())


def cmd_begin_role(args) -> Result:
    from rmtui.engine.host import assistant

    return _json(assistant.begin_role(root_of(args), args.role, retry=args.retry, force=args.force,
                                      receipt=args.receipt, comment=args.comment).to_json())


def cmd_complete_task(args) -> Result:
    from rmtui.engine.host import assistant

    return _json(assistant.complete_task(root_of(args), args.task, summary=args.summary,
                                         result=args.result).to_json())


def cmd_task_status(args) -> Result:
    from rmtui.engine.host import assistant

    return _json(assistant.task_status(root_of(args), args.task).to_json())


def cmd_guidance(args) -> Result:
    from rmtui.engine.evidence.queue import read_evidence_input
    from rmtui.engine.writes import guidance

    root = root_of(args)
    data = read_evidence_input(args.file, max_bytes=root.config().get("update.max_evidence_bytes"))
    return _json(guidance.capture(root, args.session, data))


def cmd_skills_list(args) -> Result:
    from rmtui.engine.host.skills import list_skills

    skills = list_skills()
    return Result(skills, "\n".join(f"{s['name']}: {s['description']}" for s in skills))


def cmd_skills_install(args) -> Result:
    from rmtui.engine.host.skills import install_skills

    done = install_skills(args.target, force=args.force)
    return Result(done, "\n".join(f"installed {d['name']} -> {d['path']}" for d in done))


def cmd_mcp(args) -> Result:
    from rmtui.mcp_retriever import WarmRetriever

    root = root_of(args)
    warm = WarmRetriever(root).prepare()  # before the SDK's import (about 0.65 s): see mcp_retriever
    from rmtui.mcp_forkserver import launch_later
    from rmtui.mcp_server import serve

    launch_later()  # the next start forks from a server that has imported the SDK already

    serve(root, warm)
    return Result(None)
