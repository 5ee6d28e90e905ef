"""``shared-view``'s argparse tree is a table (rmtui/commands/views.py, ``SUBCOMMANDS``): every
subcommand keeps the arguments, defaults and help it had when it was one long function."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmtui.cli import build_parser

SNAPSHOT = Path(__file__).parent / "__snapshots__" / "test_views_cli" / "shared_view_args.json"
SUBCOMMANDS = ("create", "build", "publish", "invite", "inbox", "hub-token", "token", "serve", "connect", "accept",
               "note", "pull", "list", "ask")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def shared_view_tree() -> dict:
    """Each subcommand of ``shared-view``: its help line, handler and every argument as argparse holds it."""
    group = _subparsers(build_parser(["shared-view"]))["shared-view"]
    helps = {a.dest: a.help for a in next(a for a in group._actions
                                          if isinstance(a, argparse._SubParsersAction))._choices_actions}
    tree: dict = {}
    for name, parser in _subparsers(group).items():
        args = []
        for a in parser._actions:
            args.append({"kind": type(a).__name__, "names": a.option_strings, "dest": a.dest, "nargs": a.nargs,
                         "default": a.default, "type": getattr(a.type, "__name__", None), "choices": a.choices,
                         "required": a.required, "metavar": a.metavar, "help": a.help})
        tree[name] = {"help": helps[name], "handler": parser.get_default("handler").__name__, "args": args}
    return tree


def test_every_subcommand_keeps_its_arguments_defaults_and_help():
    # the snapshot was taken from the parser as the long register() built it
    want = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    got = json.loads(json.dumps(shared_view_tree()))
    assert list(got) == list(want) == list(SUBCOMMANDS)  # the subcommands, in their order
    for name in want:
        assert got[name] == want[name], name


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_of_each_subcommand_lists_its_options(sub, tmp_path):
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "shared-view", sub, "--help"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: rmtui shared-view {sub} ")
    spec = json.loads(SNAPSHOT.read_text(encoding="utf-8"))[sub]
    for a in spec["args"]:
        for name in a["names"]:
            assert name in proc.stdout, (sub, name)
        if a["help"] and a["help"] != "==SUPPRESS==":
            assert " ".join(a["help"].split()) in " ".join(proc.stdout.split()), (sub, a["help"])


def test_a_missing_required_option_is_refused_as_before(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "shared-view", "inbox", "--hub", "http://x"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "--provider" in proc.stderr and "--token-env" in proc.stderr
