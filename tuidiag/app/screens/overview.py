"""The overview: a table of runs with status, progress, loss trend and a health badge."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.coordinate import Coordinate
from textual.css.query import NoMatches
from textual.widgets import DataTable, Input, Static

from tuidiag.app.widgets.cell_table import CellTable
from tuidiag.app.widgets.steady_footer import SteadyFooter
from tuidiag.app.widgets.trend_sparkline import TrendSparkline
from tuidiag.diagnosis.codes import badge
from tuidiag.text.numbers import confidence, fmt
from tuidiag.viewmodel.overview_rows import (SORT_NAMES, count_text, fit_columns, full_width, header, run_label, shorten_label,
                                             visible)
from tuidiag.sources import KIND_TUIDIAG
from tuidiag.viewmodel.snapshot import STATUS_READING, STATUS_UNREADABLE, RunSummary
from tuidiag.text.safe import clean, literal

STATUS_STYLE = {"running": "green", "finished": "blue", "failed": "red", "crashed": "bold red", "stalled": "yellow", "unknown": "dim",
                "interrupted": "yellow", "idle": "yellow", "exited": "dim",
                STATUS_UNREADABLE: "bold red", STATUS_READING: "dim"}
PROBLEM_WIDTH = 70
"""Characters of a run's read problem shown in its status cell (the whole text is in the notice on Enter)."""
NO_CONFIDENCE = ("healthy", "unreadable")
"""Health codes shown without a likelihood: nothing found, or nothing read (what to do is in the run view)."""
HEALTH_STYLE = {"critical": "bold red", "warning": "yellow", "info": "green"}
COLUMNS = ("", "run", "status", "health", "step", "loss", "trend", "steps/s", "lr", "grad")
"""Headers; ``step`` is the last recorded step (the same number as the run view's "step N" and ``tuidiag ls``)."""
RUN_WIDTH = 28
"""Characters of a run's label shown (:func:`shorten_label`)."""
SOURCE_COLUMN = "source"
"""Shown after ``run`` when the root holds runs of other trackers (a root of tuidiag runs only does without it)."""


