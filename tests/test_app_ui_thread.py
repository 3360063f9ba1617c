"""The monitor's UI thread reads no file: every read happens in a worker.

An audit hook records each file the process opens or lists from the thread that runs
the app's event loop, while Pilot drives the monitor through its paths: start-up with
the file watcher, the overview, opening a run, a job confirmation (the
run's manifest is read) and the live-action offer.
Python loading a module lazily (its file, the listing of its package's directory) is the only file
access allowed there.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.store.manifest import read_manifest, write_manifest

FILE_EVENTS = ("open", "os.listdir", "os.scandir", "glob.glob", "os.rename", "os.remove", "os.mkdir")
_ui_thread: set[int] = set()
_seen: list[tuple[str, str]] = []


def _importing(event: str, target: str) -> bool:
    """Whether the access is Python importing a module on first use: the module's file, or the listing of its
    package's directory (or of a ``sys.path`` entry) when the import system refills its cache of that directory
    (after ``importlib.invalidate_caches()``, which other tests' libraries call)."""
    if target.endswith((".py", ".pyc", ".so")):
        return True
    return event == "os.listdir" and (target in sys.path or os.path.isfile(os.path.join(target, "__init__.py")))


def _audit(event: str, args: Any) -> None:
    if threading.get_ident() in _ui_thread and event in FILE_EVENTS:
        target = str(args[0]) if args else ""
        if not _importing(event, target):
            _seen.append((event, target))


sys.addaudithook(_audit)  # cannot be removed: it records only while a test marks its thread


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A demo run that names a factory, so a job on it asks for confirmation."""
    for name in ("lr-too-low",):
        shutil.copytree(DEMO_RUNS / name, tmp_path / name)
        write_manifest(tmp_path / name, {**read_manifest(tmp_path / name), "factory": "train:build"})
    return tmp_path


async def test_the_ui_thread_reads_no_file(root: Path) -> None:
    app = TuidiagApp(root, clock=fixed_clock)
    importlib.invalidate_caches()  # as a test before this one may have: lazy imports list their directories again
    _seen.clear()
    _ui_thread.add(threading.get_ident())  # the test and the app's event loop share this thread
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            assert await wait_for(pilot, lambda: len(app.summaries) == 1 and app.watching)  # the watcher started
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
            await pilot.press("l")  # a job on the run that names a factory
            assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))
            await pilot.press("escape", "a")  # declined; then what can be changed live (a worker says: not live)
            assert await wait_for(pilot, lambda: any("live" in str(n.message) for n in app._notifications))
    finally:
        _ui_thread.discard(threading.get_ident())
    assert _seen == [], f"the UI thread touched files: {_seen[:5]}"
