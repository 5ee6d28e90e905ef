"""One argument parser for both fronts (docs/architecture.md, "Fronts and entry points").

``rmtui`` opens the workbench; ``rmtui --headless <command>`` runs an engine command and
prints its result (text, or JSON with ``--json``) on stdout, diagnostics on stderr.
Exit codes: 0 ok, 1 operation failed, 2 bad input/usage, 3 conflict/stale, 4 unavailable.
The headless path never imports Textual.
"""

from __future__ import annotations

import os
import sys

from rmtui.command_word import command_of
from rmtui.engine.errors import EngineError

# A thin retrieve (rmtui/thin_client.py) never needs argparse, the command modules (and the
# dataclasses they import), typing, json or re: they are imported where they are used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


def _parser_class() -> type[argparse.ArgumentParser]:
    """argparse's parser with errors a person can act on: a missing subcommand lists the
    subcommands (not argparse's ``required: evidence_cmd``), a mistyped command suggests the
    closest one, each in one line; every other error is argparse's own."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # type: ignore[override]
            line = _usage_hint(self, message)
            if line is None:
                super().error(message)
            sys.stderr.write(f"rmtui: {line}\n")
            raise SystemExit(2)

    return Parser


def _usage_hint(parser: argparse.ArgumentParser, message: str) -> str | None:
    import argparse
    import difflib
    import re

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs or not subs[0].choices:
        return None
    action = subs[0]
    name = action.metavar or action.dest
    choices = list(action.choices)
    what = "command" if parser.prog == "rmtui" else f"`{parser.prog}` subcommand"
    helper = f"`{parser.prog} --help` says what each does"
    wrong = re.match(rf"argument {re.escape(str(name))}: invalid choice: '(.*)' \(choose from", message)
    if wrong:
        close = difflib.get_close_matches(wrong.group(1), choices, n=1, cutoff=0.6)
        listed = "`rmtui --help` lists them" if parser.prog == "rmtui" else f"one of {', '.join(choices)}"
        hint = f"did you mean {close[0]!r}?" if close else listed
        return f"unknown {what} {wrong.group(1)!r}; {hint}"
    missing = re.match(r"the following arguments are required: (.*)", message)
    if missing and str(name) in [m.strip() for m in missing.group(1).split(",")]:
        return f"`{parser.prog}` needs a subcommand: {', '.join(choices)} ({helper})"
    return None


def _common_parser() -> argparse.ArgumentParser:
    import argparse

    common = _parser_class()(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable JSON on stdout")
    common.add_argument("--root", default=argparse.SUPPRESS, help="memory root path")
    common.add_argument("--profile", default=argparse.SUPPRESS, help="profile name from profiles.toml")
    return common


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given ``argv`` naming a known command, only that command's module is
    registered (help, an unknown command or no argv: every one)."""
    from rmtui import __version__

    common = _common_parser()
    parser = _parser_class()(
        prog="rmtui",
        description="Terminal workbench and headless engine for long-term memory of coding agents.",
    )
    parser.add_argument("--version", action="version", version=f"rmtui {__version__}")
    parser.add_argument("--headless", action="store_true", help="run an engine command without the TUI")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    parser.add_argument("--root", help="memory root path")
    parser.add_argument("--profile", help="profile name from profiles.toml")
    import importlib

    from rmtui.commands import COMMAND_MODULES, COMMAND_OWNERS

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    command = command_of(argv) if argv is not None else None
    for name in COMMAND_OWNERS.get(command or "", COMMAND_MODULES):
        importlib.import_module(name).register(sub, common)
    return parser


def _emit(data, text: str | None, as_json: bool) -> None:
    # The boundary: stored text (evidence, memory) may hold terminal controls; show them escaped.
    from rmtui.engine.display import json_line, text_block

    sys.stdout.write(json_line(data) if as_json else text_block(text))
    sys.stdout.flush()


def _fail(message: str, code: int, as_json: bool, payload: dict | None = None) -> int:
    from rmtui.engine.display import json_line, printable

    if as_json:
        sys.stdout.write(json_line(payload or {"error": "failed", "message": message}))
        sys.stdout.flush()
    sys.stderr.write(f"rmtui: {printable(message)}\n")
    return code


#: Arguments that name files or folders: on POSIX a path may hold any bytes (Python hands
#: them over surrogate-escaped), so only these may carry what is not UTF-8.
_PATH_ARGS = frozenset({"root", "path", "file", "target", "model", "model_path", "reranker_path", "state_dir"})
_POSITIONAL = frozenset({"need", "name", "uid", "uids", "key", "value", "id", "batch"})


def _undecodable_argument(args: argparse.Namespace) -> str | None:
    """The first text argument that is not valid UTF-8 (invalid bytes in argv), as its option."""
    for dest, value in vars(args).items():
        if dest in _PATH_ARGS or callable(value):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return ("--" + dest.replace("_", "-")) if dest not in _POSITIONAL else dest
    return None


