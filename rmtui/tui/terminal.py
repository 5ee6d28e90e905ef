"""Whether the workbench can open: it needs stdout to be a terminal.

Textual draws through the terminal whatever stdout is, so `rmtui | cat` or `install.sh | tee log`
would draw the workbench over the real terminal and leave the pipe with nothing useful. With
stdout piped or redirected, the fronts print what the headless command would instead. Nothing
here imports Textual: the check runs before the workbench's imports.
"""

from __future__ import annotations

import sys


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # no stdout, or a closed one
        return False


def say_not_a_terminal(instead: str) -> None:
    """The one line on stderr saying why the workbench does not open and what stdout gets."""
    sys.stderr.write(f"rmtui: stdout is not a terminal, so the workbench does not open; {instead}\n")
    sys.stderr.flush()
