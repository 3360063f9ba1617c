"""The run view: charts, per-layer gradients, the diagnosis, events, system strip, replay cursor."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from tuidiag.app.widgets.chart import MetricChart
from tuidiag.app.widgets.diagnosis_panel import DiagnosisPanel
from tuidiag.app.widgets.events_panel import EventsPanel
from tuidiag.app.widgets.layers import LayerHeatmap
from tuidiag.viewmodel.jobs_view import jobs_text
from tuidiag.viewmodel.ranks import DEFAULT, chart_for_mode, rank_modes
from tuidiag.viewmodel.snapshot import RunDetail
from tuidiag.text.safe import literal

CHART_TABS = (("loss", "Loss", "1"), ("grad", "Grad norm", "2"), ("lr", "LR", "3"), ("update", "Update ratio", "4"))
SPEEDS = (1, 2, 5, 10, 25, 100)
NARROW = 110


class RunScreen(Screen):
    """One run, live or replayed; ``show(detail)`` redraws it."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("g", "toggle_log", "Log y"),
        *[Binding(key, f"tab('{tab}')", label, show=False) for tab, label, key in CHART_TABS],
        Binding("5", "tab('layers')", "Layers", show=False),
        Binding("6", "tab('events-tab')", "Events", show=False),
        Binding("f", "next_finding", "Finding"),
        Binding("space", "play", "Play/pause", show=False),
        Binding("left", "step(-1)", "Back", show=False, priority=True),
        Binding("right", "step(1)", "Fwd", show=False, priority=True),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False),
        Binding("minus", "speed(-1)", "Slower", show=False),
        Binding("right_square_bracket", "jump(1)", "Next event"),
        Binding("left_square_bracket", "jump(-1)", "Prev event", show=False),
        Binding("home", "goto('start')", "Start", show=False),
        Binding("end", "goto('end')", "End/live", show=False),
        Binding("7", "tab('jobs-tab')", "Jobs", show=False),
        Binding("l", "job('lr_find')", "LR finder"),
        Binding("n", "job('nan_hunt')", "NaN hunt"),
        Binding("o", "job('overfit_batch')", "Overfit", show=False),
        Binding("s", "job('sharpness')", "Sharpness", show=False),
        Binding("x", "app.cancel_job", "Cancel job", show=False),
        Binding("a", "live_action", "Apply fix", show=False),
        Binding("k", "rank_mode", "Ranks", show=False),
    ]

    @dataclass
    class CursorMoved(Message):
        """The replay cursor moved: the app recomputes the view as of ``at`` (None: live)."""

        key: str
        at: int | None

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

    def compose(self) -> ComposeResult:
        yield Static(id="run-title")
        yield Static(id="system-strip")
        with Horizontal(id="run-main"):
            with TabbedContent(id="charts", initial="loss"):
                for tab, label, key in CHART_TABS:
                    with TabPane(f"{label} [{key}]", id=tab):
                        yield MetricChart(id=f"chart-{tab}")
                with TabPane("Layers [5]", id="layers"):
                    yield LayerHeatmap(id="layer-grid")
                with TabPane("Events [6]", id="events-tab"):
                    yield EventsPanel(id="events")
                with TabPane("Jobs [7]", id="jobs-tab"):
                    with ScrollableContainer(id="jobs-scroll"):  # charts keep their width: scroll, never wrap
                        yield Static(id="jobs-text")
            yield DiagnosisPanel(id="diagnosis")
        yield Static(id="cursor-bar")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#cursor-bar", Static).display = self.replay
        self._apply_width(self.app.size.width)
        if self.replay:
            self.set_interval(0.25, self._tick)
        if self.detail is not None:  # a refresh that came before the widgets did
            self.show(self.detail)

    def on_resize(self) -> None:
        self._apply_width(self.size.width)

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
        self.query_one("#layer-grid", LayerHeatmap).show(detail.layers, detail.summary.source)
        self.query_one("#diagnosis", DiagnosisPanel).show(detail.diagnosis, detail.at, detail.first_steps, detail.summary.status)
        self.query_one("#events", EventsPanel).show(detail.events)
        if detail.jobs != getattr(self, "_jobs_shown", None):
            self._jobs_shown = detail.jobs
            self.query_one("#jobs-text", Static).update(jobs_text(detail.jobs))
        self.query_one("#system-strip", Static).update(_system(detail))
        self._cursor_bar()

    def _show_charts(self, detail: RunDetail) -> None:
        modes = rank_modes(detail.ranks.ranks) if detail.ranks else (DEFAULT,)
        mode = modes[self.rank_mode % len(modes)]
        for tab, _, _ in CHART_TABS:
            chart = chart_for_mode(detail.charts[tab], detail.ranks, tab, mode)
            self.query_one(f"#chart-{tab}", MetricChart).show(chart, self._marker())

    def action_rank_mode(self) -> None:
        """Cycle the loss and grad-norm charts of a multi-rank run: default, all ranks, spread, each rank."""
        if self.detail is None or self.detail.ranks is None:
            self.notify("one rank only: nothing to switch")
            return
        self.rank_mode = (self.rank_mode + 1) % len(rank_modes(self.detail.ranks.ranks))
        self._show_charts(self.detail)

    def _marker(self) -> int | None:
        return self.at if self.replay and self.at is not None else self.marker

    def _title(self, detail: RunDetail) -> None:
        s = detail.summary
        title = Text(" ")
        title.append_text(literal(s.name, "bold", 60))
        title.append(f" | {s.status} | step {s.step if s.step is not None else '-'}", style="bold")
        if s.recorder_losses:
            title.append_text(literal(f" | {s.recorder_losses}", "bold yellow"))
        if self.replay:
            title.append(f"  REPLAY at step {detail.diagnosis.step}", style="bold magenta")
        self.query_one("#run-title", Static).update(title)

    def _cursor_bar(self) -> None:
        if not self.replay or self.detail is None:
            return
        first, last = self.detail.steps
        at = self.at if self.at is not None else last
        width = max(10, self.size.width - 40)
        filled = int(width * (at - first) / max(1, last - first))
        bar = Text(f" {'playing' if self.playing else 'paused '} x{SPEEDS[self.speed_index]}  ", style="bold")
        bar.append("=" * filled, style="magenta")
        bar.append("-" * (width - filled), style="dim")
        bar.append(f"  {at}/{last}")
        self.query_one("#cursor-bar", Static).update(bar)

    def _move(self, at: int | None) -> None:
        if self.detail is not None and at is not None:
            first, last = self.detail.steps
            at = max(first, min(last, at))
        self.at = at
        self._cursor_bar()
        self.post_message(self.CursorMoved(self.key, at))

    def _tick(self) -> None:
        if self.playing and self.detail is not None:
            first, last = self.detail.steps
            at = (self.at if self.at is not None else first) + max(1, (last - first) * SPEEDS[self.speed_index] // 400)
            if at >= last:
                self.playing = False
            self._move(min(at, last))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.app.exit()

    def action_toggle_log(self) -> None:
        active = self.query_one("#charts", TabbedContent).active
        if active in dict((t, 0) for t, _, _ in CHART_TABS):
            self.query_one(f"#chart-{active}", MetricChart).toggle_log()

    def action_tab(self, tab: str) -> None:
        self.query_one("#charts", TabbedContent).active = tab

    def action_play(self) -> None:
        if not self.replay:
            self.notify("replay a finished run with: tuidiag replay RUN")
            return
        self.playing = not self.playing
        if self.playing and self.detail is not None and (self.at or 0) >= self.detail.steps[1]:
            self.at = self.detail.steps[0]
        self._cursor_bar()

    def action_step(self, direction: int) -> None:
        if self.detail is None or not self.replay:
            return
        first, last = self.detail.steps
        self._move((self.at if self.at is not None else last) + direction * max(1, (last - first) // 100))

    def action_speed(self, change: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + change))
        self._cursor_bar()

    def action_goto(self, where: str) -> None:
        if self.detail is not None:
            self._move(self.detail.steps[0] if where == "start" else None if not self.replay else self.detail.steps[1])

    def action_jump(self, direction: int) -> None:
        """Move to the next/previous step where an event or a finding starts."""
        if self.detail is None:
            return
        marks = self.detail.marks
        here = self._marker() if self._marker() is not None else (self.detail.steps[0] - 1 if direction > 0 else self.detail.steps[1] + 1)
        candidates = [m for m in marks if (m > here if direction > 0 else m < here)]
        if not candidates:
            self.notify("no more events or findings that way")
            return
        self._jump_to(candidates[0] if direction > 0 else candidates[-1])

    def action_next_finding(self) -> None:
        if self.detail is None or not self.detail.first_steps:
            self.notify("no finding with a first step yet")
            return
        items = sorted(self.detail.first_steps.items(), key=lambda kv: kv[1])
        self._finding_index = (self._finding_index + 1) % len(items)
        code, step = items[self._finding_index]
        self.notify(f"{code} first held at step {step}")
        self._jump_to(step)

    def _jump_to(self, step: int) -> None:
        if self.replay:
            self._move(step)
        else:
            self.marker = step
            if self.detail is not None:
                self.show(self.detail)

    def action_job(self, job: str) -> None:
        self.post_message(self.JobRequested(self.key, job))

    def action_live_action(self) -> None:
        self.post_message(self.ActionRequested(self.key))

    def on_events_panel_step_chosen(self, message: EventsPanel.StepChosen) -> None:
        self._jump_to(message.step)


def _system(detail: RunDetail) -> Text:
    strip = Text(" ")
    figures = detail.system or (("system", "no timing recorded"),)
    for label, value in figures:
        strip.append(f"{label} ", style="dim")
        strip.append(f"{value}   ", style="bold")
    if detail.summary.warnings:
        strip.append(f"{len(detail.summary.warnings)} file warnings", style="yellow")
    return strip
