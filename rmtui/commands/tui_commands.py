"""Commands that open the workbench (TUI-only): ``rmtui demo [--path P]``.

Registered like every headless module, but nothing Textual is imported until the command
runs, so building the parser (and every headless command) stays free of the TUI.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def register(sub, common) -> None:
    p = sub.add_parser("demo", parents=[common],
                       help="create a small demo root and open the workbench on it")
    p.add_argument("--path", help="where to create the demo root (default: a new temporary folder); "
                                  "an existing memory root there is opened as it is; "
                                  "any other folder must be new or empty")
    p.set_defaults(tui_only=True, tui_entry=run_demo)


def demo_root(path: str | None):
    """Create the demo root (or reuse one already at ``path``)."""
    from rmtui.engine.host.demo import create_demo_root
    from rmtui.engine.memory.roots import open_root

    target = Path(path).expanduser() if path else Path(tempfile.mkdtemp(prefix="rmtui-demo-")) / "root"
    if (target / ".git").exists() and (target / "MEMORY.md").exists():
        return open_root(target)
    if target.is_dir() and any(target.iterdir()):  # the demo never writes its memory into someone's folder
        from rmtui.engine.errors import UsageError

        raise UsageError(f"{target} is not empty and not a memory root: give --path a new or empty folder "
                         "(or leave --path out for a temporary one)")
    return create_demo_root(target)


def run_demo(args: argparse.Namespace) -> int:
    import shlex

    from rmtui.tui.terminal import say_not_a_terminal, stdout_is_terminal

    root = demo_root(args.path)
    where = shlex.quote(str(root.path))
    if not stdout_is_terminal():  # piped or redirected: where the root is, not a screen over the terminal
        say_not_a_terminal("this is where the demo root is")
        sys.stdout.write(f"demo root: {root.path}\n"
                         f"headless commands on it: rmtui --headless --root {where} status\n"
                         f"the workbench on it, in a terminal: rmtui --root {where}\n")
        return 0
    # said before the workbench takes the screen, so it is there again when it quits
    sys.stderr.write(f"rmtui: the demo root is {root.path}\n"
                     f"rmtui: headless commands on it: `rmtui --headless --root {where} status` "
                     f"(or run them inside that folder)\n")
    sys.stderr.flush()
    from rmtui.tui.app import run_app

    code = run_app(root)
    sys.stderr.write(f"rmtui: the demo root is kept at {root.path}\n")
    return code
