"""The MCP front (stdio, official ``mcp`` SDK): the original RightMemory tool names plus a
read-only status tool. A thin front: every tool calls the engine; the server process keeps
the retrieval backend warm between calls.
"""

from __future__ import annotations

import json
import sys
import threading

from rmtui.engine.errors import EngineError
from rmtui.engine.roots import MemoryRoot

SERVER_NAME = "rmtui"
INSTRUCTIONS = (
    "Long-term memory for coding work. Call rightmemory_retrieve when stored context could change "
    "the work; submit consequential evidence with rightmemory_submit_update (queued, not yet memory); "
    "capture guidance for future agents with rightmemory_capture_guidance."
)


def build_server(root: MemoryRoot):
    """Build the MCP server for one root (also used in-process by tests of the tool logic)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    warm: dict = {}

    def _retrieve(session_id: str, need: str) -> str:
        from rmtui.engine.embeddings import InProcessBackend
        from rmtui.engine.retrieve import retrieve

        cfg = root.config()
        if cfg.get("embedding.service_url"):
            return retrieve(root, session_id, need).text  # a configured service stays the model host
        if "backend" not in warm:  # the model stays loaded in this long-lived process
            warm["backend"] = InProcessBackend.from_config(cfg)
            # embed what the vector cache lacks in the background, with the same warm model,
            # so later calls only embed the need
            threading.Thread(target=_index_quietly, args=(root, warm["backend"]), daemon=True).start()
        return retrieve(root, session_id, need, backend=warm["backend"]).text

    @server.tool(name="rightmemory_retrieve", description="Retrieve the memory that matters for a need, as exact source text.")
    def rightmemory_retrieve(session_id: str, need: str) -> str:
        return _call(lambda: _retrieve(session_id, need))

    @server.tool(name="rightmemory_submit_update",
                 description="Submit evidence of what was learned; it is queued for the Update process, not yet memory.")
    def rightmemory_submit_update(session_id: str, evidence: str) -> str:
        from rmtui.engine.queue import EvidenceQueue

        def run() -> str:
            q = EvidenceQueue(root)
            try:
                return json.dumps(q.submit(session_id, evidence.encode("utf-8")))
            finally:
                q.close()

        return _call(run)

    @server.tool(name="rightmemory_capture_guidance",
                 description="Capture guidance for future agents into the pending guidance inbox (its own commit).")
    def rightmemory_capture_guidance(session_id: str, evidence: str) -> str:
        from rmtui.engine.guidance import capture

        return _call(lambda: json.dumps(capture(root, session_id, evidence.encode("utf-8"))))

    @server.tool(name="rmtui_status", description="Read-only status: root, head commit, item counts, evidence by state.")
    def rmtui_status() -> str:
        from rmtui.engine.status import root_status

        return _call(lambda: json.dumps(root_status(root)))

    return server


def _index_quietly(root: MemoryRoot, backend) -> None:
    from rmtui.engine.retrieve import index_root

    try:
        index_root(root, backend)
    except Exception as exc:  # indexing is an optimisation; retrieval works (lexically) without it
        sys.stderr.write(f"rmtui mcp: background indexing stopped: {exc}\n")


def _call(fn) -> str:
    """Engine errors become a tool error the client sees, with the engine's message."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return fn()
    except EngineError as exc:
        raise ToolError(f"{exc.kind}: {exc.message}") from None


def serve(root: MemoryRoot) -> None:
    from rmtui.engine.supervisor import Supervisor

    with Supervisor(root) as sup:
        sup.recover()  # engine start: settle unfinished operations first
    build_server(root).run("stdio")
