"""Small modal screens: a reason to reject, an id to jump to, a yes/no before a bulk or
destructive action, a few lines of text to edit, one piece of evidence, and the dialog that
shows a worker's unexpected error."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static, TextArea

from rmtui.engine.display import printable  # evidence text is shown, never obeyed
from rmtui.tui.readers import display_path
from rmtui.tui.wording import clip, timestamp

PACKAGE_PARENT = Path(__file__).resolve().parents[3]  # the folder holding the rmtui package


class PromptScreen(ModalScreen[str | None]):
    """Ask for one line of text; empty answers are refused with ``empty_error``, or with
    ``allow_empty`` answered as ``""`` (a meaningful blank, e.g. "no parent"; escape is None).

    ``check`` validates the answer as it is given: it returns why the answer cannot be used
    (shown under the box, which stays open) or None, so a wrong answer is refused before any
    next question is asked.
    """

    CSS_PATH = Path(__file__).parent / "dialogs.tcss"
    BINDINGS: ClassVar = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, title: str, prompt: str, *, placeholder: str = "", empty_error: str = "",
                 suggestions: list[str] | None = None, value: str = "", input_id: str = "prompt-input",
                 allow_empty: bool = False, check: Callable[[str], str | None] | None = None) -> None:
        super().__init__()
        self.allow_empty = allow_empty
        self.check = check
        self.title_text = title
        self.prompt = prompt
        self.placeholder = placeholder
        self.empty_error = empty_error
        self.suggestions = suggestions
        self.value = value
        self.input_id = input_id

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = self.title_text
            box.border_subtitle = "enter answers · escape cancels"
            yield Label(self.prompt, classes="dialog-prompt")
            yield Input(value=self.value, placeholder=self.placeholder, id=self.input_id,
                        suggester=SuggestFromList(self.suggestions, case_sensitive=False) if self.suggestions else None)
            yield Static("", classes="dialog-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        if not value and self.empty_error:
            self.query_one(".dialog-error", Static).update(self.empty_error)
            return
        problem = self.check(value) if self.check is not None else None
        if problem:
            self.query_one(".dialog-error", Static).update(Text(problem))
            return
        self.dismiss(value if value or self.allow_empty else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TextScreen(ModalScreen[str | None]):
    """Edit a few lines of text (a Pursuit's body): ctrl+s answers the text, escape None.

    Enter is a new line here, so saving needs its own key; the text is answered as typed.
    """

    CSS_PATH = Path(__file__).parent / "dialogs.tcss"
    BINDINGS: ClassVar = [
        Binding("ctrl+s", "save", "Save", id="text.save"),
        Binding("escape", "cancel", "Cancel", id="text.cancel"),
    ]

    def __init__(self, title: str, prompt: str, *, value: str = "", text_id: str = "text-input") -> None:
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.value = value
        self.text_id = text_id

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog text-dialog") as box:
            box.border_title = self.title_text
            box.border_subtitle = "ctrl+s saves · escape cancels"
            yield Label(self.prompt, classes="dialog-prompt")
            yield TextArea(self.value, id=self.text_id, soft_wrap=True, show_line_numbers=False)

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """Ask before a bulk or destructive action; answers True only for an explicit yes.

    ``y`` confirms and ``n`` or escape cancels from anywhere in the dialog; enter presses the
    focused button, which is Cancel for a destructive action (so a stray enter loses nothing).
    """

    CSS_PATH = Path(__file__).parent / "dialogs.tcss"
    BINDINGS: ClassVar = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, title: str, question: str, *, yes: str = "Yes", destructive: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.question = question
        self.yes = yes
        self.destructive = destructive

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog confirm-dialog" + (" -destructive" if self.destructive else "")) as box:
            box.border_title = self.title_text
            box.border_subtitle = "y yes · n or escape no"
            yield Static(self.question, id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.yes} (y)", id="confirm-yes", variant="error" if self.destructive else "primary")
                yield Button("Cancel (n)", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no" if self.destructive else "#confirm-yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class EvidenceScreen(ModalScreen[str | None]):
    """The full text of one piece of evidence; answers "approve", "reject" or None."""

    CSS_PATH = Path(__file__).parent / "dialogs.tcss"
    BINDINGS: ClassVar = [
        Binding("escape", "close", "Close", id="evidence_view.close"),
        Binding("a", "approve", "Approve", id="evidence_view.approve"),
        Binding("x", "reject", "Reject", id="evidence_view.reject"),
    ]

    def __init__(self, evidence) -> None:
        super().__init__()
        self.evidence = evidence

    def compose(self) -> ComposeResult:
        e = self.evidence
        with Vertical(classes="dialog evidence-dialog") as box:
            box.border_title = f"Evidence: {clip(printable(e.first_line), 60)}"
            keys = ["escape closes"]
            if self.check_action("approve", ()):
                keys.append("a approves")
            if self.check_action("reject", ()):
                keys.append("x rejects")
            box.border_subtitle = " · ".join(keys)
            meta = Text()
            for label, value in (("state", e.state + (f" ({e.reason})" if e.reason else "")), ("uid", e.uid),
                                 ("session", e.session),
                                 ("request", e.request or "-"), ("submitted", timestamp(e.created_at)),
                                 ("bytes", str(len(e.text.encode()))), ("sha256", e.sha256[:16])):
                meta.append(f"{label:>9} ", style="bold")
                meta.append(value + "\n")
            yield Static(meta, id="evidence-meta")
            with VerticalScroll(id="evidence-text"):
                yield Static(Text(e.text))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "approve":
            return True if self.evidence.state == "inbox" else None
        if action == "reject":
            return True if self.evidence.state in ("inbox", "queued") else None
        return True

    def action_close(self) -> None:
        self.dismiss(None)

    def action_approve(self) -> None:
        self.dismiss("approve")

    def action_reject(self) -> None:
        self.dismiss("reject")


def error_location(exc: BaseException) -> str:
    """``file:line in function`` of the innermost traceback frame (where it was raised)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown location"
    frame = frames[-1]
    path = Path(frame.filename)
    try:
        shown = path.resolve().relative_to(PACKAGE_PARENT).as_posix()
    except ValueError:
        shown = display_path(path)
    return f"{shown}:{frame.lineno} in {frame.name}"


class ErrorScreen(ModalScreen[None]):
    """An exception a worker did not expect: a bug, not a refusal (refusals, EngineError,
    show on the screen that asked). Type, message and where it was raised."""

    CSS_PATH = Path(__file__).parent / "dialogs.tcss"
    BINDINGS: ClassVar = [Binding("escape,enter", "close", "Close", id="error.close")]

    def __init__(self, error: BaseException, *, worker: str = "") -> None:
        super().__init__()
        self.error = error
        self.kind = type(error).__name__
        self.message = str(error)
        self.location = error_location(error)
        self.worker = worker

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog error-dialog") as box:
            box.border_title = "Unexpected error"
            box.border_subtitle = "escape or enter closes"
            yield Static(Text.assemble((self.kind, "bold"), f": {self.message}" if self.message else ""),
                         id="error-message")
            yield Static(Text(f"at {self.location}"), id="error-location")
            if self.worker:
                yield Static(Text(f"in the worker {self.worker}"), id="error-worker")

    def shows(self, error: BaseException) -> bool:
        """True when this dialog already shows the same failure (same type, same place)."""
        return (type(error).__name__, error_location(error)) == (self.kind, self.location)

    def action_close(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """The keys of the screen below (its own, its panes', then the global ones), each with the
    binding id that remaps it; keys that do not apply right now are dimmed."""

    CSS_PATH = Path(__file__).parent / "dialogs.tcss"
    BINDINGS: ClassVar = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    def __init__(self, rows: list, *, screen_name: str = "", config_path: str = "",
                 panes: list[str] | None = None) -> None:
        super().__init__()
        self.rows = rows
        self.screen_name = screen_name
        self.config_path = config_path
        self.panes = panes or []  # the panes tab visits, in order

    def compose(self) -> ComposeResult:
        from rich.table import Table

        from rmtui.tui.keys import TEXTUAL_KEYS

        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=True)
        table.add_column("key", no_wrap=True)
        table.add_column("action", ratio=1)
        table.add_column("binding id", no_wrap=True)
        section = None
        for row in self.rows:
            if row.section != section:
                if section is not None:
                    table.add_row("", "", "")
                section = row.section
                table.add_row(Text(section, style="bold underline"), "", "")
            style = "" if row.applies else "dim"
            table.add_row(Text(row.keys, style="bold" if row.applies else "dim"), Text(row.description, style=style),
                          Text(row.binding_id, style="italic " + style))
        table.add_row("", "", "")
        table.add_row(Text("Textual", style="bold underline"), "", "")
        for keys, description in TEXTUAL_KEYS:
            table.add_row(Text(keys, style="bold"), description, "")
        self.table = table
        with Vertical(classes="dialog help-dialog") as box:
            box.border_title = f"Keys · {self.screen_name}" if self.screen_name else "Keys"
            box.border_subtitle = "escape closes"
            if len(self.panes) > 1:
                yield Static(Text.assemble(("tab", "bold"), " moves between the panes: ", " → ".join(self.panes),
                                           " (shift+tab back); the pane with the heavy border has focus."),
                             id="help-panes")
            with VerticalScroll(id="help-keys"):
                yield Static(table, id="help-table")
            remap = "Remap a key by its binding id"
            if self.config_path:
                remap += f" in {self.config_path}"
            yield Static(Text(remap + ': [keys] then "evidence.approve" = "y". Dimmed keys do not apply right now.'),
                         id="help-remap")

    def action_close(self) -> None:
        self.dismiss(None)
