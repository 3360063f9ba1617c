"""The help screen (``?``): every key, by screen, generated from the screens' ``BINDINGS``.

Help lists each binding that has a description, with its tooltip, and nothing else: a key
appears here exactly when a binding defines it, so help and keys cannot drift apart.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.keys import format_key

from tuidiag.app.run_tabs import tab_of
from tuidiag.app.screens.compare import CompareScreen
from tuidiag.app.screens.event_detail import EventDetailScreen
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.live_action import LiveActionScreen
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.screens.text_modal import TextModal
from tuidiag.app.widgets.events_panel import EventsPanel
from tuidiag.app.widgets.layers import LayerHeatmap

KEYS_WIDTH = 12
"""Columns of a help line's key column."""
WIDTH = 74
"""Columns help wraps its lines to: the modal's 80 less its border, padding and scrollbar."""
KEY_NAMES = {"enter": "enter", "left": "left", "right": "right", "up": "up", "down": "down"}
"""Keys help spells out in words where the footer shows a symbol."""


@dataclass(frozen=True)
class HelpSection:
    """One heading of the help: a screen, dialog or widget and the bindings it defines."""

    title: str
    owner: type | None
    """The class whose ``BINDINGS`` the section lists (None: the app's, known only once it runs)."""
    note: str = ""
    """A sentence about the section that is not about one key."""


def key_display(binding: Binding) -> str:
    """The keys of ``binding`` as help shows them: ``esc q ?``, ``+ =``, ``ctrl+p``."""
    if binding.key_display:
        return binding.key_display
    return " ".join(KEY_NAMES.get(key.strip(), format_key(key.strip())) for key in binding.key.split(","))


def as_binding(binding: BindingType) -> Binding:
    """``binding`` as a ``Binding`` whose comma-separated keys stay together (one help line for all of them)."""
    return binding if isinstance(binding, Binding) else Binding(*binding)


def key_line(keys: str, text: str, width: int = WIDTH) -> str:
    """A help line: the keys, then ``text`` wrapped to ``width`` under itself."""
    return textwrap.fill(text, width, initial_indent=f"  {keys:<{KEYS_WIDTH}} ", subsequent_indent=" " * (KEYS_WIDTH + 3),
                         break_on_hyphens=False, break_long_words=False)


def binding_text(binding: Binding) -> str:
    """What help says of one binding: its description and, when it has one, its tooltip."""
    return f"{binding.description}: {binding.tooltip}" if binding.tooltip else binding.description


def section_lines(bindings: Iterable[BindingType], width: int = WIDTH) -> list[str]:
    """Help lines of the bindings that have a description, in their order; one line per group of keys."""
    entries: dict[object, list[Binding]] = {}  # a group, or a binding of its own; in order of first appearance
    for binding in map(as_binding, bindings):
        if binding.group is not None or binding.description:
            entries.setdefault(binding.group or binding, []).append(binding)
    lines = []
    for entry, members in entries.items():
        if isinstance(entry, Binding.Group):
            lines.append(key_line(" ".join(dict.fromkeys(key_display(b) for b in members)), entry.description, width))
        else:
            lines.append(key_line(key_display(entry), binding_text(entry), width))
    return lines


def help_text(app_bindings: Iterable[BindingType], sections: tuple[HelpSection, ...] | None = None, width: int = WIDTH) -> Text:
    """The whole help, wrapped to ``width``: a heading per section, its note (indented 4), then its keys
    (``app_bindings`` for ``Everywhere``)."""
    out = Text("tuidiag monitor - keys\n", style="bold")
    for section in SECTIONS if sections is None else sections:
        bindings = app_bindings if section.owner is None else section.owner.BINDINGS
        out.append(f"\n{section.title}\n", style="bold")
        if section.note:
            out.append(textwrap.fill(section.note, width, initial_indent="    ", subsequent_indent="    ") + "\n", style="dim")
        out.append("\n".join(section_lines(bindings, width)) + "\n")
    return out


class HelpScreen(TextModal):
    """A modal with the key reference; any of esc, q, ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", tooltip="back to where you were")]
    DEFAULT_CSS = "HelpScreen > VerticalScroll { width: 80; }"

    def body(self) -> Text:
        """Help for the running app, wrapped to the modal's width."""
        return help_text(type(self.app).BINDINGS, width=max(30, min(WIDTH, self.app.size.width - 6)))


SECTIONS: tuple[HelpSection, ...] = (
    HelpSection("Everywhere", None),
    HelpSection("Overview (table of runs)", OverviewScreen),
    HelpSection("Run view", RunScreen, "Replay (tuidiag replay RUN): the diagnosis shows what was known at the cursor. "
                "Jobs run inside a live training, else from the run's factory, after you confirm."),
    HelpSection(f"Layers tab ({tab_of('layers').key})", LayerHeatmap),
    HelpSection(f"Events tab ({tab_of('events-tab').key})", EventsPanel),
    HelpSection("One event", EventDetailScreen),
    HelpSection("Compare (c on the overview)", CompareScreen),
    HelpSection("Job confirmation", JobConfirmScreen),
    HelpSection("Apply a fix (a)", LiveActionScreen),
    HelpSection("This help", HelpScreen),
)
"""Help's headings in order; a test checks that every class of the monitor with ``BINDINGS`` has one."""


