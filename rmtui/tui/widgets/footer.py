"""The footer every screen shows, rebuilt only when the keys it shows change.

Textual's footer rebuilds all of its keys (one widget each, restyled) whenever the screen's
bindings *may* have changed: on every focus move and every ``refresh_bindings``. On the main
screen that is some forty widgets, about 0.1 s of the interpreter each time, several times per
key press. This footer keeps what it showed last: it skips the rebuild when nothing it would
show differs, and when only which keys apply changed (a screen busy with engine work greys its
keys and back) it greys or restores those keys in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

if TYPE_CHECKING:
    from textual.screen import Screen

#: Where a key's "applies now" sits in each entry of :meth:`KeysFooter.shown_keys`.
ENABLED = 4


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
            shown, before = self.shown_keys(screen), self._shown
            self._shown = shown
            if shown == before:
                self._bindings_ready = True
                return
            if before is not None and self._grey_in_place(before, shown):
                return
        super().bindings_changed(screen)

    def _grey_in_place(self, before: tuple, shown: tuple) -> bool:
        """Only which keys apply changed: set each drawn key's greyed-out state (what a rebuild
        would draw). False when anything else differs, or a key is not drawn yet."""
        def rest(keys: tuple) -> tuple:
            return tuple(k[:ENABLED] + k[ENABLED + 1:] for k in keys)

        if before[1] != shown[1] or rest(before[0]) != rest(shown[0]):
            return False
        applies: dict[tuple[str, str], bool] = {}
        for entry in shown[0]:  # the footer draws the first binding of each action
            applies.setdefault((entry[0], entry[3]), entry[ENABLED])
        drawn = [k for k in self.query(FooterKey) if not k.has_class("-command-palette")]
        if len(drawn) != len({action for _key, action in applies}) or any((k.key, k.action) not in applies
                                                                            for k in drawn):
            return False
        for k in drawn:
            greyed = not applies[(k.key, k.action)]
            k._disabled = greyed  # what a click on it reads (a bell instead of the key)
            k.set_class(greyed, "-disabled")
        return True
