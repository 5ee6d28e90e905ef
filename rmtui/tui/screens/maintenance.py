"""Manual maintenance: a worktree on a captured head, edited in $EDITOR, landed or aborted
through the engine, with the worktree's validation errors shown live as files change.
Aborting a worktree with changes asks first: its edits go with it. Files that are not memory
files (names the root's allow-list leaves out) are shown; landing or aborting over them is
refused by the engine, and only a confirmed "delete them" drops them."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Header, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from rmtui.engine.errors import EngineError, UsageError
from rmtui.engine.host import watch
from rmtui.engine.writes.worktrees import MEMORY_FILES, STRAY_RULE
from rmtui.tui import readers
from rmtui.tui.context import workbench
from rmtui.tui.messages import EngineDone, EngineFailed, MaintenanceLoaded
from rmtui.tui.screens.base import LiveScreen, error_text
from rmtui.tui.screens.dialogs import ConfirmScreen, PromptScreen
from rmtui.tui.widgets.footer import KeysFooter
from rmtui.tui.wording import count


def _shown(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def editor_command() -> list[str]:
    return shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")


class MaintenanceScreen(LiveScreen):
    CSS_PATH = Path(__file__).parent / "maintenance.tcss"
    WATCH_KINDS = frozenset({watch.WORKTREE, watch.HEAD, watch.STATE})
    BINDINGS: ClassVar = [
        Binding("b", "begin", "Begin", id="maintain.begin"),
        Binding("e", "edit", "Edit in $EDITOR", id="maintain.edit"),
        Binding("n", "new_file", "New file", id="maintain.new_file"),
        Binding("l", "land", "Land", id="maintain.land"),
        Binding("a", "abort", "Abort", id="maintain.abort"),
    ]

    def __init__(self) -> None:
        super().__init__(id="maintain")
        self.status: dict | None = None
        self.files: list[str] = []
        self.busy = False
        self.loaded = False
        self.result: Text | None = None
        self.land_message = ""  # the last landing's commit message, for a confirmed retry
        self.refused_files: list[str] = []  # the stray files the last landing was refused over
        self.sub_title = "Manual maintenance"

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("loading…", id="maint-status")
        with Horizontal(id="maint-body"):
            yield OptionList(id="maint-files")
            with Vertical(id="maint-right"):
                with VerticalScroll(id="maint-validation"):
                    yield Static("", id="maint-errors")
                yield Static("", id="maint-result")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#maint-files").border_title = "Worktree files"
        self.query_one("#maint-validation").border_title = "Validation"
        self.query_one("#maint-result").border_title = "Last action"

    def reload(self, kinds: set[str]) -> None:
        self.load_status()

    @work(thread=True, exclusive=True, group="maint-status", exit_on_error=False)
    def load_status(self) -> None:
        try:
            status, files = readers.read_maintenance(workbench(self).root)
        except EngineError as exc:
            self.post_message(EngineFailed("status", error_text(exc)[0]))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(MaintenanceLoaded(status, files))

    def on_maintenance_loaded(self, message: MaintenanceLoaded) -> None:
        self.status = message.status
        status_line = self.query_one("#maint-status", Static)
        errors = self.query_one("#maint-errors", Static)
        names = self.query_one("#maint-files", OptionList)
        keep = names.highlighted_option.id if names.highlighted_option is not None else None
        if message.files != self.files:
            self.files = message.files
            names.clear_options()
            names.add_options([Option(f, id=f) for f in self.files])
            if keep in self.files:
                names.highlighted = self.files.index(keep)
            elif self.files:
                names.highlighted = 0
        st = message.status
        if st is None:
            status_line.update("No maintenance in progress. Press b to begin one on the current head.")
            errors.update("")
            self.query_one("#maint-validation").border_title = "Validation"
        else:
            text = Text()
            text.append(st["operation_id"], style="bold")
            text.append(f"\nworktree {readers.display_path(st['worktree'])}")
            text.append(f"\ncaptured head {st['captured_head'][:10]} · ")
            if st["head_current"]:
                text.append("still current")
            else:
                text.append(f"the root moved to {st['head'][:10]}: landing will be refused", style="bold")
            text.append(f"\nchanged: {', '.join(st['dirty']) if st['dirty'] else 'nothing yet'}")
            if st.get("untracked"):
                text.append(f"\nnot memory files, never landed: {_shown(st['untracked'])} "
                            "(rename or delete them: landing and aborting refuse while they are here)", style="bold")
            status_line.update(text)
            # warnings are listed after the errors and never make the worktree invalid
            findings = [*st["errors"], *st.get("warnings", [])]
            body = Text("valid: no validation errors" if st["valid"] else "")
            for i, e in enumerate(findings):
                if i or st["valid"]:
                    body.append("\n")
                body.append(f"{e['file']}:{e['line']}: ", style="bold")
                if e.get("severity") == "warning":
                    body.append("warning: ", style="italic")
                body.append(f"{e['rule']}: {e['message']}")
            errors.update(body)
            errors.set_classes("-valid" if st["valid"] else "-invalid")
            self.query_one("#maint-validation").border_title = (
                "Validation · valid" if st["valid"] else
                f"Validation · {len(st['errors'])} error{'s' if len(st['errors']) != 1 else ''}")
        self.loaded = True
        self.refresh_bindings()

    # -- actions -------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        active = self.status is not None
        if self.busy and action in ("begin", "land", "abort"):
            return None
        if action == "begin":
            return True if not active and self.loaded else None
        if action in ("land", "abort", "new_file"):
            return True if active else None
        if action == "edit":
            return (True if active and self.query_one("#maint-files", OptionList).highlighted_option is not None
                    else None)
        return True

    def worker_failed(self, worker) -> None:
        if worker.group == "maint-write":
            self._set_busy(False)

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.refresh_bindings()

    def action_begin(self) -> None:
        self._set_busy(True)
        self.begin()

    @work(thread=True, exclusive=True, group="maint-write", exit_on_error=False)
    def begin(self) -> None:
        from rmtui.engine.writes import maintain

        try:
            op = maintain.begin(workbench(self).root)
        except EngineError as exc:
            self.post_message(EngineFailed("begin", error_text(exc)[0]))
            return
        self.post_message(EngineDone(f"maintenance {op.id} began in {readers.display_path(op.worktree)}"))

    def action_land(self) -> None:
        def done(message: str | None) -> None:
            if message:
                self._set_busy(True)
                self.land(message)

        self.app.push_screen(PromptScreen("Land maintenance", "Commit message:", value="maintain: manual edit",
                                          empty_error="A landing needs a commit message.", input_id="land-message"),
                             done)

    @work(thread=True, exclusive=True, group="maint-write", exit_on_error=False)
    def land(self, message: str, discard_untracked: tuple[str, ...] = ()) -> None:
        from rmtui.engine.writes import maintain

        self.land_message = message
        try:
            receipt = maintain.land(workbench(self).root, message=message, discard_untracked=discard_untracked)
        except EngineError as exc:
            text, rule = error_text(exc)
            self.refused_files = list(exc.details.get("files") or []) if rule == STRAY_RULE else []
            self.post_message(EngineFailed("land", text, rule=rule))
            return
        landed = (receipt.landed_commit or "")[:10] or "nothing (no change)"
        self.post_message(EngineDone(f"landed {landed}: {', '.join(receipt.changed_paths) or 'no change'}"))

    def action_abort(self) -> None:
        status = self.status
        dirty = (status or {}).get("dirty") or []
        untracked = (status or {}).get("untracked") or []
        if status is None or not (dirty or untracked):
            self._set_busy(True)
            self.abort()
            return

        def done(yes: bool | None) -> None:
            if yes:
                self._set_busy(True)
                self.abort(discard_untracked=tuple(untracked))  # only those shown: a newer one still refuses

        question = f"Abort {status['operation_id']}?"
        if dirty:
            question += (f" Its changes to {count(len(dirty), 'file')} ({_shown(dirty)}) are discarded with "
                         "the worktree.")
        if untracked:
            are = "is" if len(untracked) == 1 else "are"
            question += (f" It also holds {count(len(untracked), 'file')} that {are} not memory files "
                         f"({_shown(untracked)}): they are deleted too.")
        self.app.push_screen(ConfirmScreen("Abort maintenance", question, yes="Abort and discard", destructive=True),
                             done)

    @work(thread=True, exclusive=True, group="maint-write", exit_on_error=False)
    def abort(self, discard_untracked: tuple[str, ...] = ()) -> None:
        from rmtui.engine.writes import maintain

        try:
            maintain.abort(workbench(self).root, discard_untracked=discard_untracked)
        except EngineError as exc:
            self.post_message(EngineFailed("abort", error_text(exc)[0]))
            return
        self.post_message(EngineDone("maintenance aborted; the worktree is removed"))

    def on_engine_done(self, message: EngineDone) -> None:
        self._set_busy(False)
        self._show_result(Text(message.text), ok=True)
        self.notify(message.text)
        self.load_status()

    def on_engine_failed(self, message: EngineFailed) -> None:
        self._set_busy(False)
        if message.action == "land":
            text = Text()
            text.append("Landing refused", style="bold")
            if message.rule:
                text.append(f" ({message.rule})", style="bold")
            text.append(f"\n{message.text}\nThe worktree is kept: fix it and land again, or abort.")
        else:
            text = Text(f"{message.action} failed: {message.text}")
        self._show_result(text, ok=False)
        self.notify(text.plain.splitlines()[0], severity="error", timeout=8)
        self.load_status()
        if message.action == "land" and message.rule == STRAY_RULE and self.refused_files:
            self._offer_discard_and_land()

    def _offer_discard_and_land(self) -> None:
        """The one way the workbench drops a person's stray files: an explicit, destructive yes."""
        files = self.refused_files
        message = self.land_message

        def done(yes: bool | None) -> None:
            if yes:
                self._set_busy(True)
                self.land(message, discard_untracked=tuple(files))  # only those shown: a newer one still refuses

        are = "are" if len(files) != 1 else "is"
        self.app.push_screen(ConfirmScreen(
            "Files that would be lost",
            f"Landing removes the worktree, and with it {count(len(files), 'file')} that {are} not memory files "
            f"({_shown(files)}): {MEMORY_FILES}. To keep one, rename it to a memory file's name (or move it out "
            "of the worktree) and land again. Or delete them and land now?",
            yes="Delete them and land", destructive=True), done)

    def _show_result(self, text: Text, *, ok: bool) -> None:
        self.result = text
        box = self.query_one("#maint-result", Static)
        box.update(text)
        box.set_classes("-ok" if ok else "-refused")

    def action_edit(self) -> None:
        option = self.query_one("#maint-files", OptionList).highlighted_option
        if option is not None and option.id:
            self.open_in_editor(option.id)

    def action_new_file(self) -> None:
        def done(name: str | None) -> None:
            if name:
                self.open_in_editor(name, create=True)

        self.app.push_screen(PromptScreen("New file", "File name in the worktree (e.g. MEMORY_topic.md):",
                                          empty_error="A file needs a name.", input_id="new-file-name"), done)

    def open_in_editor(self, rel: str, *, create: bool = False) -> None:
        if self.status is None:
            return
        from rmtui.engine.fsutil import resolve_inside

        worktree = Path(self.status["worktree"])
        try:
            path = resolve_inside(worktree, rel)
        except UsageError as exc:
            self._show_result(Text(f"cannot open {rel}: {exc.message}"), ok=False)
            return
        if create and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")
        command = [*editor_command(), str(path)]
        try:
            try:
                with self.app.suspend():
                    subprocess.run(command, check=False)
            except SuspendNotSupported:  # headless (tests, web): run the editor without a terminal
                subprocess.run(command, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            self._show_result(Text(f"cannot run the editor {command[0]!r}: {exc}"), ok=False)
            return
        self.load_status()
