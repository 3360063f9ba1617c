"""A centred, scrollable modal that shows one text (help, one event); its keys close it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class TextModal(ModalScreen[None]):
    """Shows ``body()`` in a scrollable box; a subclass binds the keys that dismiss it."""

    DEFAULT_CSS = """
    TextModal { align: center middle; }
    TextModal > VerticalScroll { width: 90; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1; }
    """
    TEXT_ID = "modal-text"
    """The id of the ``Static`` that holds the text."""

    def body(self) -> Text:
        """The text to show (composed once)."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.body(), id=self.TEXT_ID)
