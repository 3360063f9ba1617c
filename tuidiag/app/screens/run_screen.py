"""The run view: charts, per-layer gradients, the diagnosis, events, system strip, replay cursor.

Its chart settings are :class:`~tuidiag.app.screens.run_chart_views.RunChartViews`, its replay cursor, jumps and zoom
:class:`~tuidiag.app.screens.run_navigation.RunNavigation`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane

from tuidiag import job_kinds
from tuidiag.app.run_tabs import CHART_IDS, RUN_TABS, SCROLLING_TABS, ScrollingPane, bindings, tab_bindings, tab_title
from tuidiag.app.screens.event_detail import EventDetailScreen
from tuidiag.app.screens.run_chart_views import DEFAULT_SMOOTHING, RunChartViews
from tuidiag.app.screens.run_charts_ahead import RunChartsAhead
from tuidiag.app.screens.run_navigation import RunNavigation
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.app.widgets.chart_drawing import ChartDrawing
from tuidiag.app.widgets.diagnosis_panel import DiagnosisPanel
from tuidiag.app.widgets.events_panel import EventsPanel
from tuidiag.app.widgets.job_bar import JobBar
from tuidiag.app.widgets.layers import LayerHeatmap
from tuidiag.app.widgets.steady_footer import SteadyFooter
from tuidiag.viewmodel.distributions import DIST_CHART
from tuidiag.viewmodel.job_progress import JobView
from tuidiag.viewmodel.jobs_view import jobs_text
from tuidiag.viewmodel.snapshot import RunDetail
from tuidiag.text.safe import clean, literal
from tuidiag.viewmodel.header_fit import ELLIPSIS, elide, fit_figures, title_name_width
from tuidiag.monitor_keys import CANCEL_KEY, RUN_VIEW_KEYS

NARROW = 110
FIRST_TAB = RUN_TABS[0].id
"""The tab the view opens on; the other tabs' panes are composed when first shown (:meth:`RunScreen._fill`)."""
_TABS_AFTER = next(i for i, key in enumerate(RUN_VIEW_KEYS) if key.action == "toggle_log") + 1
_JOBS_AFTER = next(i for i, key in enumerate(RUN_VIEW_KEYS) if key.action == "goto('end')") + 1
"""Help lists the tab keys after back, diagnosis and log y, and the job keys after the replay keys."""


