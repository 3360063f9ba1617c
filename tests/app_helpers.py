"""Helpers for app tests: a fixed clock and bounded waits (never an endless loop)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable

from tests.conftest import FULL_TESTS, ROOT

DEMO_RUNS = ROOT / "demo_runs"


def own_copy(demo: str, dest: Path) -> Path:
    """A copy of the demo run ``demo`` at ``dest`` as a run of one's own: without the demo's ``read_only``
    mark, so tuidiag writes into it (compacts it, keeps its job results) as into a user's run."""
    shutil.copytree(DEMO_RUNS / demo, dest)
    manifest = json.loads((dest / "run.json").read_text())
    manifest.pop("read_only", None)
    (dest / "run.json").write_text(json.dumps(manifest))
    return dest

FIXED_NOW = 1_900_000_000.0
"""A clock for deterministic snapshots: ages of demo data are shown relative to this."""


def fixed_clock() -> float:
    return FIXED_NOW


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 60.0, step: float = 0.1) -> bool:
    """Let the app run until ``condition()`` holds or ``timeout`` seconds pass; return whether it held.

    The app is let run 10 ms at first, twice as long each time after, up to ``step``: most conditions
    hold within a frame or two of a key, and a fixed 100 ms poll left the app (and the machine) idle.
    The timeout is only a safety net (a test passes as soon as its condition holds): 15 s was once
    too short for a run view to open on a 2-core machine running four workers, a hypothesis shrink
    and other suites at once (``test_app_ui_thread``, 1.5 s alone)."""
    deadline = time.monotonic() + timeout
    pause = min(0.01, step)
    while time.monotonic() < deadline:
        if condition():
            return True
        await pilot.pause(pause)
        pause = min(pause * 2, step)
    return condition()


def run_keys(app) -> list[str]:
    """Keys (paths) of the rows in the overview table."""
    from textual.widgets import DataTable

    from tuidiag.app.screens.overview import OverviewScreen

    screen = next(s for s in app.screen_stack if isinstance(s, OverviewScreen))
    table = screen.query_one("#runs", DataTable)
    return [Path(str(key.value)).name for key in table.rows]


def drawn_text(widget) -> str:
    """Every line ``widget`` draws at its size (scrolled out of view or not), joined: the text a user can read in it."""
    from textual.geometry import Region

    width, height = widget.size
    return "\n".join("".join(segment.text for segment in strip) for strip in widget.render_lines(Region(0, 0, width, height)))


def settled(app, count: int) -> bool:
    """The overview lists ``count`` runs, each read and diagnosed: what a snapshot or a check of the health
    column may look at. A run summarised from its run.json shows the pending badge until its diagnosis
    lands, after the app's ``FIRST_DRAW_GRACE`` (later still on a loaded machine)."""
    from tuidiag.viewmodel.snapshot import PENDING, STATUS_READING, STATUS_UNREADABLE

    return len(app.summaries) == count and all(
        s.status != STATUS_READING and (s.health != PENDING.code or s.status == STATUS_UNREADABLE) for s in app.summaries)
