"""One argument parser for both fronts (DESIGN.md section 1).

``rmtui`` opens the workbench; ``rmtui --headless <command>`` runs an engine command and
prints its result (text, or JSON with ``--json``) on stdout, diagnostics on stderr.
Exit codes: 0 ok, 1 operation failed, 2 bad input/usage, 3 conflict/stale, 4 unavailable.
The headless path never imports Textual.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Sequence

from rmtui.engine.errors import EngineError
from rmtui.headless import COMMAND_MODULES, Result


def _common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable JSON on stdout")
    common.add_argument("--root", default=argparse.SUPPRESS, help="memory root path")
    common.add_argument("--profile", default=argparse.SUPPRESS, help="profile name from profiles.toml")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_parser()
    parser = argparse.ArgumentParser(
        prog="rmtui",
        description="Terminal workbench and headless engine for long-term memory of coding agents.",
    )
    parser.add_argument("--headless", action="store_true", help="run an engine command without the TUI")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    parser.add_argument("--root", help="memory root path")
    parser.add_argument("--profile", help="profile name from profiles.toml")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def _emit(result: Result, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result.data, indent=None, ensure_ascii=False, default=str) + "\n")
    elif result.text:
        sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    tui_only = getattr(args, "tui_only", False)
    if handler is None or tui_only:
        if args.headless:
            parser.error("--headless needs a command")
        return _run_tui(args)
    if getattr(args, "needs_headless", True) and not args.headless and not getattr(args, "front_ok", False):
        parser.error(f"`{args.command}` is a headless command: run `rmtui --headless {args.command} ...`")
    # A headless call does a few small vector operations: starting OpenBLAS's thread pool
    # would cost more (~70 ms on import) than it could ever save. The user's setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        result = handler(args)
    except EngineError as exc:
        if args.json:
            sys.stdout.write(json.dumps(exc.to_json(), ensure_ascii=False) + "\n")
        sys.stderr.write(f"rmtui: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("rmtui: interrupted\n")
        return 130
    except OSError as exc:  # a path the user gave cannot be used: say which, no traceback
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"rmtui: {exc.strerror or exc}{where}\n")
        if args.json:
            sys.stdout.write(json.dumps({"error": "bad_input", "message": f"{exc.strerror or exc}{where}"}) + "\n")
        return 2
    _emit(result, args.json)
    return result.exit_code


def _run_tui(args: argparse.Namespace) -> int:
    from rmtui.engine.roots import resolve_root

    try:
        if getattr(args, "tui_entry", None) is not None:
            return args.tui_entry(args)
        root = resolve_root(args.root, args.profile)
    except EngineError as exc:
        sys.stderr.write(f"rmtui: {exc.message}\n")
        return exc.exit_code
    from rmtui.tui.app import run_app

    return run_app(root)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
