"""Benchmarks (and the tests' many new processes) run rmtui as a user does: with its bytecode cached.

A shell with ``PYTHONDONTWRITEBYTECODE=1`` (common in containers and CI images) makes every
new CLI process compile each module edited since its ``.pyc`` was written, which a user's
installed copy never does: each bench drops the variable for itself and the processes it
starts, and compiles the package once before it measures anything.
"""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "rmtui"


def as_users_run() -> None:
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    compileall.compile_dir(str(PACKAGE), quiet=1)
