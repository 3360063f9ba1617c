"""``TuidiagApp``: screens, keys and the data path (watcher -> worker -> message -> screen).

Disk work happens only in thread workers, which report back with ``post_message``; handlers on the UI thread hand
the frozen snapshots to the screens. The UI thread reads no file: starting the file watcher (a walk of the tree), the
manifest a job confirmation needs and every run's data are read in workers; only whether the root is itself a run is
looked up when the app is made, before its event loop runs. Its mixins keep the same rule: jobs
(:class:`~tuidiag.app.app_jobs.MonitorJobs`), live actions (:class:`~tuidiag.app.app_live_actions.MonitorLiveActions`)
and full garbage collections when idle (:class:`~tuidiag.app.idle_collection.IdleCollecting`).
"""

from __future__ import annotations

import math
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from textual import work
from textual.app import App
from textual.message import Message
from textual.timer import Timer

from tuidiag.app.app_jobs import MonitorJobs
from tuidiag.app.app_live_actions import MonitorLiveActions
from tuidiag.app.idle_collection import IdleCollecting
from tuidiag.app.commands import RunCommands
from tuidiag.app.run_tabs import bindings
from tuidiag.app.screens.compare import CompareScreen
from tuidiag.app.screens.help import HelpScreen
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.styles import CSS
from tuidiag.sources import kind_of
from tuidiag.viewmodel.actions import PastAction, Proposal
from tuidiag.viewmodel.compare_view import CompareView
from tuidiag.viewmodel.job_progress import JobTracker
from tuidiag.viewmodel.model import RunsModel
from tuidiag.viewmodel.snapshot import STATUS_READING, RunDetail, RunSummary
from tuidiag.monitor_keys import APP_KEYS
from tuidiag.viewmodel.watcher import RunWatcher

FAST_POLL = 1.0
SLOW_POLL = 5.0
COALESCE = 0.1
"""Least wait after a file event before a refresh, so a burst of files becomes one read."""
EVENT_GRACE = 2 * SLOW_POLL
"""A run that grew with no file event for this many seconds means file events do not arrive here."""
REFRESH_BUDGET = 0.04
"""Share of one core the app may take while several runs are writing: refreshes space out to stay within it, at most
SLOW_POLL apart (with one busy run every flush is shown at once). Its CPU between two refreshes counts, all threads'."""
REFRESH_PERIOD = 1.0
"""Least seconds between refreshes while several runs write: the recorder's flush period (runs flushing out of step show together)."""
BUSY_WINDOW = 2.0
"""A run with a file event in the last this many seconds counts as busy."""
FIRST_DRAW_GRACE = 1.5
"""Seconds after start before any diagnosis begins: the first draw of the overview or run view goes first."""
READ_WAIT = 0.5
"""Seconds a refresh waits for the runs' reads: a run still being read then shows as it last was
(or as ``reading``), the others at once, and it shows when its read ends."""