class OverviewScreen(Screen):
    """All runs under the root; Enter opens one, Space selects several to compare."""

    BINDINGS = [
        Binding("enter", "open", "Open", tooltip="the run view of the run under the cursor"),
        Binding("space", "toggle_select", "Select", tooltip="mark the run for compare"),
        Binding("c", "compare", "Compare", tooltip="overlay the marked runs (else the first four)"),
        Binding("slash", "filter", "Filter", tooltip="by name or status; enter applies it"),
        Binding("s", "cycle_sort", "Sort", tooltip="cycle: name, status, step, loss, health"),
        Binding("escape", "clear_filter", "Clear", show=False, tooltip="clear the filter"),
    ]

    @dataclass
    class RunChosen(Message):
        """Open the run view of ``key``."""

        key: str

    @dataclass
    class CompareChosen(Message):
        """Compare the runs ``keys`` (the first is A, before), called ``names`` until they are read."""

        keys: tuple[str, ...]
        names: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.summaries: list[RunSummary] = []
        self.selected: dict[str, None] = {}
        """The runs marked with Space, in the order they were marked (the first is A in a comparison)."""
        self.filter_text = ""
        self.sort = "name"
        self._headers: tuple[str, ...] = ()
        self._root = ""
        self._shown: list[tuple[str, list[object]]] = []
        """(key, cell signatures) of the rows on screen, to update only the cells that changed."""
        self._shown_cells: list[tuple[str, list[object]]] = []
        """(key, cells) of the rows on screen, to tell when a column's width changes."""
        self._mixed = False
        """True while the source column is shown (some run is not tuidiag's own)."""
        self._texts: dict[str, Text] = {}
        """What the title and the hint show (:meth:`_update`)."""
        self._behind = False
        """Summaries came while another screen hid this one: the table shows older ones until it is shown again."""
        self._filled_for: tuple[int, list[RunSummary]] | None = None
        """The width the table was last filled for, and the summaries it showed (a resize that keeps both: nothing to do)."""

    def compose(self) -> ComposeResult:
        yield Static(id="overview-title")
        yield Input(placeholder="filter runs by name, status or source (Enter to apply, Esc to clear)", id="filter")
        yield CellTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static(id="overview-hint")
        yield SteadyFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        table = self.query_one("#runs", DataTable)
        self._set_headers(table)
        table.focus()
        if self.summaries:  # a refresh that arrived before the screen was mounted
            self.show(self.summaries, self._root)

    def show(self, summaries: list[RunSummary], root: str) -> None:
        """Replace the table with ``summaries`` (keeps the cursor on the same run).

        Before the screen's widgets exist the summaries are kept and drawn by ``on_mount``, and while another
        screen hides this one (a run view) they are kept and drawn when it shows again; summaries equal
        to those shown (a refresh in which no run changed) change nothing."""
        if summaries == self.summaries and root == self._root and self._shown_cells:
            return
        self.summaries, self._root = summaries, root
        try:
            self.query_one("#overview-title", Static)
        except NoMatches:  # not composed yet, or being torn down: on_mount draws what was kept
            return
        if self._hidden():
            self._behind = True
            return
        self._fill()

    def _hidden(self) -> bool:
        """Whether a screen other than a dialog is above this one (a run view, a comparison): it covers the table."""
        stack = self.app.screen_stack
        return self in stack and any(not isinstance(screen, ModalScreen) for screen in stack[stack.index(self) + 1:])

    def on_screen_resume(self) -> None:
        """Shown again: draw the summaries that came while it was hidden."""
        if self._behind and self.summaries:
            self._fill()

    def _title(self, shown: int) -> Text:
        """Runs shown (``2 of 5 runs`` while filtered), live ones, and the root."""
        live = sum(s.status == "running" for s in self.summaries)
        title = Text(f" tuidiag  {count_text(shown, len(self.summaries), bool(self.filter_text))}, {live} live", style="bold")
        title.append("  under ", style="bold")
        title.append_text(literal(self._root, "bold"))
        return title

    def _columns(self) -> tuple[str, ...]:
        """Every column this root's runs have, in table order (``source`` only for a mixed root)."""
        return COLUMNS[:2] + (SOURCE_COLUMN,) + COLUMNS[2:] if self._mixed else COLUMNS

    def _set_headers(self, table: DataTable, columns: tuple[str, ...] | None = None) -> None:
        """The column headers, the sorted column with its arrow (the rows are added again after)."""
        headers = tuple(header(column, self.sort) for column in (columns if columns is not None else self._columns()))
        if headers != self._headers:
            table.clear(columns=True)
            table.add_columns(*headers)
            self._headers, self._shown = headers, []

    def _available(self, table: DataTable) -> int:
        """Cells the table's columns may take: the screen's width less the table's vertical scrollbar."""
        width = self.size.width or self.app.size.width
        return width - table.styles.scrollbar_size_vertical

    def _fitted(self, table: DataTable, visible: list[RunSummary]) -> tuple[tuple[str, ...], list[tuple[str, list[object]]], str]:
        """The columns shown at this width, each whole (:func:`fit_columns`), the rows' cells in them, and the hint
        that names the columns hidden."""
        columns = self._columns()
        cells = [self._cells(s, RUN_WIDTH) for s in visible]
        widths = [max([len(header(c, self.sort))] + [_width(row[i]) for row in cells]) for i, c in enumerate(columns)]
        shown, run_width = fit_columns(columns, widths, self._available(table))
        if run_width < widths[columns.index("run")]:
            cells = [self._cells(s, run_width) for s in visible]
        keep = [columns.index(c) for c in shown]
        rows = [(s.key, [row[i] for i in keep]) for s, row in zip(visible, cells)]
        hidden = [c for c in columns if c not in shown]
        hint = f"hidden: {', '.join(hidden)} ({full_width(widths)} columns show all)" if hidden else ""
        return shown, rows, hint

    def on_resize(self) -> None:
        """Refit the table to a new width (a resize that keeps it: nothing to do; hidden: when shown again)."""
        if not self.summaries or self._filled_for == (self._available(self.query_one("#runs", DataTable)), self.summaries):
            return
        if self._hidden():
            self._behind = True
            return
        self._fill()

    def _fill(self) -> None:
        self._behind = False
        table = self.query_one("#runs", CellTable)
        keep = self._current_key()
        self._mixed = any(s.source != KIND_TUIDIAG for s in self.summaries)
        visible = self._visible()
        shown, rows, hidden_hint = self._fitted(table, visible)
        self._set_headers(table, shown)
        self._update("#overview-title", self._title(len(visible)))
        if [key for key, _ in rows] == [k for k, _ in self._shown] and self._same_widths(rows):
            self._update_changed(table, rows)  # same runs, order and widths: touch only what changed
        else:  # rebuilt with widths measured afresh: a column fits what it shows now, not its widest past text
            table.clear()
            for column in table.columns.values():
                column.content_width = column.label.cell_len  # as add_column starts it
            for key, cells in rows:
                table.add_row(*cells, key=key)
            for column, cells in zip(table.ordered_columns, zip(*(cells for _, cells in rows))):
                # measured now, not on the table's next idle: a header line drawn before then is cached by
                # DataTable with the label widths and would stay narrower than its rows
                column.content_width = max(column.content_width, *(_width(cell) for cell in cells))
            if keep is not None and keep in table.rows:
                table.move_cursor(row=table.get_row_index(keep))
        self._shown = [(key, [_signature(c) for c in cells]) for key, cells in rows]
        self._shown_cells = rows
        self._filled_for = (self._available(table), self.summaries)
        hint = ("no runs yet: a run is a directory with run.json or metrics/, "
                "a TensorBoard log, a W&B run (run-*.wandb) or a CSV log") if not self.summaries else hidden_hint
        self._update("#overview-hint", Text(hint))

    def _update(self, selector: str, text: Text) -> None:
        """Show ``text`` in the ``Static`` at ``selector`` unless it shows it already (nothing to repaint)."""
        if self._texts.get(selector) != text:
            self._texts[selector] = text
            self.query_one(selector, Static).update(text)

    def _same_widths(self, rows: list[tuple[str, list[object]]]) -> bool:
        """Whether every column's widest cell is as wide as in the rows shown now."""
        def widths(table_rows: list[list[object]]) -> list[int]:
            return [max((_width(row[c]) for row in table_rows), default=0) for c in range(len(table_rows[0]))] if table_rows else []
        return widths([cells for _, cells in rows]) == widths([cells for _, cells in self._shown_cells])

    def _update_changed(self, table: CellTable, rows: list[tuple[str, list[object]]]) -> None:
        """Put in the table the cells whose text, style or sparkline changed; the others, the header and the rows
        with no change are not drawn again (:class:`CellTable`). The widths are the same (:meth:`_same_widths`)."""
        changed = [(Coordinate(row, column), cell)
                   for row, ((_, cells), (_, before)) in enumerate(zip(rows, self._shown))
                   for column, (cell, old) in enumerate(zip(cells, before)) if _signature(cell) != old]
        if changed:
            table.update_cells(changed)

    def _visible(self) -> list[RunSummary]:
        return visible(self.summaries, self._root, self.filter_text, self.sort)

    def _cells(self, s: RunSummary, run_width: int) -> list[object]:
        mark = Text("*" if s.key in self.selected else " ", style="bold magenta")
        status = s.status + (f" {_age(s.data_age)}" if s.data_age is not None else "")
        spark = TrendSparkline(list(s.spark), width=12) if len(s.spark) > 1 else Text("")
        health = f"{badge(s.health)} {confidence(s.health_confidence)}" if s.health not in NO_CONFIDENCE else badge(s.health)
        status_cell = _status_cell(s, status)
        if s.recorder_losses:
            status_cell.append_text(literal(f", {s.recorder_losses}", "yellow"))
        source = [literal(s.source, "dim" if s.source == KIND_TUIDIAG else "cyan")] if self._mixed else []
        return [
            mark, literal(shorten_label(clean(run_label(s, self._root), 1000), clean(s.name, 1000), run_width), "bold"), *source, status_cell,
            literal(health, HEALTH_STYLE.get(s.health_severity, ""), 30),
            literal(s.step_text()), literal(_num(s.last_loss)), spark,
            literal(_num(s.steps_per_s)), literal(_num(s.lr)), literal(_num(s.grad_norm)),
        ]

    def _current_key(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def action_open(self) -> None:
        key = self._current_key()
        if key is not None:
            self._choose(key)

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        message.stop()
        self._choose(str(message.row_key.value))

    def _choose(self, key: str) -> None:
        """Open the run, unless nothing of it could be read: then say why."""
        summary = next((s for s in self.summaries if s.key == key), None)
        if summary is not None and summary.status in (STATUS_UNREADABLE, STATUS_READING):
            what = f"unreadable: {summary.problem}" if summary.status == STATUS_UNREADABLE else "still being read"
            self.notify(f"{clean(summary.name, 80)}: {clean(what, 1000)}", severity="error", timeout=10, markup=False)
            return
        self.post_message(self.RunChosen(key))

    def action_toggle_select(self) -> None:
        key = self._current_key()
        if key is not None:
            if self.selected.pop(key, False) is False:
                self.selected[key] = None
            self._fill()

    def action_compare(self) -> None:
        keys = tuple(self.selected) or tuple(s.key for s in self._visible()[:4])
        if len(keys) >= 2:
            labels = {s.key: run_label(s, self._root) for s in self.summaries}
            self.post_message(self.CompareChosen(keys, tuple(labels.get(k, k) for k in keys)))
        else:
            self.notify("select two or more runs with Space, then press c", severity="warning")

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        self.filter_text = message.value.strip()
        message.input.display = bool(self.filter_text)
        self.query_one("#runs", DataTable).focus()
        self._fill()

    def action_clear_filter(self) -> None:
        self.filter_text = ""
        box = self.query_one("#filter", Input)
        box.value, box.display = "", False
        self.query_one("#runs", DataTable).focus()
        self._fill()

    def action_cycle_sort(self) -> None:
        self.sort = SORT_NAMES[(SORT_NAMES.index(self.sort) + 1) % len(SORT_NAMES)]  # the header's arrow shows it
        self._fill()


def _status_cell(s: RunSummary, status: str) -> Text:
    """The status, and what could not be read: the whole run (``unreadable: reason``) or part of it."""
    if s.status == STATUS_UNREADABLE:
        return literal(f"unreadable: {s.problem}", STATUS_STYLE[STATUS_UNREADABLE], PROBLEM_WIDTH)
    cell = literal(status, STATUS_STYLE.get(s.status, ""))
    if s.status == STATUS_READING and s.problem:
        cell.append_text(literal(f" ({s.problem})", "dim"))
    elif s.problem:
        cell.append_text(literal(f", unreadable in part: {s.problem}", "yellow", PROBLEM_WIDTH))
    return cell


def _num(value: float | None) -> str:
    return "-" if value is None else fmt(value)


def _age(seconds: float) -> str:
    if seconds > 30 * 86400:
        return ">30d"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _width(cell: object) -> int:
    """Cells a table cell needs: a text's length, a sparkline's set width."""
    if isinstance(cell, Text):
        return cell.cell_len
    return int(getattr(cell, "width", 0) or 0)


def _signature(cell: object) -> object:
    """What a cell shows, comparable: text and style, or a sparkline's values."""
    if isinstance(cell, Text):
        return (cell.plain, str(cell.style))
    return tuple(getattr(cell, "data", ()) or ())
