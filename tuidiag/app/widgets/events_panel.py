"""The events panel: non-finite values, clipping, no-grad, recorder errors; select to jump."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from tuidiag.app.widgets.guard import guarded
from tuidiag.store import Event
from tuidiag.text.safe import literal

SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": ""}


class EventsPanel(DataTable):
    """A table of events, newest last; Enter posts ``StepChosen``."""

    @dataclass
    class StepChosen(Message):
        """The user picked an event: jump to its step."""

        step: int

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns("step", "kind", "message")
        self.border_title = "Events"
        self._shown: tuple[Event, ...] | None = ()
        """The events in the table; None while it shows an error instead."""

    @guarded("the events")
    def show(self, events: tuple[Event, ...]) -> None:
        """Replace the rows when the events changed."""
        if events == self._shown:
            return
        self._shown = events
        self.clear()
        for i, event in enumerate(events):
            style = SEVERITY_STYLE.get(event.severity, "")
            self.add_row(literal(event.step), literal(event.kind, style, 20), literal(event.message, style, 300), key=str(i))

    def show_error(self, text: Text) -> None:
        """One row saying why the events could not be shown (the next ``show`` tries again)."""
        self._shown = None
        self.clear()
        self.add_row("", Text("error", style="bold red"), text)

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        message.stop()
        index = int(message.row_key.value or 0)
        if self._shown is not None and 0 <= index < len(self._shown):
            self.post_message(self.StepChosen(self._shown[index].step))
