"""The overview table's rows: which runs a filter keeps, their order, how each run is labelled.

Pure functions over :class:`~tuidiag.viewmodel.snapshot.RunSummary`; the screen only draws them.
"""

from __future__ import annotations

import functools
import math
from pathlib import PurePath
from collections.abc import Sequence
from typing import Any, Callable

from tuidiag.viewmodel.header_fit import ELLIPSIS, elide
from tuidiag.viewmodel.snapshot import RunSummary

SORTS: dict[str, tuple[str, str, Callable[[RunSummary, str], Any]]] = {
    "name": ("run", "▲", lambda s, root: run_label(s, root).lower()),
    "status": ("status", "▲", lambda s, root: s.status),
    "step": ("step", "▼", lambda s, root: -(s.step or 0)),
    "loss": ("loss", "▲", lambda s, root: s.last_loss if s.last_loss is not None and math.isfinite(s.last_loss) else math.inf),
    "health": ("health", "▼", lambda s, root: ({"critical": 0, "warning": 1}.get(s.health_severity, 2), -s.health_confidence)),
}
"""Sort name -> (the column it sorts by, its arrow: ▲ lowest or A first, ▼ highest or worst first, the key)."""
SORT_NAMES = tuple(SORTS)


def run_label(summary: RunSummary, root: str) -> str:
    """The run's place under ``root``: its parent directories relative to the root, then its name.

    ``a/seed0`` and ``b/seed0`` stay apart; a run directly under the root (or the root itself)
    is its name alone, and a name that already ends with the run's path (``tuidiag import``
    names runs so) is not repeated."""
    return _label(summary.key, summary.name, root)


@functools.lru_cache(maxsize=8192)
def _label(key: str, name: str, root: str) -> str:
    """:func:`run_label` of the run at ``key`` named ``name``, kept: the overview asks it for every row at every
    refresh (filter, sort, cells), and path arithmetic on hundreds of runs costs the first draw."""
    try:
        relative = PurePath(key).relative_to(root)
    except ValueError:  # not under the root (a symlinked run resolved elsewhere): its name
        return name
    parents, named = relative.parent, PurePath(name).parts
    if str(parents) in ("", "."):
        return name
    if named and relative.parts[-len(named):] == named:
        return relative.as_posix()
    return f"{parents.as_posix()}/{name}"


def visible(summaries: list[RunSummary], root: str, needle: str, sort: str) -> list[RunSummary]:
    """The runs whose label or status contains ``needle`` (any case), or whose source kind it names, ordered by ``sort``."""
    needle = needle.lower()
    key = SORTS[sort][2]
    rows = [s for s in summaries if needle in run_label(s, root).lower() or needle in s.status or needle == s.source]
    return sorted(rows, key=lambda s: key(s, root))


def header(column: str, sort: str) -> str:
    """A column's header, with the sort arrow when the table is sorted by it."""
    by, arrow, _ = SORTS[sort]
    return f"{column} {arrow}" if column == by else column


def count_text(shown: int, total: int, filtering: bool) -> str:
    """``5 runs``, or ``2 of 5 runs`` while a filter is active."""
    plural = "run" if total == 1 else "runs"
    return f"{shown} of {total} {plural}" if filtering else f"{total} {plural}"


def shorten_label(label: str, name: str, width: int) -> str:
    """``label`` in ``width`` characters: its parents cut from the left (``…ments/seed0``) while the
    run's own ``name`` fits whole, else cut from the right as any long name is (``very-long-na…``)."""
    if len(label) <= width:
        return label
    if label.endswith(name) and len(name) < width:
        return ELLIPSIS + label[len(label) - width + 1:]
    return elide(label, width)


COLUMN_PADDING = 2
"""Cells a table column takes beyond its widest text (the table pads each side of a cell by one)."""
HIDDEN_FIRST = ("trend", "grad", "lr", "steps/s", "loss", "source", "step", "status", "health")
"""The columns hidden first to last where the terminal is too narrow for all (kept last to first, each
that fits): a column is shown whole or not at all, so no number is ever cut to a shorter, false one
(``1,49`` for ``1,499``)."""
HEALTH = "health"
"""The column kept longest: the run's label shrinks to :data:`RUN_LEAST` before it is hidden."""
RUN_FIT = 16
"""Characters the run's label may shrink to before any column is hidden."""
RUN_LEAST = 6
"""Characters of the run's label shown however narrow the terminal."""


def fit_columns(columns: Sequence[str], widths: Sequence[int], available: int, run: str = "run") -> tuple[tuple[str, ...], int]:
    """The columns to show in ``available`` cells, in table order, and the width of the ``run`` column.

    ``widths`` holds each column's widest text (header or cell; the run's at its longest allowed).
    Columns not named in :data:`HIDDEN_FIRST` (the marks, the run) are always shown; the others are
    added from the last of that list to the first, each if it fits whole. The run's label keeps its
    width, or shrinks to :data:`RUN_FIT` where that shows more columns, to :data:`RUN_LEAST` where only that
    shows :data:`HEALTH` (the overview's purpose), and to :data:`RUN_LEAST` at the narrowest."""
    width = dict(zip(columns, widths))
    run_full = width.get(run, 0)
    fixed = [c for c in columns if c not in HIDDEN_FIRST]

    def fill(run_width: int) -> tuple[list[str], int]:
        used = sum((run_width if c == run else width[c]) + COLUMN_PADDING for c in fixed)
        shown = list(fixed)
        for column in reversed(HIDDEN_FIRST):
            if column in width and used + width[column] + COLUMN_PADDING <= available:
                shown.append(column)
                used += width[column] + COLUMN_PADDING
        return shown, used

    shown, used = fill(run_full)
    narrow = min(run_full, RUN_FIT)
    shown_narrow, used_narrow = fill(narrow)
    run_width = run_full
    if len(shown_narrow) > len(shown):  # a shorter label shows more columns: it takes back what is left over
        shown, run_width = shown_narrow, min(run_full, narrow + available - used_narrow)
        used = used_narrow + run_width - narrow
    if HEALTH in width and HEALTH not in shown:  # the overview's purpose: the label gives way to it down to RUN_LEAST
        room = available - sum(width[c] + COLUMN_PADDING for c in fixed if c != run) - COLUMN_PADDING * (run in width)
        least = min(run_full, RUN_LEAST)
        if room - width[HEALTH] - COLUMN_PADDING >= least:
            label = max(least, min(narrow, room - width[HEALTH] - COLUMN_PADDING))
            shown, used = fill(label)
            run_width = min(run_full, label + available - used)
            used += run_width - label
    if used > available:  # the marks and the label alone are too wide
        run_width = max(min(run_full, RUN_LEAST), run_width - (used - available))
    return tuple(c for c in columns if c in shown), run_width


def full_width(widths: Sequence[int]) -> int:
    """Cells the table needs to show every column whole (the run's label at its longest allowed)."""
    return sum(w + COLUMN_PADDING for w in widths)