class RunScreen(RunNavigation, RunChartViews, RunChartsAhead, Screen):
    """One run, live or replayed; ``show(detail)`` redraws it."""

    BINDINGS = [
        *bindings(RUN_VIEW_KEYS[:_TABS_AFTER]),
        *tab_bindings(),
        *bindings(RUN_VIEW_KEYS[_TABS_AFTER:_JOBS_AFTER]),
        *[Binding(kind.key, f"job('{kind.name}')", kind.label, show=False, tooltip=kind.help) for kind in job_kinds.kinds()],
        *bindings(RUN_VIEW_KEYS[_JOBS_AFTER:]),
    ]

    @dataclass
    class CursorMoved(Message):
        """The replay cursor moved: the app recomputes the view as of ``at`` (None: live)."""

        key: str
        at: int | None

    @dataclass
    class ZoomChanged(Message):
        """The charts show steps ``window`` (inclusive; None: the whole run): the app reads that range."""

        key: str
        window: tuple[int, int] | None

    @dataclass
    class DistributionChanged(Message):
        """The distribution chart is to show distribution ``dist``: the app reads its rows."""

        key: str
        dist: str | None

    @dataclass
    class JobRequested(Message):
        """The user asked for ``job`` on run ``key`` (the app confirms, then runs it)."""

        key: str
        job: str

    @dataclass
    class ActionRequested(Message):
        """The user wants to apply a change (LR, clipping, checkpoint) to run ``key``'s live training."""

        key: str

    def __init__(self, key: str, replay: bool = False) -> None:
        super().__init__()
        self.key = key
        self.replay = replay
        self.at: int | None = None
        self.detail: RunDetail | None = None
        self.speed_index = 2
        self.playing = False
        self.marker: int | None = None
        self._finding_index = -1
        self.rank_mode = 0
        """Index into ``rank_modes``: the default chart, all ranks, the spread, one rank."""
        self.window: tuple[int, int] | None = None
        """The steps the charts show (None: all); ``z`` then left/right narrows it, ``Z`` resets it."""
        self.zooming = False
        self.job: JobView | None = None
        """The progress of the job the monitor runs on this run (None: none)."""
        self.job_failure: str | None = None
        """Why the last job started for this run failed (its notification's text); shown atop the Jobs tab."""
        for kind in job_kinds.kinds():  # a job kind registered after this class was defined gets its key too
            if kind.key not in self._bindings.key_to_bindings:
                self._bindings.bind(kind.key, f"job('{kind.name}')", kind.label, show=kind.shown)
        self.smoothing = DEFAULT_SMOOTHING
        """EMA weight of the smoothed charts (0: raw)."""
        self.time_axis = False
        """Whether the charts' x axis is the wall-clock time since the first step instead of the step."""
        self.cursor: int | None = None
        """The chart cursor's step (None: hidden); every chart marks it and reads out its series there."""
        self._texts: dict[str, Text] = {}
        """What each one-line ``Static`` shows (:meth:`_update`)."""
        self._toasts: dict[str, float] = {}
        """When each message of :meth:`_notify_once` was last shown (``time.monotonic()``)."""
        self.dist: str | None = None
        """The distribution the distribution tab shows (None: the run's first); ``h``/``H`` cycle it."""
        self.filled: set[str] = set()
        """The tabs whose panes are composed (:meth:`_fill`): the first one on mount, and each one shown since."""
        self._ahead: dict[str, ChartDrawing] = {}
        self._ahead_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="run-title")
        yield Static(id="system-strip")
        with Horizontal(id="run-main"):
            with TabbedContent(id="charts", initial=FIRST_TAB):
                for tab in RUN_TABS:  # its widgets come when it is first shown (_fill)
                    yield (ScrollingPane if tab.id in SCROLLING_TABS else TabPane)(tab_title(tab), id=tab.id)
            yield DiagnosisPanel(id="diagnosis")
        yield JobBar(CANCEL_KEY, id="job-bar")
        yield Static(id="cursor-bar")
        yield SteadyFooter(compact=True)

    def _pane(self, tab_id: str) -> list[Widget]:
        """What the pane of tab ``tab_id`` holds."""
        if tab_id == DIST_CHART:  # a run without distributions says how to record them, in place of a chart
            return [Static(id="dist-note"), MetricChart(id=f"chart-{tab_id}")]
        if tab_id in CHART_IDS:
            return [MetricChart(id=f"chart-{tab_id}")]
        if tab_id == "layers":
            return [LayerHeatmap(id="layer-grid")]
        if tab_id == "events-tab":
            return [EventsPanel(id="events")]
        if tab_id == "jobs-tab":  # sentences wrap to the pane (which scrolls); charts are drawn as they are
            return [Static(self._jobs_content(), id="jobs-text")]
        raise ValueError(f"no pane for the run view's tab {tab_id!r} (tuidiag.app.run_tabs)")

    def _fill(self, tab_id: str) -> None:
        """Compose the pane of tab ``tab_id`` if it was not yet, and draw it from the current data. Only the first
        tab's pane is composed when the view is mounted: mounting and styling every tab's widgets held up the first
        frame of a large run by a sixth (its reader waits for the UI thread), and most views are left before every
        tab is seen."""
        if tab_id in self.filled:
            return
        self.filled.add(tab_id)
        self.query_one(f"#{tab_id}", TabPane).mount(*self._pane(tab_id))  # in the DOM now: queries find them at once
        if self.detail is not None:
            self._draw_pane(tab_id, self.detail)
            if tab_id in CHART_IDS:
                self._chart_views()  # its smoothing, x axis and cursor
                self._adopt_ahead(tab_id)

    def on_tabbed_content_tab_activated(self, message: TabbedContent.TabActivated) -> None:
        """A tab shown (by its key, or by a click on the tab bar: its pane is composed as by its key)."""
        if message.pane.id is not None:
            self._fill(message.pane.id)
            self._plan_ahead()

    def on_mount(self) -> None:
        self._fill(FIRST_TAB)
        self.query_one("#cursor-bar", Static).display = self.replay
        self._apply_width(self.app.size.width)
        if self.replay:
            self.set_interval(0.25, self._tick)
        if self.detail is not None:  # a refresh that came before the widgets did
            self.show(self.detail)
        self.show_job(self.job)

    def on_resize(self) -> None:
        self._apply_width(self.size.width)
        self._plan_ahead()
        if self.detail is not None:  # the header's name and figures fit the new width
            try:
                self._title(self.detail)
            except NoMatches:
                pass

    def _apply_width(self, width: int) -> None:
        """Side-by-side on wide terminals; diagnosis under the charts on narrow ones."""
        self.set_class(width < NARROW, "narrow")

    def show(self, detail: RunDetail) -> None:
        """Redraw everything from ``detail`` (kept for ``on_mount`` while the widgets are not there yet)."""
        self.detail = detail
        try:
            self.query_one("#run-title", Static)
        except NoMatches:  # a refresh before compose finished, or during teardown: on_mount draws it
            return
        self._title(detail)
        self._show_charts(detail)
        for tab_id in self.filled - CHART_IDS:
            self._draw_pane(tab_id, detail)
        self.query_one("#diagnosis", DiagnosisPanel).show(detail.diagnosis, detail.at, detail.first_steps, detail.summary.status)
        self._cursor_bar()

    def _draw_pane(self, tab_id: str, detail: RunDetail) -> None:
        """Draw the (composed) pane of tab ``tab_id`` from ``detail``."""
        if tab_id in CHART_IDS:
            self._show_chart(tab_id, detail)
        elif tab_id == "layers":
            self.query_one("#layer-grid", LayerHeatmap).show(detail.layers, detail.summary.source)
        elif tab_id == "events-tab":
            self.query_one("#events", EventsPanel).show(detail.events)
        elif tab_id == "jobs-tab":
            self._show_jobs_text()

    def show_job_failure(self, text: str | None) -> None:
        """Keep why the last job started from this view failed (``None``: it did not) at the top of the Jobs tab: the
        notification that said so is gone after a few seconds."""
        self.job_failure = text
        if self.detail is not None:
            self._show_jobs_text()

    def _show_jobs_text(self) -> None:
        """The Jobs tab: the last failure (if any), then every job's result; redrawn only when one of them changed
        (nothing to do before the tab is first shown: it is drawn then)."""
        assert self.detail is not None
        if "jobs-tab" not in self.filled:
            return
        if (self.detail.jobs, self.job_failure) != getattr(self, "_jobs_shown", None):
            self.query_one("#jobs-text", Static).update(self._jobs_content())

    def _jobs_content(self) -> Group | Text:
        """What the Jobs tab shows now (nothing before the view has data): the last failure, then every result."""
        if self.detail is None:
            return Text("")
        self._jobs_shown = (self.detail.jobs, self.job_failure)
        results = jobs_text(self.detail.jobs)
        failure = self.job_failure
        return Group(literal(f"Last job: {failure}", "bold red"), Text(""), results) if failure else results

    def show_job(self, view: JobView | None) -> None:
        """Show the progress of this run's job (None: no job); kept for ``on_mount``."""
        self.job = view
        try:
            self.query_one("#job-bar", JobBar).show(view)
        except NoMatches:  # not composed yet: on_mount shows it
            return

    def _width(self) -> int:
        return self.size.width or self.app.size.width

    def _title(self, detail: RunDetail) -> None:
        """``name | status | step N``: the name elided where the line is narrow, the step never cut short."""
        s = detail.summary
        rest = Text(f" | {s.status} | step {s.step_text(grouped=False)}", style="bold")
        if s.recorder_losses:
            rest.append_text(literal(f" | {s.recorder_losses}", "bold yellow"))
        if self.replay:
            rest.append(f"  REPLAY at step {detail.diagnosis.step}", style="bold magenta")
        name = clean(s.name, 60)
        title = Text(" ")
        title.append_text(literal(elide(name, title_name_width(name, rest.plain, self._width() - 1)), "bold"))
        title.append_text(rest)
        self._update("#run-title", title, layout=False)
        self._update("#system-strip", _system(detail, self._width()), layout=False)

    def _update(self, selector: str, text: Text, layout: bool = True) -> None:
        """Show ``text`` in the ``Static`` at ``selector`` unless it shows it already (a refresh that changed
        nothing there repaints nothing). ``layout=False`` for a line whose size its text never changes (the title's
        step, say): only the line is repainted, the screen is not laid out and drawn again whole."""
        if self._texts.get(selector) != text:
            self._texts[selector] = text
            self.query_one(selector, Static).update(text, layout=layout)

    def action_back(self) -> None:
        if self.has_class("diagnosis-full"):
            self.action_toggle_diagnosis()
            return
        if self.cursor is not None:  # esc first hides the chart cursor, then leaves
            self.cursor = None
            self._chart_views()
            return
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        elif not getattr(self.app, "overview_below", lambda: False)():  # the run view opened at start: its overview
            self.app.exit()

    def action_toggle_diagnosis(self) -> None:
        """The diagnosis full height and scrollable, with every evidence line, in place of the charts; again: back."""
        full = not self.has_class("diagnosis-full")
        self.set_class(full, "diagnosis-full")
        panel = self.query_one("#diagnosis", DiagnosisPanel)
        panel.set_full(full)
        if full:
            self._focus_before = self.focused
            self.set_focus(panel)  # at once: the arrow and page keys typed next scroll it
        else:
            before = getattr(self, "_focus_before", None)
            self.set_focus(before if before is not None and before.is_attached else None)

    def action_tab(self, tab: str) -> None:
        if self.has_class("diagnosis-full"):
            self.action_toggle_diagnosis()
        tabs = self.query_one("#charts", TabbedContent)
        self._fill(tab)
        tabs.active = tab  # its TabActivated plans the drawings ahead, as a click's does
        _underline_at_once(tabs, tab)
        pane = self.query_one(f"#{tab}", TabPane)
        target = next((widget for widget in pane.query("*") if widget.can_focus), pane if pane.can_focus else None)
        if target is not None:  # the events table, the jobs pane: their keys work at once
            self.set_focus(target)

    def chart_points(self) -> int:
        """Points a chart line needs: one min/max bucket (two points) per cell of the chart's width."""
        try:
            width = self.query_one("#chart-loss", MetricChart).size.width
        except NoMatches:
            width = 0
        return 2 * max(40, width or (3 * self.app.size.width) // 5)

    def action_job(self, job: str) -> None:
        self.post_message(self.JobRequested(self.key, job))

    def action_live_action(self) -> None:
        self.post_message(self.ActionRequested(self.key))

    def on_events_panel_event_chosen(self, message: EventsPanel.EventChosen) -> None:
        self._jump_to(message.event.step)
        self.app.push_screen(EventDetailScreen(message.event))


def _underline_at_once(tabs: TabbedContent, tab: str) -> None:
    """Put the tab bar's underline under ``tab`` in the frame that shows its pane. Textual moves it a refresh later
    (sliding it for 0.3 s when animations are on), so the switch took two frames, 30-50 ms apart; the tabs keep their
    places, so where it goes is known now."""
    try:
        title = tabs.get_tab(tab)
        underline = tabs.query_one("Underline")
    except (NoMatches, ValueError):
        return
    start, end = title.virtual_region.shrink(title.styles.gutter).column_span
    if end > start:  # laid out already (not before the first frame)
        underline.highlight_start, underline.highlight_end = start, end  # type: ignore[attr-defined]


def _system(detail: RunDetail, width: int) -> Text:
    """The system strip: the figures that fit whole in ``width`` cells, then ``…`` where some were left out."""
    strip = Text(" ")
    figures = tuple(detail.system or (("system", "no timing recorded"),))
    warnings = (f"{len(detail.summary.warnings)}", "file warnings") if detail.summary.warnings else None
    shown, cut = fit_figures(figures + ((warnings,) if warnings else ()), width - 1)
    for label, value in shown:
        if (label, value) == warnings:
            strip.append(f"{label} {value}", style="yellow")
            continue
        strip.append(f"{label} ", style="dim")
        strip.append(f"{value}   ", style="bold")
    if cut:
        strip.append(ELLIPSIS, style="dim")
    return strip
