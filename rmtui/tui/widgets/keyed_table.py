"""The row-cursor table every workbench table builds on.

Each table owns its bindings, so the footer shows the keys of the focused pane; an action
that does not apply to the row under the cursor is disabled (dimmed in the footer), never
an error after the fact. Actions only post messages: the screen does the engine call.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding
from textual.geometry import Size
from textual.widgets import DataTable

from rmtui.tui.widgets.fitted_columns import Column, Fit, clipped, fit_columns
from rmtui.tui.widgets.steady_scroll import sizes_unchanged


class KeyedTable(DataTable):
    """A row-cursor table that keeps the cursor on the same key across refreshes.

    A table that names its ``FITTED`` columns fits them to its pane (``fitted_columns``):
    its rows' cells are given in that order and it adds no columns of its own.
    """

    FITTED: ClassVar[tuple[Column, ...]] = ()

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.rows_by_key: dict[str, object] = {}
        self._rows: list[tuple[str, object, tuple]] = []
        self._fit: Fit | None = None

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        if sizes_unchanged(self, size, container_size):  # a layout elsewhere: the scrollbars stay
            return False
        return super()._size_updated(size, virtual_size, container_size, layout)

    def on_mount(self) -> None:
        if self.FITTED:
            self._set_columns(fit_columns(self.FITTED, [], None, self.cell_padding))

    def on_resize(self) -> None:
        if self.FITTED and self._fit is not None and self._fitted(self._rows) != self._fit:
            self.replace_rows(self._rows)

    def _fitted(self, rows: list[tuple[str, object, tuple]]) -> Fit:
        width = self.size.width
        if not width:  # not laid out yet: the first resize fits the columns
            return fit_columns(self.FITTED, [cells for _, _, cells in rows], None, self.cell_padding)
        if len(rows) > self.size.height - 1:  # the rows overflow: the vertical scrollbar takes its cells
            width -= self.styles.scrollbar_size_vertical
        return fit_columns(self.FITTED, [cells for _, _, cells in rows], width, self.cell_padding)

    def _set_columns(self, fit: Fit) -> None:
        self.clear(columns=True)
        for column, width in zip(fit.columns, fit.widths, strict=True):
            self.add_column(column.label, key=column.key, width=width)
        self._fit = fit

    def _fitted_cells(self, cells: tuple) -> tuple:
        assert self._fit is not None
        index = {c.key: i for i, c in enumerate(self.FITTED)}
        return tuple(clipped(str(cells[index[c.key]])) if c.flex else cells[index[c.key]] for c in self._fit.columns)

    @property
    def current_key(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - an empty or refreshing table has no cell under the cursor
            return None

    @property
    def current(self):
        key = self.current_key
        return self.rows_by_key.get(key) if key is not None else None

    def replace_rows(self, rows: list[tuple[str, object, tuple]]) -> None:
        keep = self.current_key
        keep_index = self.cursor_row
        self._replacing = True
        try:
            if self.FITTED:
                self._rows = list(rows)
                fit = self._fitted(self._rows)
                if fit != self._fit:
                    self._set_columns(fit)
            self.clear()
            self.rows_by_key = {}
            for key, obj, cells in rows:
                self.rows_by_key[key] = obj
                self.add_row(*(self._fitted_cells(cells) if self.FITTED else cells), key=key)
            if keep is not None and keep in self.rows_by_key:
                self.move_cursor(row=self.get_row_index(keep), animate=False)
            elif self.row_count:
                self.move_cursor(row=min(keep_index, self.row_count - 1), animate=False)
        finally:
            self._replacing = False
        self.update_bindings()

    def watch_cursor_coordinate(self, old, new) -> None:
        super().watch_cursor_coordinate(old, new)
        if not getattr(self, "_replacing", False):
            self.update_bindings()

    def update_bindings(self) -> None:
        """Refresh the footer only when an action became (un)available: a refresh rebuilds it."""
        state = tuple(bool(self.check_action(b.action.split("(")[0], ()))
                      for b in self.BINDINGS if isinstance(b, Binding))
        if state != getattr(self, "_binding_state", None):
            self._binding_state = state
            self.refresh_bindings()
