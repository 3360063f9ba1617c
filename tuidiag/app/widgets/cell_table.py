"""``CellTable``: a ``DataTable`` whose cell updates draw again only the cells that changed.

``DataTable.update_cell`` bumps one counter that is part of every cache key of the table (each cell's
rendering, each row's, each line's) and refreshes the whole widget: after one new value every cell on
screen is rendered again, the header's included. With ten live runs the overview changes a few cells of
every row each second, and rendering the whole table was most of the monitor's idle CPU.

:meth:`CellTable.update_cells` puts the new values in place, drops from those caches only the entries of
the cells and rows it changed, and refreshes only the regions of those rows: unchanged cells, the header
and the other rows are drawn from the caches. It relies on the caches of Textual's ``DataTable``; where
they are not as expected (another Textual version) it falls back on ``update_cell``, which is always right.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey

_CACHES = ("_data", "_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache", "_get_offsets")
"""The parts of Textual's ``DataTable`` that :meth:`CellTable.update_cells` uses."""


class CellTable(DataTable):
    """A ``DataTable`` with :meth:`update_cells`: new values in some cells, only their rows drawn again."""

    def update_cells(self, changes: Iterable[tuple[Coordinate, object]]) -> None:
        """Put each ``(coordinate, value)`` of ``changes`` in its cell, keeping the columns' widths.

        The caller keeps the widths (the table is rebuilt when a column's widest cell changes): only the
        changed cells are rendered again, and only their rows repainted."""
        if not all(hasattr(self, name) for name in _CACHES):  # not the DataTable this was written for
            for coordinate, value in changes:
                self.update_cell_at(coordinate, value, update_width=False)
            return
        cells: set[tuple[RowKey, ColumnKey]] = set()
        rows: dict[RowKey, int] = {}
        for coordinate, value in changes:
            if not self.is_valid_coordinate(coordinate):
                raise CellDoesNotExist(f"Coordinate {coordinate!r} is invalid.")
            row_key, column_key = self.coordinate_to_cell_key(coordinate)
            self._data[row_key][column_key] = value
            cells.add((row_key, column_key))
            rows[row_key] = coordinate.row
        if cells:
            self._forget(cells, rows)
            for index in rows.values():
                self.refresh_row(index)

    def _forget(self, cells: set[tuple[RowKey, ColumnKey]], rows: dict[RowKey, int]) -> None:
        """Drop the cached renderings of ``cells`` and of the lines of ``rows`` (row key -> row index)."""
        indexes = set(rows.values())
        for key in [k for k in self._cell_render_cache.keys() if (k[0], k[1]) in cells]:
            self._cell_render_cache.discard(key)
        for key in [k for k in self._row_render_cache.keys() if k[0] in rows]:
            self._row_render_cache.discard(key)
        for key in [k for k in self._row_renderable_cache.keys() if k[1] in indexes]:
            self._row_renderable_cache.discard(key)
        for key in list(self._line_cache.keys()):
            try:
                row_key = self._get_offsets(key[0])[0]
            except LookupError:
                continue
            if row_key in rows:
                self._line_cache.discard(key)
