"""Small modal screens: a reason to reject, an id to jump to, one piece of evidence."""

from __future__ import annotations

from pathlib import Path

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, Static

from rmtui.tui.widgets.tables import timestamp


class PromptScreen(ModalScreen[str | None]):
    """Ask for one line of text; empty answers are refused with ``empty_error``."""

    CSS_PATH = Path(__file__).parent / "dialogs.tcss"
    BINDINGS: ClassVar = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, title: str, prompt: str, *, placeholder: str = "", empty_error: str = "",
                 suggestions: list[str] | None = None, value: str = "", input_id: str = "prompt-input") -> None:
        super().__init__()
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
            yield Label(self.prompt)
            yield Input(value=self.value, placeholder=self.placeholder, id=self.input_id,
                        suggester=SuggestFromList(self.suggestions, case_sensitive=False) if self.suggestions else None)
            yield Static("", classes="dialog-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        if not value and self.empty_error:
            self.query_one(".dialog-error", Static).update(self.empty_error)
            return
        self.dismiss(value or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


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
            box.border_title = f"Evidence {e.uid}"
            meta = Text()
            for label, value in (("state", e.state + (f" ({e.reason})" if e.reason else "")), ("session", e.session),
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
