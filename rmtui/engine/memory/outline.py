"""The graph outline a role reads before it edits (docs/architecture.md, "Roles").

One text for two askers: the ``outline`` role tool and ``rmtui --headless outline --path
<worktree>``, which a host's child runs in place of that tool. Each heading and node is one
line, indented by depth, with its anchor, edges and ``file:line``; items in files the role
may not read are left out, and parse problems follow at the end.
"""

from __future__ import annotations

from pathlib import Path

from rmtui.engine.memory import role_table as roles
from rmtui.engine.memory.graph import load_graph


def outline_text(folder: Path | str, role: str | None = None) -> str:
    """The outline of the graph in ``folder`` as ``role`` may read it (every graph file when None)."""
    if role is not None:
        roles.role_spec(role)  # an unknown role is bad input, never an empty outline
    graph = load_graph(Path(folder))
    lines = []
    for item in graph.ordered:
        if role is not None and not roles.may_read(role, item.file):
            continue
        depth = len(item.ancestors())
        edges = ", ".join(f"{e.type}:{e.target}" for e in item.edges)
        if item.kind == "heading":
            # {F#id}: no space after the kind
            anchor = f" {{{item.heading_kind or '#'}{item.id}}}" if item.id else ""
            label = f"{'#' * item.level} {item.title}{anchor}"
        else:
            label = f"- `{item.id}` {item.title}"
        lines.append(f"{'  ' * depth}{label}{' → [' + edges + ']' if edges else ''}  ({item.file}:{item.line})")
    problems = [str(i) for i in graph.issues]
    if problems:
        lines.append("\nproblems:\n" + "\n".join(problems[:50]))
    return "\n".join(lines) or "the graph is empty"
