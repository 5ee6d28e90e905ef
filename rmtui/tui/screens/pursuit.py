"""The Pursuit editor (screen 5): the Pursuit map with its Focus order, the selected Pursuit's
body, and one key per editor operation.

Every edit goes through :mod:`rmtui.engine.pursuit` against the revision this screen
last showed, so an edit made behind its back (the CLI, another workbench, a landed commit) is
refused as stale: the screen says so, reloads, and nothing is lost. Edits stay pending in the
engine's journal (undo and redo survive a restart) until ``c`` lands them as one commit
through the supervisor. The screen reloads on changes to the graph files, the head and the
journal (``watch.EDITOR``). Pending edits of another session (an agent through the CLI) are
shown as that session's, by the name it typed, and ``x`` offers to discard them; until then
only ``x`` applies. Each answer of a dialog is checked as it is given (a parent that does not
exist is refused before the next question).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Header, Markdown, Static, Tree
from textual.worker import Worker, get_current_worker

from rmtui.engine.display import printable
from rmtui.engine.errors import EngineError
from rmtui.engine.host import watch
from rmtui.engine.pursuit.journal import session_hash
from rmtui.tui.context import workbench
from rmtui.tui.screens.base import LiveScreen, error_text
from rmtui.tui.screens.dialogs import ConfirmScreen, PromptScreen, TextScreen
from rmtui.tui.widgets.footer import KeysFooter
from rmtui.tui.widgets.pursuit_tree import PursuitTree
from rmtui.tui.wording import count

if TYPE_CHECKING:
    from rmtui.engine.pursuit import PursuitState

#: who edits: the local person, as the headless CLI without ``--session`` (pending edits of
#: another session are refused until it checkpoints or discards them)
SESSION = "rmtui"


def foreign_owner(state: PursuitState) -> str | None:
    """Whose pending edits the journal holds when they are not this workbench's: the session as
    it was typed (or its hash, for a session rmtui never saw); None when they are ours."""
    owner = state.owner
    if not state.cursor or not owner or owner == session_hash(SESSION):
        return None
    name = state.owner_session
    return repr(printable(name)) if name else f"with sha256 {owner[:12]} (not one rmtui has seen)"


@dataclass
class PursuitLoaded(Message, bubble=False):
    """The editor's state (``pursuit.show`` or the answer to a write); ``seq`` orders answers,
    so a read that started before a write never paints over the write's result."""

    seq: int
    state: PursuitState
    select: str | None = None
    text: str = field(default="", kw_only=True)  # what a write did, to tell the person
    write: bool = field(default=False, kw_only=True)


@dataclass
class PursuitFailed(Message, bubble=False):
    """The engine refused or failed; ``stale``: the map changed behind this screen."""

    seq: int
    action: str  # load, or what the person asked for (create, undo, checkpoint, ...)
    text: str
    stale: bool = field(default=False, kw_only=True)
    write: bool = field(default=False, kw_only=True)


def descendants(by_id: dict[str, dict], pid: str) -> list[str]:
    out: list[str] = []
    for child in by_id[pid]["children"] if pid in by_id else []:
        out += [child, *descendants(by_id, child)]
    return out


def status_text(state: PursuitState) -> Text:
    """``revision 322f71f310e1 · 2 pending edits (PURSUITS.md) · …`` and any conflict."""
    text = Text()
    text.append("revision ", style="bold")
    text.append(state.revision[:12])
    pending = state.pending_edits
    text.append(" · ")
    other = foreign_owner(state)
    if other is not None:
        text.append(f"{count(pending, 'pending edit')} by session {other}", style="bold")
        name = state.owner_session
        cli = f"rmtui --headless pursuit discard --session {name}" if name else "rmtui --headless pursuit discard"
        text.append(f", not this workbench's: x discards them (or `{printable(cli)}`); new edits, undo and "
                    "checkpoint wait until that session checkpoints or they are discarded")
        return text
    if pending:
        text.append(f"{count(pending, 'pending edit')}", style="bold")
        if state.changed_files:
            text.append(f" ({', '.join(state.changed_files)})")
        text.append(f" not committed yet: c lands {'it' if pending == 1 else 'them as one commit'}")
    else:
        text.append("no pending edits: the map is as committed")
    undo = "undo" if state.can_undo else ""
    redo = "redo" if state.can_redo else ""
    if undo or redo:
        text.append(" · can " + " and ".join(x for x in (undo, redo) if x))
    if state.conflicts:
        text.append(f"\nmemory changed under the pending edits ({', '.join(state.conflicts)}): checkpoint is "
                    "impossible; x discards the pending edits", style="bold")
    return text


