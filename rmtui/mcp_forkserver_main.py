"""The MCP fork server's process: ``python -m rmtui.mcp_forkserver_main DIRECTORY [IDLE]``.

The fork server (:mod:`rmtui.mcp_forkserver`) is handed the entry its children run, the CLI's
``main``, here: the CLI offers ``mcp`` commands to the fork server's client, so the fork
server importing the CLI back would make the two one knot. This module imports both.
Serving from an imported ``rmtui.mcp_forkserver`` (not ``__main__``) matters: the children's
``cli.main`` reads ``IN_CHILD`` there.
"""

from __future__ import annotations

import sys

from rmtui import mcp_forkserver
from rmtui.cli import main

if __name__ == "__main__":
    idle = float(sys.argv[2]) if len(sys.argv) > 2 else mcp_forkserver.IDLE_SECONDS
    raise SystemExit(mcp_forkserver.serve(sys.argv[1], main, idle))
