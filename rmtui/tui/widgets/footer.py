"""The footer every screen shows, rebuilt only when the keys it shows change.

Textual's footer rebuilds all of its keys (one widget each, restyled) whenever the screen's
bindings *may* have changed: on every focus move and every ``refresh_bindings``. On the main
screen that is some forty widgets, about 0.1 s of the interpreter each time, several times per
key press. This footer keeps what it showed last and skips the rebuild when nothing it would
show differs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Footer

if TYPE_CHECKING:
    from textual.screen import Screen


class KeysFooter(Footer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._shown: tuple | None = None

    def shown_keys(self, screen: Screen) -> tuple:
        """Everything :meth:`Footer.compose` reads to draw the keys."""
        app = self.app
        keys = tuple((b.key, app.get_key_display(b), b.description, b.action, enabled, tooltip, b.tooltip,
                      None if b.group is None else (b.group.description, b.group.compact))
                     for _node, b, enabled, tooltip in screen.active_bindings.values() if b.show)
        palette = self.show_command_palette and app.ENABLE_COMMAND_PALETTE
        command = screen.active_bindings.get(app.COMMAND_PALETTE_BINDING) if palette else None
        return keys, None if command is None else (command[1].key, app.get_key_display(command[1]), command[2])

    def bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            shown = self.shown_keys(screen)
            if shown == self._shown:
                self._bindings_ready = True
                return
            self._shown = shown
        super().bindings_changed(screen)
