"""The events panel: non-finite values, clipping, no-grad, recorder errors; messages wrap; enter shows one whole."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable

from tuidiag.app.widgets.guard import guarded
from tuidiag.store import Event
from tuidiag.text.safe import clean, literal

SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": ""}
KIND_SHOWN = 20
"""Characters of an event's kind the table shows."""
MESSAGE_SHOWN = 300
"""Characters of an event's message the table shows, wrapped (enter shows the whole event)."""
MIN_MESSAGE_WIDTH = 20
"""The message column is never narrower than this (the table scrolls sideways below it)."""


class EventsPanel(DataTable):
    """A table of events, newest last, each message wrapped to the panel's width; Enter posts ``EventChosen``."""

    BINDINGS = [Binding("enter", "select_cursor", "Show event", show=False,
                        tooltip="the whole event; its step is marked on the charts")]

    @dataclass
    class EventChosen(Message):
        """The user picked an event: show it whole and mark its step."""

        event: Event

    _waiting: tuple[Event, ...] = ()
    """Events given before the panel was mounted (its columns are made then): drawn on mount."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.border_title = "Events"
        self._shown: tuple[Event, ...] | None = ()
        """The events in the table; None while it shows an error instead."""
        self._widths = (4, 4, 0)
        """The widths of the step, kind and message columns now in the table."""
        self._fill(self._waiting)

    def on_resize(self) -> None:
        """Wrap the messages to the new width (a hidden tab has none: it is drawn when shown)."""
        if self._shown is not None and self._message_width(*self._widths[:2]) != self._widths[2]:
            self._fill(self._shown)

    @guarded("the events")
    def show(self, events: tuple[Event, ...]) -> None:
        """Replace the rows when the events changed (before the panel is mounted: when it is)."""
        if not self.is_mounted:
            self._waiting = events
            return
        if events != self._shown:
            self._fill(events)

    def _message_width(self, step_width: int, kind_width: int) -> int:
        """What the message column may take: the panel's width less the other columns, all padding and a scrollbar."""
        padding = 2 * self.cell_padding * 3
        room = self._content_width() - self.styles.scrollbar_size_vertical - step_width - kind_width - padding
        return max(MIN_MESSAGE_WIDTH, room)

    def _content_width(self) -> int:
        """The panel's width inside its border. Before its first layout (its tab's first visit) it has none yet; the
        width it gets is that of the nearest container laid out, less its own border and padding: its first frame is
        drawn for that width, not wrapped to the narrowest and drawn again a frame later."""
        if self.content_region.width:
            return self.content_region.width
        laid_out = next((node for node in self.ancestors if isinstance(node, Widget) and node.content_region.width), None)
        return max(0, laid_out.content_region.width - self.styles.gutter.width) if laid_out is not None else 0

    def _fill(self, events: tuple[Event, ...]) -> None:
        keep = self.cursor_row
        self._shown = events
        step_width = max([4, *(len(str(event.step)) for event in events)])
        kind_width = max([4, *(cell_len(clean(event.kind, KIND_SHOWN)) for event in events)])
        self._widths = (step_width, kind_width, self._message_width(step_width, kind_width))
        self.clear(columns=True)
        for label, width in zip(("step", "kind", "message"), self._widths):
            self.add_column(label, width=width, key=label)
        for i, event in enumerate(events):
            style = SEVERITY_STYLE.get(event.severity, "")
            cells = (literal(event.step), literal(event.kind, style, KIND_SHOWN), literal(event.message, style, MESSAGE_SHOWN))
            self.add_row(*cells, key=str(i), height=None)
        if events:
            self.move_cursor(row=min(keep, len(events) - 1))

    def show_error(self, text: Text) -> None:
        """One row saying why the events could not be shown (the next ``show`` tries again)."""
        self._shown = None
        self.clear()
        self.add_row("", Text("error", style="bold red"), text, height=None)

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        message.stop()
        index = int(message.row_key.value or 0)
        if self._shown is not None and 0 <= index < len(self._shown):
            self.post_message(self.EventChosen(self._shown[index]))
