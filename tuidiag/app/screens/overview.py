"""The overview: a table of runs with status, progress, loss trend and a health badge."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.screen import Screen
from textual.coordinate import Coordinate
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Input, Static

from tuidiag.text.numbers import fmt
from tuidiag.sources import KIND_TUIDIAG
from tuidiag.viewmodel.snapshot import STATUS_READING, STATUS_UNREADABLE, RunSummary
from tuidiag.text.safe import clean, literal

STATUS_STYLE = {"running": "green", "finished": "blue", "failed": "red", "crashed": "bold red", "stalled": "yellow", "unknown": "dim",
                STATUS_UNREADABLE: "bold red", STATUS_READING: "dim"}
PROBLEM_WIDTH = 70
"""Characters of a run's read problem shown in its status cell (the whole text is in the notice on Enter)."""
HEALTH_STYLE = {"critical": "bold red", "warning": "yellow", "info": "green"}
SORTS = ("name", "status", "step", "loss", "health")
COLUMNS = ("", "run", "status", "health", "step", "loss", "trend", "steps/s", "lr", "grad")
SOURCE_COLUMN = "source"
"""Shown after ``run`` when the root holds runs of other trackers (a root of tuidiag runs only does without it)."""


class OverviewScreen(Screen):
    """All runs under the root; Enter opens one, Space selects several to compare."""

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("space", "toggle_select", "Select"),
        Binding("c", "compare", "Compare"),
        Binding("slash", "filter", "Filter"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("escape", "clear_filter", "Clear", show=False),
    ]

    @dataclass
    class RunChosen(Message):
        """Open the run view of ``key``."""

        key: str

    @dataclass
    class CompareChosen(Message):
        """Overlay the runs ``keys``."""

        keys: tuple[str, ...]

    def __init__(self) -> None:
        super().__init__()
        self.summaries: list[RunSummary] = []
        self.selected: set[str] = set()
        self.filter_text = ""
        self.sort = "name"
        self._root = ""
        self._shown: list[tuple[str, list[object]]] = []
        """(key, cell signatures) of the rows on screen, to update only the cells that changed."""
        self._mixed = False
        """True while the source column is shown (some run is not tuidiag's own)."""

    def compose(self) -> ComposeResult:
        yield Static(id="overview-title")
        yield Input(placeholder="filter runs by name, status or source (Enter to apply, Esc to clear)", id="filter")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static(id="overview-hint")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        table = self.query_one("#runs", DataTable)
        table.add_columns(*COLUMNS)
        table.focus()
        if self.summaries:  # a refresh that arrived before the screen was mounted
            self.show(self.summaries, self._root)

    def show(self, summaries: list[RunSummary], root: str) -> None:
        """Replace the table with ``summaries`` (keeps the cursor on the same run).

        Before the screen's widgets exist the summaries are kept and drawn by ``on_mount``."""
        self.summaries, self._root = summaries, root
        try:
            heading = self.query_one("#overview-title", Static)
        except NoMatches:  # not composed yet, or being torn down: on_mount draws what was kept
            return
        live = sum(s.status == "running" for s in summaries)
        title = Text(f" tuidiag  {len(summaries)} runs, {live} live  under ", style="bold")
        title.append_text(literal(root, "bold"))
        heading.update(title)
        self._fill()

    def _fill(self) -> None:
        table = self.query_one("#runs", DataTable)
        mixed = any(s.source != KIND_TUIDIAG for s in self.summaries)
        if mixed != self._mixed:
            self._mixed, self._shown = mixed, []
            table.clear(columns=True)
            table.add_columns(*(COLUMNS[:2] + (SOURCE_COLUMN,) + COLUMNS[2:] if mixed else COLUMNS))
        visible = self._visible()
        rows = [(s.key, self._cells(s)) for s in visible]
        if [key for key, _ in rows] == [k for k, _ in self._shown]:
            self._update_changed(table, rows)  # same runs in the same order: touch only what changed
        else:
            keep = self._current_key()
            table.clear()
            for key, cells in rows:
                table.add_row(*cells, key=key)
            if keep is not None and keep in table.rows:
                table.move_cursor(row=table.get_row_index(keep))
        self._shown = [(key, [_signature(c) for c in cells]) for key, cells in rows]
        hint = ("no runs yet: a run is a directory with run.json or metrics/, "
                "a TensorBoard log, a W&B run (run-*.wandb) or a CSV log") if not self.summaries else ""
        self.query_one("#overview-hint", Static).update(hint)

    def _update_changed(self, table: DataTable, rows: list[tuple[str, list[object]]]) -> None:
        for row, ((_, cells), (_, before)) in enumerate(zip(rows, self._shown)):
            for column, (cell, old) in enumerate(zip(cells, before)):
                if _signature(cell) != old:
                    table.update_cell_at(Coordinate(row, column), cell)

    def _visible(self) -> list[RunSummary]:
        needle = self.filter_text.lower()
        rows = [s for s in self.summaries if needle in s.name.lower() or needle in s.status or needle == s.source]
        keys = {
            "name": lambda s: s.name.lower(),
            "status": lambda s: s.status,
            "step": lambda s: -(s.step or 0),
            "loss": lambda s: s.last_loss if s.last_loss is not None and math.isfinite(s.last_loss) else math.inf,
            "health": lambda s: ({"critical": 0, "warning": 1}.get(s.health_severity, 2), -s.health_confidence),
        }
        return sorted(rows, key=keys[self.sort])

    def _cells(self, s: RunSummary) -> list[object]:
        mark = Text("*" if s.key in self.selected else " ", style="bold magenta")
        status = s.status + (f" {_age(s.data_age)}" if s.data_age is not None else "")
        spark = SparklineRenderable(list(s.spark), width=12) if len(s.spark) > 1 else Text("")
        health = f"{s.health} {s.health_confidence:.0%}" if s.health != "healthy" else "healthy"
        status_cell = _status_cell(s, status)
        if s.recorder_losses:
            status_cell.append_text(literal(f", {s.recorder_losses}", "yellow"))
        source = [literal(s.source, "dim" if s.source == KIND_TUIDIAG else "cyan")] if self._mixed else []
        return [
            mark, literal(s.name, "bold", 28), *source, status_cell,
            literal(health, HEALTH_STYLE.get(s.health_severity, ""), 30),
            literal("-" if s.step is None else f"{s.step:,}"), literal(_num(s.last_loss)), spark,
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
            self.selected ^= {key}
            self._fill()

    def action_compare(self) -> None:
        keys = tuple(sorted(self.selected)) or tuple(s.key for s in self._visible()[:4])
        if len(keys) >= 2:
            self.post_message(self.CompareChosen(keys))
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
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.notify(f"sorted by {self.sort}")
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


def _signature(cell: object) -> object:
    """What a cell shows, comparable: text and style, or a sparkline's values."""
    if isinstance(cell, Text):
        return (cell.plain, str(cell.style))
    return tuple(getattr(cell, "data", ()) or ())
