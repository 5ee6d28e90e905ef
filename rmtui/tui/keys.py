"""The keys of a screen as a person reads them: what the help screen and the palette list.

Every rmtui binding has an id (``evidence.approve``), which is what the user's config remaps
(``[keys]`` in ``~/.config/rmtui/config.toml``); the key shown is the remapped one.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

#: section names of widgets that carry their own keys
OWNER_NAMES = {"EvidenceTable": "Evidence", "OperationsTable": "Operations", "ReceiptsTable": "Receipts",
               "EdgeList": "Edges", "MemoryTree": "Memory graph", "SharedViewsTable": "Shared views"}

#: Textual's own keys that are worth knowing, listed without an id (they are not remappable here)
TEXTUAL_KEYS = (("tab / shift+tab", "Move between panes"), ("ctrl+p", "Command palette: every action by name"),
                ("space", "Open or close a tree node"))


@dataclass
class KeyRow:
    section: str  # where the key works: the screen's name, a pane's, or "Everywhere"
    keys: str  # as displayed, after remaps ("[ / backspace")
    description: str
    binding_id: str
    action: str
    node: DOMNode
    applies: bool  # usable right now (with the cursor and focus where they are)


def is_ours(cls: type) -> bool:
    return any(c.__module__.startswith("rmtui.") for c in cls.__mro__)


def key_rows(app, screen: Screen, screen_name: str = "") -> list[KeyRow]:
    """The screen's keys, then each pane's, then the global ones; each binding id once."""
    overrides: dict[str, str] = getattr(app, "keymap_overrides", {})
    rows: list[KeyRow] = []
    seen: set[str] = set()
    for node in [screen, *screen.query("*"), app]:
        cls = type(node)
        if not is_ours(cls):
            continue
        for binding in cls.__dict__.get("BINDINGS", []):
            if not isinstance(binding, Binding) or not binding.id or binding.id in seen:
                continue
            seen.add(binding.id)
            keys = overrides.get(binding.id, binding.key)
            shown = " / ".join(app.get_key_display(Binding(k.strip(), binding.action)) for k in keys.split(","))
            if node is app:
                section = "Everywhere"
            elif node is screen:
                section = screen_name or getattr(screen, "sub_title", "") or "This screen"
            else:
                section = OWNER_NAMES.get(cls.__name__, cls.__name__)
            name = binding.action.split("(", 1)[0]
            try:
                applies = bool(node.check_action(name, ()))
            except Exception:  # noqa: BLE001 - a pane's check that needs state it has not loaded yet
                applies = False
            rows.append(KeyRow(section, shown, binding.description or name, binding.id, binding.action, node,
                               applies))
    return rows


def key_of(app, binding_id: str, default: str) -> str:
    """The key a binding has now (after the user's remaps), as the footer shows it."""
    key = getattr(app, "keymap_overrides", {}).get(binding_id, default).split(",")[0]
    return app.get_key_display(Binding(key, ""))


def pane_order(screen: Screen) -> list[str]:
    """The panes ``tab`` visits on ``screen``, in order, by the names their borders show
    (a pane's counts after `` · `` left out); widgets outside a titled pane by their id."""
    names: list[str] = []
    for widget in screen.focus_chain:
        node: DOMNode | None = widget
        name = ""
        while node is not None and node is not screen:
            title = getattr(node, "border_title", None)
            if title:
                name = str(title).split(" · ")[0]
                break
            node = node.parent
        name = name or (widget.id or type(widget).__name__).replace("-", " ")
        if not names or names[-1] != name:
            names.append(name)
    return names