def meta_text(p: dict, focus: list[str]) -> Text:
    """The selected Pursuit's facts above its body: id, place, Focus, edges, Memory references."""
    text = Text()
    text.append(p["title"], style="bold")
    text.append(f"  {p['id']}\n")
    where = f"{p['kind']} heading, level {p['level']}, {p['file']}:{p['line']}"
    if p["backing_file"]:
        where += f", body in {p['backing_file']}"
    text.append(where + "\n")
    text.append("Focus: ", style="bold")
    text.append(f"{focus.index(p['id']) + 1} of {len(focus)}\n" if p["id"] in focus else "not in Focus\n")
    text.append("Parent: ", style="bold")
    text.append((p["parent_id"] or "top level") + "\n")
    for label, values in (("Sub-Pursuits", p["children"]), ("Nodes", p["nodes"]), ("Edges", p["edges"]),
                          ("From Memory", p.get("memory_refs", []))):
        if values:
            text.append(f"{label}: ", style="bold")
            text.append(", ".join(values) + "\n")
    return text


class PursuitScreen(LiveScreen):
    CSS_PATH = Path(__file__).parent / "pursuit.tcss"
    WATCH_KINDS = frozenset({watch.GRAPH, watch.HEAD, watch.EDITOR})
    BINDINGS: ClassVar = [
        Binding("n", "create", "New", id="pursuit.create"),
        Binding("r", "rename", "Rename", id="pursuit.rename"),
        Binding("m", "move", "Move", id="pursuit.move"),
        Binding("d", "delete", "Delete", id="pursuit.delete"),
        Binding("e", "edit_body", "Edit body", id="pursuit.edit_body"),
        Binding("f", "toggle_focus", "Focus", id="pursuit.focus"),
        Binding("u", "undo", "Undo", id="pursuit.undo"),
        Binding("ctrl+r", "redo", "Redo", id="pursuit.redo"),
        Binding("c", "checkpoint", "Checkpoint", id="pursuit.checkpoint"),
        Binding("x", "discard", "Discard", id="pursuit.discard"),
    ]

    def __init__(self) -> None:
        super().__init__(id="pursuit")
        self.state: PursuitState | None = None
        self.revision: str | None = None
        self.loaded = False
        self.busy = False
        self.load_error: str | None = None
        self.shown: str | None = None  # the Pursuit in the preview
        self._seq = itertools.count(1)
        self._painted = 0  # the newest answer shown
        self._reload_after = False  # a change arrived while a write was running
        self.sub_title = "Pursuit editor"

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("loading…", id="pursuit-status")
        with Horizontal(id="pursuit-body"):
            yield PursuitTree(id="pursuit-tree")
            with VerticalScroll(id="pursuit-preview"):
                yield Static("", id="pursuit-meta")
                yield Markdown("", id="pursuit-markdown")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#pursuit-tree").border_title = "Pursuit map"
        self.query_one("#pursuit-preview").border_title = "Pursuit"

    # -- reading ---------------------------------------------------------------
    def reload(self, kinds: set[str]) -> None:
        self.load()

    def load(self) -> None:
        if self.busy:  # the write's answer is newer than anything a read now could see
            self._reload_after = True
            return
        self._load(next(self._seq))

    def _write_answered(self) -> None:
        self.busy = False
        if self._reload_after:
            self._reload_after = False
            self.load()

    @work(thread=True, exclusive=True, group="pursuit-load", exit_on_error=False)
    def _load(self, seq: int) -> None:
        from rmtui.engine import pursuit

        try:
            state = pursuit.show(workbench(self).root)
        except EngineError as exc:
            self.post_message(PursuitFailed(seq, "load", error_text(exc)[0]))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(PursuitLoaded(seq, state))

    async def on_pursuit_loaded(self, message: PursuitLoaded) -> None:
        if message.write:
            self.notify(message.text)
        if message.seq < self._painted:  # a read that started before a newer answer
            if message.write:
                self._write_answered()
            return
        self._painted = message.seq
        self.state = message.state
        self.revision = message.state.revision
        self.load_error = None
        self.loaded = True
        self.query_one("#pursuit-status", Static).update(status_text(message.state))
        self.query_one("#pursuit-status").set_class(bool(message.state.conflicts), "-conflict")
        tree = self.query_one(PursuitTree)
        tree.set_state(message.state, select=message.select)
        await self._preview(tree.highlighted_id, force=True)
        if message.write:
            self._write_answered()
        self.refresh_bindings()

    def on_pursuit_failed(self, message: PursuitFailed) -> None:
        if not message.write:
            if message.seq >= self._painted:  # the map cannot be read (a damaged journal: x discards it)
                self.load_error = message.text
                self.query_one("#pursuit-status", Static).update(
                    Text(f"cannot read the Pursuit map: {message.text}", style="bold"))
                self.query_one("#pursuit-status").set_class(True, "-conflict")
                self.notify(message.text, title="Pursuit map", severity="error", timeout=8)
                self.refresh_bindings()
            return
        self._write_answered()
        if message.stale:
            self.notify("The Pursuit map changed behind this screen (the CLI, another editor or a commit). Nothing "
                        "was changed; the screen shows the current map now: check it and press the key again.",
                        title="Stale revision", severity="warning", timeout=10)
        else:
            self.notify(message.text, title=f"{message.action} refused", severity="error", timeout=8)
        self.refresh_bindings()
        self.load()

    @on(Tree.NodeHighlighted, "#pursuit-tree")
    async def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        await self._preview(self.query_one(PursuitTree).highlighted_id)
        self.refresh_bindings()

    async def _preview(self, pid: str | None, *, force: bool = False) -> None:
        if pid == self.shown and not force:
            return
        self.shown = pid
        p = self._pursuit(pid)
        meta = self.query_one("#pursuit-meta", Static)
        body = self.query_one("#pursuit-markdown", Markdown)
        box = self.query_one("#pursuit-preview")
        if p is None or self.state is None:
            meta.update(Text("Select a Pursuit to see its body." if self.state and self.state.pursuits
                             else "No Pursuits yet. n creates one."))
            await body.update("")
            box.border_title = "Pursuit"
            return
        meta.update(meta_text(p, self.state.focus))
        await body.update(p.get("body") or "*No body yet. e writes one.*")
        box.border_title = f"{p['title']} · {p['id']}"

    def _pursuits(self) -> list[dict]:
        return self.state.pursuits if self.state is not None else []

    def _pursuit(self, pid: str | None) -> dict | None:
        if pid is None or self.state is None:
            return None
        return next((p for p in self.state.pursuits if p["id"] == pid), None)

    @property
    def current(self) -> dict | None:
        """The Pursuit under the tree's cursor."""
        return self._pursuit(self.query_one(PursuitTree).highlighted_id)

    # -- writing ---------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        st = self.state
        if action == "discard":
            return True if not self.busy and (self.load_error or (st and (st.cursor or st.conflicts))) else None
        if action not in ("create", "rename", "move", "delete", "edit_body", "toggle_focus", "undo", "redo",
                          "checkpoint"):
            return True
        if self.busy or st is None or foreign_owner(st) is not None:
            return None  # another session's pending edits: only x (discard) applies
        if action == "create":
            return True
        if action == "undo":
            return True if st.can_undo else None
        if action == "redo":
            return True if st.can_redo else None
        if action == "checkpoint":
            return True if st.changed_files or st.cursor else None
        return True if self.current is not None else None

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "pursuit-write":
            self._write_answered()
            self.refresh_bindings()

    def write(self, action: str, op: dict | None = None) -> None:
        """Start one engine write against the revision on screen; keys wait until it answers."""
        self.busy = True
        self.refresh_bindings()
        self._write(next(self._seq), action, op, self.revision)

    @work(thread=True, exclusive=True, group="pursuit-write", exit_on_error=False)
    def _write(self, seq: int, action: str, op: dict | None, revision: str | None) -> None:
        from rmtui.engine import pursuit

        root = workbench(self).root
        st: PursuitState
        select: str | None = None
        try:
            if action == "apply":
                assert op is not None
                edit = pursuit.apply(root, op, expected_revision=revision, session=SESSION)
                st, select, text = edit, edit.selected_id, (edit.description or "") if edit.changed else "no change"
            elif action in ("undo", "redo"):
                step = pursuit.undo if action == "undo" else pursuit.redo
                edit = step(root, expected_revision=revision, session=SESSION)
                st, select, text = edit, edit.selected_id, edit.description or ""
            elif action == "checkpoint":
                done = pursuit.checkpoint(root, expected_revision=revision, session=SESSION)
                st = done
                if done.landed_commit:
                    text = (f"landed {done.landed_commit[:10]}: {done.message} "
                            f"({', '.join(done.changed_paths or [])})")
                else:
                    text = "nothing to checkpoint: the pending edits cancel out"
            else:
                st = pursuit.discard(root)
                text = "pending edits discarded"
        except EngineError as exc:
            stale = exc.kind == "conflict" and "expected" in exc.details
            asked = (op or {}).get("type", action) if action == "apply" else action
            self.post_message(PursuitFailed(seq, asked, error_text(exc)[0], stale=stale, write=True))
            return
        self.post_message(PursuitLoaded(seq, st, select, text=text, write=True))

    def apply(self, op: dict) -> None:
        self.write("apply", op)

    def action_create(self) -> None:
        here = self.current
        suggestions = [p["id"] for p in self._pursuits()]
        default_parent = (here or {}).get("parent_id") or ""

        def got_parent(title: str, parent: str | None) -> None:
            if parent is None:
                return
            op: dict = {"type": "create", "title": title, "parent_id": parent or None}
            if here is not None and parent == default_parent:
                op["after_id"] = here["id"]  # a sibling of the highlighted Pursuit, right after it
            self.apply(op)

        def got_title(title: str | None) -> None:
            if not title:
                return
            after = f" It goes right after {here['title']} if it keeps this parent." if here is not None else ""
            self.app.push_screen(PromptScreen(
                f"New Pursuit: {title}", f"Parent Pursuit id, empty for the top level.{after}", value=default_parent,
                suggestions=suggestions, allow_empty=True, input_id="pursuit-parent", check=self._parent_problem),
                lambda parent: got_parent(title, parent))

        self.app.push_screen(PromptScreen("New Pursuit", "Title (the id is made from it):",
                                          empty_error="A Pursuit needs a title.", input_id="pursuit-title"), got_title)

    def action_rename(self) -> None:
        p = self.current
        if p is None:
            return

        def done(title: str | None) -> None:
            if title:
                self.apply({"type": "rename", "id": p["id"], "title": title})

        self.app.push_screen(PromptScreen(f"Rename {p['title']}", f"New title (the id {p['id']} stays):",
                                          value=p["title"],
                                          empty_error="A Pursuit needs a title.", input_id="pursuit-title"), done)

    def action_move(self) -> None:
        p = self.current
        if p is None:
            return
        suggestions = [q["id"] for q in self._pursuits() if q["id"] != p["id"]]

        def placed(parent: str, after: str | None) -> None:
            if after is not None:
                self.apply({"type": "move", "id": p["id"], "parent_id": parent or None, "after_id": after or None})

        def done(parent: str | None) -> None:
            if parent is None:
                return
            siblings = [q["id"] for q in self._pursuits()
                        if (q["parent_id"] or "") == parent and q["id"] != p["id"]]

            def after_problem(after: str) -> str | None:
                if after and after not in siblings:
                    under = f"under {parent}" if parent else "at the top level"
                    return (f"{after} is not a Pursuit {under}; "
                            + (f"one of: {', '.join(siblings[:6])}" if siblings else "leave it empty (last)") + ".")
                return None

            under = self._title_of(parent) if parent else "the top level"
            self.app.push_screen(PromptScreen(
                f"Move {p['title']}", f"After which Pursuit under {under}? Empty: last.", suggestions=siblings,
                allow_empty=True, input_id="pursuit-after", check=after_problem),
                lambda after: placed(parent, after))

        self.app.push_screen(PromptScreen(
            f"Move {p['title']}", "New parent Pursuit id, empty for the top level:",
            value=p["parent_id"] or "", suggestions=suggestions, allow_empty=True, input_id="pursuit-parent",
            check=lambda parent: self._parent_problem(parent, moving=p["id"])), done)

    def _title_of(self, pid: str) -> str:
        p = self._pursuit(pid)
        return f"{p['title']} ({pid})" if p is not None else pid

    def _parent_problem(self, parent: str, *, moving: str | None = None) -> str | None:
        """Why ``parent`` cannot be the parent (of the Pursuit ``moving``, when moving one)."""
        if not parent or self.state is None:
            return None
        by_id = {q["id"]: q for q in self.state.pursuits}
        if parent not in by_id:
            return f"There is no Pursuit {parent!r}: give an existing id (tab completes) or leave it empty."
        if moving is not None and (parent == moving or parent in descendants(by_id, moving)):
            return f"{parent} is {'the Pursuit itself' if parent == moving else 'under it'}: a Pursuit cannot move "\
                   "under itself."
        return None

    def action_edit_body(self) -> None:
        p = self.current
        if p is None:
            return
        where = f" ({p['backing_file']})" if p["backing_file"] else ""

        def done(body: str | None) -> None:
            if body is not None:
                self.apply({"type": "edit_body", "id": p["id"], "body": body})

        self.app.push_screen(TextScreen(
            f"Body of {p['title']}", f"Markdown under the heading{where}; headings and nodes stay as they are:",
            value=p.get("body", ""), text_id="pursuit-body-text"), done)

    def action_toggle_focus(self) -> None:
        p = self.current
        if p is not None:
            self.apply({"type": "set_focus", "id": p["id"], "focused": not p["focused"]})

    def action_delete(self) -> None:
        p = self.current
        if p is None or self.state is None:
            return
        by_id = {q["id"]: q for q in self.state.pursuits}
        under = descendants(by_id, p["id"])
        doomed = {p["id"], *under}
        focus = [i for i in self.state.focus if i in doomed]
        drops = p.get("delete_drops", [])
        lines = [f"Delete {p['title']} ({p['id']})" + (f" and {count(len(under), 'sub-Pursuit')}" if under else "")
                 + "?"]
        if focus:
            lines.append(f"It leaves the Focus order ({', '.join(focus)}).")
        if drops:
            shown = ", ".join(drops[:6]) + (f" and {len(drops) - 6} more" if len(drops) > 6 else "")
            lines.append(f"{count(len(drops), 'Memory edge')} to it will be removed: {shown}.")
        else:
            lines.append("No Memory edge points to it.")
        lines.append("The delete stays pending until c checkpoints it; u undoes it until then.")

        def done(yes: bool | None) -> None:
            if yes:
                self.apply({"type": "delete", "id": p["id"]})

        self.app.push_screen(ConfirmScreen("Delete Pursuit", "\n".join(lines), yes="Delete", destructive=True), done)

    def action_undo(self) -> None:
        self.write("undo")

    def action_redo(self) -> None:
        self.write("redo")

    def action_checkpoint(self) -> None:
        self.write("checkpoint")

    def action_discard(self) -> None:
        pending = self.state.cursor if self.state else 0
        other = foreign_owner(self.state) if self.state else None
        what = f"Drop {count(pending, 'pending edit')}" if pending else "Drop the Pursuit editor's journal"
        what += f" of session {other}?" if other is not None else "?"

        def done(yes: bool | None) -> None:
            if yes:
                self.write("discard")

        self.app.push_screen(ConfirmScreen("Discard pending edits", what + " Undo cannot bring them back.",
                                           yes="Discard", destructive=True), done)
