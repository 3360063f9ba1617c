"""One event, whole (enter on the Events tab): its step, kind, severity, full message and data."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding

from tuidiag.app.screens.text_modal import TextModal
from tuidiag.app.widgets.events_panel import SEVERITY_STYLE
from tuidiag.store import Event
from tuidiag.text.safe import literal

MESSAGE_SHOWN = 20_000
"""Characters of an event's message the detail shows (the table shows the first few hundred)."""
VALUE_SHOWN = 2_000
"""Characters of each data value the detail shows."""


class EventDetailScreen(TextModal):
    """A scrollable modal with the whole text of one event; esc, enter or q closes it."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close", tooltip="back to the events")]
    TEXT_ID = "event-text"

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event

    def body(self) -> Text:
        """The whole event."""
        return event_text(self.event)


def event_text(event: Event) -> Text:
    """The whole event as literal text (nothing from the run's files is read as markup)."""
    style = SEVERITY_STYLE.get(event.severity, "")
    text = Text(f"Event at step {event.step}", style="bold")
    if event.rank:
        text.append(f" on rank {event.rank}", style="bold")
    text.append("\n")
    text.append_text(literal(event.kind, f"bold {style}", 100))
    text.append(", ")
    text.append_text(literal(event.severity, style, 40))
    text.append("\n\n")
    text.append_text(literal(event.message, "", MESSAGE_SHOWN))
    text.append("\n")
    if event.data:
        text.append("\n")
    for key, value in event.data.items():
        text.append_text(literal(key, "bold", 100))
        text.append(": ")
        shown = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        text.append_text(literal(shown, "", VALUE_SHOWN))
        text.append("\n")
    text.append("\n[esc] close", style="dim")
    return text