def _engine_error_in(exc: BaseException) -> EngineError | None:
    """The engine's own refusal behind a failure during cleanup (``During handling…``)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, EngineError):
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


def _disk_failure(exc: BaseException, args: argparse.Namespace):
    """The full or failing disk behind ``exc`` (one the store did not already name), as a
    :class:`~rmtui.engine.errors.storage.StorageError` about the root's filesystem."""
    from rmtui.engine.errors.storage import storage_error

    try:
        from rmtui.engine.memory.roots import resolve_root_path

        where: str | None = str(resolve_root_path(getattr(args, "root", None), getattr(args, "profile", None))[0])
    except Exception:  # noqa: BLE001 - only a hint of where: the error's own file name wins anyway
        where = None
    return storage_error(exc, where)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "retrieve" in argv:  # a warm retrieve: answered without the parser or the config loader
        from rmtui.thin_client import thin_retrieve

        try:
            thin = thin_retrieve(argv)
        except KeyboardInterrupt:
            sys.stderr.write("rmtui: interrupted\n")
            return 130
        if thin is not None:
            sys.stdout.write(thin)
            sys.stdout.flush()
            return 0
    if command_of(argv) == "mcp":  # a child of the warm fork server serves it, if one runs
        from rmtui.mcp_forkserver import run_forked

        forked = run_forked(argv)
        if forked is not None:
            return forked
    import shlex

    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    tui_only = getattr(args, "tui_only", False)
    if handler is None or tui_only:
        if args.headless and tui_only:
            again = shlex.join(["rmtui", *(a for a in argv if a != "--headless")])
            sys.stderr.write(f"rmtui: `{args.command}` opens the workbench: run `{again}`\n")
            return 2
        if args.headless:
            parser.error("--headless needs a command")
        return _run_tui(args)
    if getattr(args, "needs_headless", True) and not args.headless and not getattr(args, "front_ok", False):
        # one line with the command to run instead (the whole usage would bury it)
        again = shlex.join(["rmtui", "--headless", *argv])
        sys.stderr.write(f"rmtui: `{args.command}` is a headless command: run `{again}`\n")
        return 2
    # A headless call does a few small vector operations: starting OpenBLAS's thread pool
    # would cost more (~70 ms on import) than it could ever save. The user's setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    bad = _undecodable_argument(args)
    if bad is not None:  # refused before any operation starts
        msg = f"{bad} is not valid UTF-8 text; pass it UTF-8 encoded"
        return _fail(msg, 2, args.json, {"error": "bad_input", "message": msg})
    try:
        result = handler(args)
    except EngineError as exc:
        return _fail(exc.message, exc.exit_code, args.json, exc.to_json())
    except KeyboardInterrupt:
        sys.stderr.write("rmtui: interrupted\n")
        return 130
    except OSError as exc:  # a path the user gave cannot be used: say which, no traceback
        disk = _disk_failure(exc, args)
        if disk is not None:  # a full or failing disk is not the path's fault
            return _fail(disk.message, disk.exit_code, args.json, disk.to_json())
        where = f": {exc.filename}" if exc.filename else ""
        msg = f"{exc.strerror or exc}{where}"
        return _fail(msg, 2, args.json, {"error": "bad_input", "message": msg})
    except Exception as exc:  # one line, never a traceback (RMTUI_DEBUG=1 shows it)
        if os.environ.get("RMTUI_DEBUG"):
            raise
        disk = _disk_failure(exc, args)
        if disk is not None:
            return _fail(disk.message, disk.exit_code, args.json, disk.to_json())
        cause = _engine_error_in(exc)
        failure = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        if cause is not None:  # the refusal is what the user must read; the cleanup failure follows it
            msg = f"{cause.message} (cleaning up afterwards failed: {failure[:300]})"
            return _fail(msg, cause.exit_code, args.json, {**cause.to_json(), "message": msg})
        msg = f"internal error: {failure[:500]} (set RMTUI_DEBUG=1 for the traceback)"
        return _fail(msg, 1, args.json, {"error": "failed", "message": msg})
    _emit(result.data, result.text, args.json)
    return result.exit_code


def _run_tui(args: argparse.Namespace) -> int:
    from rmtui.engine.display import printable
    from rmtui.engine.memory.roots import resolve_root

    try:
        if getattr(args, "tui_entry", None) is not None:
            return args.tui_entry(args)
        root = resolve_root(args.root, args.profile)
    except EngineError as exc:
        sys.stderr.write(f"rmtui: {printable(exc.message)}\n")
        return exc.exit_code
    import shlex

    from rmtui.tui.terminal import say_not_a_terminal, stdout_is_terminal

    if not stdout_is_terminal():  # piped or redirected: the status text, not a screen drawn over the terminal
        status = ["--headless", "--root", str(root.path), "status"]
        say_not_a_terminal(f"this is `{shlex.join(['rmtui', *status])}`")
        return main(status)
    from rmtui.tui.app import run_app

    return run_app(root)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