class TuidiagApp(MonitorJobs, MonitorLiveActions, IdleCollecting, App):
    """The monitor over the runs at or below ``root``."""

    TITLE = "tuidiag"
    CSS = CSS
    COMMANDS = App.COMMANDS | {RunCommands}
    BINDINGS = bindings(APP_KEYS)

    @dataclass
    class FilesChanged(Message):
        """Files of these runs changed (posted from the watchdog thread); bursts merge."""

        dirs: set[Path] = field(default_factory=set)

        def can_replace(self, message: Message) -> bool:
            if isinstance(message, TuidiagApp.FilesChanged):
                self.dirs |= message.dirs
                return True
            return False

    @dataclass
    class RunsRefreshed(Message):
        """A refresh finished: new summaries, and the open run's detail if any."""

        summaries: list[RunSummary]
        detail: RunDetail | None
        late: bool = False
        """Work of ``runs`` that ended after its refresh (a read, a diagnosis): the open run's view is built again if it is one."""
        runs: frozenset[str] = frozenset()

        def can_replace(self, message: Message) -> bool:
            if self.late and isinstance(message, TuidiagApp.RunsRefreshed) and message.late:
                self.runs = self.runs | message.runs  # the newer summaries stand for both
                return True
            return False

    @dataclass
    class DetailReady(Message):
        """The run view's data as of a replay cursor."""

        detail: RunDetail

    @dataclass
    class JobStatus(Message):
        """News of the running job: a live training's status, or a job process's progress (``state``, ``done``, ``total``)."""

        status: dict[str, Any]

    @dataclass
    class JobSent(Message):
        """The live job's request is written (cancelling it now means asking the training)."""

        request_id: str

    @dataclass
    class ActionsOffered(Message):
        """What may be changed in a live training (``problem``: why nothing may)."""

        key: str
        proposals: list[Proposal]
        where: str
        problem: str | None
        past: tuple[PastAction, ...] = ()
        withheld: str | None = None
        """Why no LR change is offered (the evidence on the LR conflicts)."""

    @dataclass
    class ActionAnswered(Message):
        """The training applied a live action (``ok``) or refused it; ``text`` says what happened."""

        ok: bool
        text: str

    @dataclass
    class JobPrepared(Message):
        """What the confirmation of ``job`` on run ``key`` shows, read from the run's manifest
        (``problem``: why the job cannot run)."""

        job: str
        key: str
        factory: str
        where: str | None
        problem: str | None = None

    @dataclass
    class WatchStarted(Message):
        """The file watcher started (``watching``) or could not (``error`` says why)."""

        watching: bool
        error: str | None

    @dataclass
    class JobFinished(Message):
        """The running job ended: the notification's ``severity`` and ``text`` (its verdict, or why it did not finish)."""

        severity: str
        text: str

    @dataclass
    class CompareReady(Message):
        """The compare screen's data: charts, table and verdicts."""

        view: CompareView

    def __init__(self, root: Path | str, replay: bool = False, poll: bool = False, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        root = self.root = Path(root)  # a string path too, as a script passes one
        self.replay = replay
        self.force_poll = poll
        self.root_is_run = kind_of(root) is not None  # the root is one run (of any kind): open it
        """Whether ``root`` is itself a run (then its run view opens at once); read before the event loop runs."""
        self.model = RunsModel(root, clock, on_late=self._read_late)
        self.watcher = RunWatcher(root, lambda dirs: self.post_message(self.FilesChanged(set(dirs))))
        self.watching = False
        self.summaries: list[RunSummary] = []
        self._pending: set[Path] = set()
        self._flush_timer = None
        self._last_refresh = 0.0
        self._refresh_cost, self._cpu_mark = 0.0, time.process_time()
        """Recent CPU seconds per refresh (the worker's reading, the UI thread's widget updates), smoothed."""
        self._poll_timer = None
        self._poll_period = FAST_POLL
        self._full_refresh = -math.inf
        """When the last refresh of every run was asked for (``time.monotonic()``): a poll due soon after is skipped."""
        self._steps: dict[str, int | None] = {}
        self._event_times: dict[str, float] = {}
        """When a file event last arrived for each run (``time.monotonic()``)."""
        self.job: JobTracker | None = None
        """The job this monitor started and follows (one at a time)."""
        self._job_process: subprocess.Popen[str] | None = None
        self._job_timer: Timer | None = None

    def on_mount(self) -> None:
        self.model.hold_diagnoses(FIRST_DRAW_GRACE)
        if self.root_is_run:  # its run view at once; the overview below it is built when it is left (overview_below)
            self.push_screen(RunScreen(str(self.root), replay=self.replay))
        else:
            self.push_screen(OverviewScreen())
        self._set_poll(FAST_POLL)  # until the watcher has started
        if not self.force_poll and not self.replay:
            self.start_watching()
        self.request_refresh(None)

    @work(thread=True, exclusive=True, group="watch", exit_on_error=False)
    def start_watching(self) -> None:
        """Worker: start the file watcher (it walks the tree to watch every directory)."""
        if self.root.is_dir():
            watching = self.watcher.start()
            if watching or self.watcher.error:  # neither: the app closed meanwhile
                self.post_message(self.WatchStarted(watching, self.watcher.error))

    def on_tuidiag_app_watch_started(self, message: WatchStarted) -> None:
        self.watching = message.watching
        if not message.watching:
            self.notify(message.error or "file watching unavailable; polling", severity="warning", markup=False)
            return
        self._set_poll(SLOW_POLL)

    def on_unmount(self) -> None:
        self.watcher.stop()
        self.model.close()
        if self._job_process is not None and self._job_process.poll() is None:  # a factory job dies with its monitor
            self._job_process.terminate()

    def _set_poll(self, seconds: float) -> None:
        if self._poll_timer is not None:
            self._poll_timer.stop()
        self._poll_period = seconds
        self._poll_timer = self.set_interval(seconds, self._poll)

    def _poll(self) -> None:
        """Read every run (writes that sent no file event, runs whose read failed), unless a refresh of every run came
        within half a poll period or one of file events is on its way (:meth:`_flush_pending` then reads every run)."""
        if self._flush_timer is None and time.monotonic() - self._full_refresh >= self._poll_period / 2:
            self.request_refresh(None)

    # ---- data path -------------------------------------------------------------
    def on_tuidiag_app_files_changed(self, message: FilesChanged) -> None:
        self._pending |= message.dirs
        now = time.monotonic()
        self._event_times.update((str(d), now) for d in message.dirs)
        if self._flush_timer is None:
            self._flush_timer = self.set_timer(self._refresh_delay(now), self._flush_pending)

    def _refresh_delay(self, now: float) -> float:
        """Seconds until the next refresh: at once for one busy run; for several, spaced to the CPU budget (at most SLOW_POLL)."""
        busy = sum(1 for seen in self._event_times.values() if now - seen < BUSY_WINDOW)
        if busy <= 1:
            return COALESCE
        return min(SLOW_POLL, max(COALESCE, self._last_refresh + max(REFRESH_PERIOD, self._refresh_cost / REFRESH_BUDGET) - now))

    def _flush_pending(self) -> None:
        """Refresh the runs that had file events; every run when the last refresh of every run is half a poll period
        old (the poll is then skipped: with many busy runs the two came together, each rebuilding the open run's view)."""
        self._flush_timer = None
        dirs, self._pending = self._pending, set()
        due = time.monotonic() - self._full_refresh >= self._poll_period / 2
        self.request_refresh(None if due else dirs)

    def request_refresh(self, dirs: set[Path] | None) -> None:
        """Start a refresh worker for ``dirs`` (None: all), with the open run's key and cursor."""
        if not self.screen_stack:  # starting up or shutting down
            return
        screen = self.screen
        key, at, window = (screen.key, screen.at, screen.window) if isinstance(screen, RunScreen) else (None, None, None)
        points = screen.chart_points() if isinstance(screen, RunScreen) else 400
        dist = screen.dist if isinstance(screen, RunScreen) else None
        self._last_refresh = time.monotonic()
        if dirs is None:
            self._full_refresh = self._last_refresh
        self.refresh_runs(dirs, key, at, window, points, dist)

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def refresh_runs(self, dirs: set[Path] | None, key: str | None, at: int | None, window: tuple[int, int] | None = None,
                     points: int = 400, dist: str | None = None) -> None:
        """Worker: discover runs, read what is new, rebuild the open run's view (over ``window``: a zoom; ``points``
        per chart line: its width; ``dist``: the distribution its distribution chart shows)."""
        new = self.model.discover() if dirs is None or not self.model.knows(dirs) else []
        summaries = self.model.refresh(None if new or dirs is None else dirs, wait=READ_WAIT)
        detail = self.model.detail(key, at, points=points, wait=READ_WAIT, window=window, dist=dist) if key else None
        self.post_message(self.RunsRefreshed(summaries, detail))

    def _read_late(self, path: Path) -> None:
        """A run's read or diagnosis ended after its refresh (reading thread): show it now, reading nothing (queued ones merge)."""
        self.post_message(self.RunsRefreshed(self.model.summaries(), None, late=True, runs=frozenset({str(path)})))

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def load_detail(self, key: str, at: int | None, window: tuple[int, int] | None = None, points: int = 400,
                    dist: str | None = None) -> None:
        """Worker: the run view as of ``at``, its charts over ``window`` (a zoom; None: all steps), its
        distribution chart of ``dist`` (None: the run's first)."""
        detail = self.model.detail(key, at, points=points, window=window, dist=dist)
        if detail is not None:
            self.post_message(self.DetailReady(detail))

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def load_compare(self, keys: tuple[str, ...]) -> None:
        """Worker: overlay charts of ``keys``, and the first run compared with each later one."""
        self.post_message(self.CompareReady(self.model.compare(keys)))

    def on_tuidiag_app_runs_refreshed(self, message: RunsRefreshed) -> None:
        self._show_refresh(message)
        if not message.late:  # a late one's CPU (a diagnosis that ended after its refresh) counts with the next refresh's
            cpu = time.process_time()  # all threads since the last refresh: reading, widgets, rendering, watcher
            cost, self._cpu_mark = cpu - self._cpu_mark, cpu
            self._refresh_cost = 0.7 * self._refresh_cost + 0.3 * cost

    def _show_refresh(self, message: RunsRefreshed) -> None:
        self.summaries = message.summaries
        read = [s for s in message.summaries if s.status != STATUS_READING]  # a run still being read has no step yet
        self._check_watcher({s.key for s in read if self._steps.get(s.key, s.step) != s.step})
        self._steps = {s.key: s.step for s in read}
        for screen in self.screen_stack:
            if isinstance(screen, OverviewScreen):
                screen.show(message.summaries, str(self.root))
        if message.detail is not None:
            self._show_detail(message.detail)
        top = self._top_screen()
        if message.late and isinstance(top, RunScreen) and top.key in message.runs:
            self.load_detail(top.key, top.at, top.window, top.chart_points(), top.dist)

    def _top_screen(self) -> object:
        """The active screen, or None while the app starts or shuts down (messages still arrive then)."""
        return self.screen_stack[-1] if self.screen_stack else None

    def _show_detail(self, detail: RunDetail) -> None:
        top = self._top_screen()
        if isinstance(top, RunScreen) and top.key == detail.summary.key:
            top.show(detail)

    def _check_watcher(self, grew: set[str]) -> None:
        """Runs grew without a file event: the watcher misses writes here (network FS); poll fast."""
        now = time.monotonic()  # a refresh may read a shard before its event is handled: allow some seconds
        unseen = {key for key in grew if now - self._event_times.get(key, -math.inf) > EVENT_GRACE}
        if self.watching and unseen and self._steps:
            self.watching = False
            self._set_poll(FAST_POLL)
            self.notify("file events are not arriving (network filesystem?): polling every second", severity="warning")

    def on_tuidiag_app_detail_ready(self, message: DetailReady) -> None:
        self._show_detail(message.detail)

    def on_tuidiag_app_compare_ready(self, message: CompareReady) -> None:
        top = self._top_screen()
        if isinstance(top, CompareScreen):
            top.show(message.view)

    # ---- navigation --------------------------------------------------------------
    def on_overview_screen_run_chosen(self, message: OverviewScreen.RunChosen) -> None:
        self.open_run(message.key)

    def overview_below(self) -> bool:
        """Put the overview in place of the run view opened at start (the root is one run) when none is below it;
        whether it did. Built then, not at start, where its table and styles cost the run view's first frame."""
        if not self.root_is_run or any(isinstance(screen, OverviewScreen) for screen in self.screen_stack):
            return False
        overview = OverviewScreen()
        overview.show(self.summaries, str(self.root))  # kept until it is mounted
        self.switch_screen(overview)
        return True

    def open_run(self, key: str) -> None:
        """Show the run view of ``key`` (from the overview or the command palette)."""
        if isinstance(self.screen, RunScreen):
            self.overview_below()
        while isinstance(self.screen, (RunScreen, CompareScreen)) and len(self.screen_stack) > 2:
            self.pop_screen()
        screen = RunScreen(key, replay=self.replay)
        self.push_screen(screen)
        screen.show_job(self._job_view(key))
        self.load_detail(key, None, None, screen.chart_points())

    def on_overview_screen_compare_chosen(self, message: OverviewScreen.CompareChosen) -> None:
        self.push_screen(CompareScreen(message.keys, message.names))
        self.load_compare(message.keys)

    def on_run_screen_cursor_moved(self, message: RunScreen.CursorMoved) -> None:
        screen = self._top_screen()
        if isinstance(screen, RunScreen):
            self.load_detail(message.key, message.at, screen.window, screen.chart_points(), screen.dist)

    def on_run_screen_zoom_changed(self, message: RunScreen.ZoomChanged) -> None:
        screen = self._top_screen()
        if isinstance(screen, RunScreen):
            self.load_detail(message.key, screen.at, message.window, screen.chart_points(), screen.dist)

    def on_run_screen_distribution_changed(self, message: RunScreen.DistributionChanged) -> None:
        screen = self._top_screen()
        if isinstance(screen, RunScreen):
            self.load_detail(message.key, screen.at, screen.window, screen.chart_points(), message.dist)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_reload(self) -> None:
        self.request_refresh(None)
        self.notify("re-reading all runs")
