"""``CellTable.update_cells``: the table draws what a ``DataTable`` given the same values draws, and renders again only
the cells it changed (no other cell, not the header, no line of another row)."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from tests.app_helpers import drawn_text, wait_for
from tuidiag.app.widgets.cell_table import CellTable

ROWS, COLUMNS = 6, 5


def _value(row: int, column: int, round_: int = 0) -> Text:
    return Text(f"r{row}c{column}v{round_}", style="bold" if column == 1 else "")


def _drawn_as_is(table: CellTable) -> bool:
    """Every cell on screen is drawn from the table's present state (a resize after the first drawing renders all again)."""
    current = {(k[0], k[1]) for k in table._cell_render_cache.keys() if k[6] == table._update_count}
    return len(current) == (ROWS + 1) * COLUMNS


class Tables(App):
    """A ``CellTable`` and a plain ``DataTable`` with the same rows, side by side."""

    CSS = "Screen { layout: horizontal; } DataTable { width: 1fr; height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield CellTable(id="cells", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="plain", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        for table in self.query(DataTable):
            table.add_columns(*(f"col{c}" for c in range(COLUMNS)))
            for row in range(ROWS):
                table.add_row(*(_value(row, c) for c in range(COLUMNS)), key=f"row{row}")


@pytest.mark.parametrize("changes", [[(2, 3)], [(0, 0), (0, 4)], [(1, 1), (4, 2), (5, 0)]], ids=["one", "one-row", "three-rows"])
async def test_only_the_changed_cells_are_rendered_again(monkeypatch: pytest.MonkeyPatch, changes: list[tuple[int, int]]) -> None:
    app = Tables()
    async with app.run_test(size=(120, ROWS + 3)) as pilot:
        cells, plain = app.query_one("#cells", CellTable), app.query_one("#plain", DataTable)
        await pilot.pause()
        cells.refresh()  # drawn whole once more: the resize after the first drawing left it for the next repaint
        assert await wait_for(pilot, lambda: _drawn_as_is(cells))
        lines: list[int] = []
        original_line = CellTable._render_line

        def render_line(self, y, *args, **kwargs):
            if self is cells:
                lines.append(y)
            return original_line(self, y, *args, **kwargs)

        monkeypatch.setattr(CellTable, "_render_line", render_line)
        cells.update_cells([(Coordinate(r, c), _value(r, c, 1)) for r, c in changes])
        for r, c in changes:
            plain.update_cell_at(Coordinate(r, c), _value(r, c, 1))
        kept = set(cells._cell_render_cache.keys())
        await pilot.pause()
        rendered = {(cells.get_row_index(key[0]), cells.get_column_index(key[1])) for key in set(cells._cell_render_cache.keys()) - kept}
        assert sorted(rendered) == sorted(changes)  # rendered anew: nothing else, not the header, not another cell
        assert sorted(set(lines)) == sorted({1 + r for r, _ in changes})  # the lines drawn: the header is line 0
        assert drawn_text(cells) == drawn_text(plain)
        assert all(f"r{r}c{c}v1" in drawn_text(cells) for r, c in changes)


async def test_the_cursor_row_and_a_scrolled_table_draw_as_a_data_table() -> None:
    """Changes under the cursor and in rows scrolled out of view: the same drawing as a ``DataTable``'s."""
    app = Tables()
    async with app.run_test(size=(80, 10)) as pilot:
        cells, plain = app.query_one("#cells", CellTable), app.query_one("#plain", DataTable)
        for table in (cells, plain):
            table.move_cursor(row=ROWS - 1)
        await pilot.pause()
        for round_ in (1, 2):
            cells.update_cells([(Coordinate(r, 2), _value(r, 2, round_)) for r in range(ROWS)])
            for r in range(ROWS):
                plain.update_cell_at(Coordinate(r, 2), _value(r, 2, round_))
            await pilot.pause()
            assert drawn_text(cells) == drawn_text(plain)
            assert f"r{ROWS - 1}c2v{round_}" in drawn_text(cells)
