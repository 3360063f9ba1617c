"""Every key does what help says: help is generated from the bindings, the tabs come from one registry,
``d`` shows the whole diagnosis, events wrap and open whole, and no label is cut at 80 to 200 columns (Pilot)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from textual.app import App
from textual.binding import Binding
from textual.widgets import DataTable, Static, TabbedContent, TabPane, Tabs
from textual.widgets._footer import FooterKey

import tuidiag
import tuidiag.app
from tests.app_helpers import DEMO_RUNS, fixed_clock, settled, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.run_tabs import RUN_TABS, tab_title
from tuidiag.app.screens.compare import CompareScreen
from tuidiag.app.screens.event_detail import EventDetailScreen
from tuidiag.app.screens.help import KEYS_WIDTH, SECTIONS, WIDTH, HelpScreen, as_binding, help_text, key_display
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.app.screens.run_screen import NARROW, RunScreen
from tuidiag.app.widgets.diagnosis_panel import PANEL_EVIDENCE, DiagnosisPanel
from tuidiag.app.widgets.events_panel import MESSAGE_SHOWN, EventsPanel
from tuidiag.diagnosis.codes import CODES, SHORT_MAX, badge
from tuidiag.text.numbers import confidence
from tuidiag.text.safe import clean
from tuidiag.viewmodel.snapshot import RunSummary

WIDTHS = (80, 100, 120, 200)
"""Terminal widths at which no label may be cut."""
LONG_EVENT = ("first non-finite gradient at step 7; [bold red]not markup[/] non-finite gradients in "
              + ", ".join(f"blocks.{i}.attn.weight" for i in range(30)))


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short runs; the first has one event far longer than any screen is wide (brackets and all)."""
    root = tmp_path_factory.mktemp("keys")
    for name in ("small", "other"):
        with tuidiag.Recorder(root / name, flush_interval=0.05) as rec:
            for step in range(20):
                rec.step(1.0 / (step + 1))
            if name == "small":
                rec.event("nonfinite", LONG_EVENT, "critical", data={"params": [f"blocks.{i}.attn.weight" for i in range(30)]},
                          step=7)
                rec.event("note", "a short one", step=9)
    return root


@pytest.fixture(scope="module")
def small_run(small_runs: Path) -> Path:
    return small_runs / "small"


class _RunViewHost(App):
    """The run view alone, with no run read: its keys work before any data arrives."""

    def on_mount(self) -> None:
        self.push_screen(RunScreen("no run"))


async def _run_view(pilot, app: TuidiagApp) -> RunScreen:
    assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=30)
    return app.screen


# ---- help is generated from the bindings ---------------------------------------------------------------------------


def _key_lines(section) -> list[tuple[set[str], str]]:
    """The (keys, words) of each key line under ``section``'s heading in the help, wrapped lines joined."""
    text = help_text(TuidiagApp.BINDINGS).plain.split(f"\n{section.title}\n", 1)[1]
    out: list[tuple[set[str], str]] = []
    for line in text.split("\n\n", 1)[0].splitlines():
        assert len(line) <= WIDTH, line
        if line.startswith(" " * (KEYS_WIDTH + 3)):
            out[-1] = (out[-1][0], f"{out[-1][1]} {line.strip()}")  # a wrapped line goes on
        elif not line.startswith("    "):  # not the section's note
            assert line[:2] == "  " and line[2] != " " and line[2 + KEYS_WIDTH] == " ", line
            out.append((set(line[2:2 + KEYS_WIDTH].split()), line[3 + KEYS_WIDTH:]))
    return out


def _own_bindings(owner: type | None) -> list[Binding]:
    """The bindings ``owner`` defines, each key on its own (as Textual binds them)."""
    return list(Binding.make_bindings(TuidiagApp.BINDINGS if owner is None else owner.BINDINGS))


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.title)
def test_help_says_what_the_bindings_say(section) -> None:
    """Each section lists one line per described binding (or group of keys), with its keys and its words, and no other key."""
    lines = _key_lines(section)
    bindings = _own_bindings(section.owner)
    for binding in bindings:
        if not (binding.description or binding.group):
            continue
        key = key_display(binding)
        words = binding.group.description if binding.group else binding.description
        if binding.tooltip and not binding.group:
            words = f"{words}: {binding.tooltip}"
        assert any(key in shown and text == words for shown, text in lines), f"{section.title}: no help line for {key} ({words})"
    defined = {key_display(b) for b in bindings}
    for shown, text in lines:
        assert shown <= defined, f"{section.title}: help lists a key no binding defines: {shown} {text}"
    raw = [as_binding(b) for b in (TuidiagApp.BINDINGS if section.owner is None else section.owner.BINDINGS)]
    described = [b for b in raw if b.description and not b.group]
    assert described and len(lines) == len(described) + len({b.group for b in raw if b.group})
    assert all(len(key_display(b)) < KEYS_WIDTH for b in raw)


def test_every_class_of_the_monitor_with_keys_has_a_help_section() -> None:
    owners = {section.owner for section in SECTIONS} | {None}
    found = []
    for module in pkgutil.walk_packages(tuidiag.app.__path__, "tuidiag.app."):
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if cls.__module__ == module.name and "BINDINGS" in vars(cls):
                found.append(cls)
                assert cls in owners or cls is TuidiagApp, f"{cls.__name__} defines keys that help does not list"
    assert RunScreen in found and EventsPanel in found and len(found) >= 8


def test_help_lists_d_and_every_tab_and_no_key_twice_in_the_run_view() -> None:
    """The issue's regression: help listed ``d`` with no binding, and no tab 6."""
    runs = _key_lines(next(section for section in SECTIONS if section.owner is RunScreen))
    bindings = _own_bindings(RunScreen)
    keys = [key for b in bindings for key in b.key.split(",")]
    assert len(keys) == len(set(keys)) and "d" in keys
    for tab in RUN_TABS:
        binding = next(b for b in bindings if b.key == tab.key)
        assert binding.action == f"tab('{tab.id}')"
        assert ({tab.key}, f"{tab.label}: {tab.shows}") in runs
    assert len({tab.key for tab in RUN_TABS}) == len({tab.id for tab in RUN_TABS}) == len(RUN_TABS)


async def test_the_help_screen_shows_the_generated_text() -> None:
    app = TuidiagApp(DEMO_RUNS / "healthy", clock=fixed_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await _run_view(pilot, app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert str(app.screen.query_one(Static).render()) == help_text(TuidiagApp.BINDINGS).plain  # wrapped to WIDTH
        await pilot.press("escape")
        assert isinstance(app.screen, RunScreen)


# ---- the tabs come from the registry -------------------------------------------------------------------------------


async def test_pressing_a_tabs_key_shows_it() -> None:
    """Each tab's key shows it after another tab's key (one run view takes every tab in turn: an app per tab
    cost a third of a second of CPU each)."""
    app = _RunViewHost()
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        for tab in RUN_TABS:
            other = RUN_TABS[(RUN_TABS.index(tab) + 1) % len(RUN_TABS)]
            for key, shown in ((other.key, other), (tab.key, tab)):
                await pilot.press(key)
                await pilot.pause()
                assert screen.query_one("#charts", TabbedContent).active == shown.id, tab.id
                pane = screen.query_one(f"#{shown.id}", TabPane)
                assert pane.display and pane.region.area > 0, tab.id
            label = screen.query_one("#charts", TabbedContent).get_tab(tab.id).label
            assert label.plain == tab_title(tab).plain
            if tab.chart:
                assert screen.query_one(f"#chart-{tab.id}").region.area > 0, tab.id


# ---- d: the whole diagnosis, full height -----------------------------------------------------------------------------


async def test_d_shows_the_whole_diagnosis_full_height_at_80x24() -> None:
    """The issue's case: at 80x24 lr-too-high's panel cut the Fix line; ``d`` shows all of it, scrollable; d or esc returns."""
    app = TuidiagApp(DEMO_RUNS / "lr-too-high", clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _run_view(pilot, app)
        panel = screen.query_one(DiagnosisPanel)
        await pilot.pause()
        top = screen.detail.diagnosis.findings[0]
        assert len(top.evidence) > PANEL_EVIDENCE
        assert panel.size.height < 12 and panel.max_scroll_y > 0  # the fix is below the fold

        await pilot.press("d")
        await pilot.pause()
        charts = screen.query_one("#charts")
        assert not charts.display and screen.focused is panel
        assert panel.outer_size.height == 24 - 3  # all but the title, the system strip and the footer
        text = str(panel.query_one("#diagnosis-text", Static).render())
        for finding in screen.detail.diagnosis.findings:
            for line in finding.evidence:
                assert clean(f" - {line}", 400) in text
        assert text.count("Fix: ") == sum(f.code != "healthy" for f in screen.detail.diagnosis.findings)
        await pilot.press("end")
        await pilot.pause()
        assert panel.scroll_y == panel.max_scroll_y > 0  # the keys scroll it to the last line

        await pilot.press("d")
        await pilot.pause()
        assert charts.display and not panel.full and panel.size.height < 12
        await pilot.press("d", "escape")
        await pilot.pause()
        assert isinstance(app.screen, RunScreen) and charts.display  # esc leaves the full view, not the run


# ---- events wrap, and enter shows one whole ----------------------------------------------------------------------


async def test_a_long_event_wraps_at_every_width_and_enter_shows_it_whole(small_run: Path) -> None:
    app = TuidiagApp(small_run, clock=fixed_clock)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        screen = await _run_view(pilot, app)
        await pilot.press("6")
        table = screen.query_one(EventsPanel)
        assert await wait_for(pilot, lambda: table.row_count == 2)
        for width in WIDTHS:
            await pilot.resize_terminal(width, 40)
            await pilot.pause()
            assert await wait_for(pilot, lambda: table._widths[2] == table._message_width(*table._widths[:2]))
            message = table.get_row_at(0)[2]
            assert message.plain == clean(LONG_EVENT, MESSAGE_SHOWN)  # the text, whole; literal brackets
            columns = sum(column.get_render_width(table) for column in table.ordered_columns)
            assert columns <= table.scrollable_content_region.width, f"{width}: the message runs off the side"
            row = next(iter(table.rows.values()))
            assert row.height >= len(message.plain) // table._widths[2], f"{width}: not wrapped"
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, EventDetailScreen))
        plain = str(app.screen.query_one("#event-text", Static).render())
        assert "[bold red]not markup[/]" in plain and "blocks.29.attn.weight" in plain.split("params:")[0]
        assert "params: blocks.0.attn.weight" in plain and "step 7" in plain
        assert screen.marker == 7  # its step is marked on the charts
        await pilot.press("escape")
        assert isinstance(app.screen, RunScreen)


# ---- no label is cut -------------------------------------------------------------------------------------------------


def _footer_fits(screen, width: int) -> None:
    keys = list(screen.query(FooterKey))
    palette = [k for k in keys if k.has_class("-command-palette")]
    right = palette[0].region.x if palette else width
    assert keys
    for key in keys:
        if key not in palette:
            assert key.region.right <= right and key.region.width > 0, f"{width}: footer key {key.key} is cut"
    for key in palette:
        assert key.region.right <= width


def _tabs_fit(tabs: Tabs, width: int) -> None:
    for tab in tabs.query("Tab"):
        assert tabs.region.contains_region(tab.region), f"{width}: tab {tab.label.plain!r} is cut"


def test_every_short_form_fits_a_badge() -> None:
    for code in CODES.values():
        assert code.short and len(code.short) <= SHORT_MAX, f"{code.name}: give it a short form of <= {SHORT_MAX} characters"
    assert len({code.short for code in CODES.values()}) == len(CODES)
    assert badge("lr_too_high") == "LR too high" and badge("-") == "-"


def _rows(codes: list[str], status: str = "finished") -> list[RunSummary]:
    """Overview rows with these top findings, the longest name shown and a long status ("finished >30d")."""
    return [RunSummary(key=f"/r/{i}", name="n" * 60 + str(i), status=status, step=123456, steps_per_s=1234.5, last_loss=1e-07,
                       spark=(1.0, 0.5), lr=1e-3, grad_norm=1.0, health=code,
                       health_severity="warning", health_confidence=1.0, data_age=90 * 86400.0) for i, code in enumerate(codes)]


async def test_no_health_badge_or_footer_label_is_cut_in_the_overview(small_runs: Path) -> None:
    """The health badge of the worst-case rows (longest short form, longest name shown, a long status) and the footer.

    Regression: a cell updated in place kept its column's first width, so a badge that grew on a
    later read ("data_loading_bottleneck" after "lr_too_high") showed cut ("data_loading_bo")."""
    app = TuidiagApp(small_runs, clock=fixed_clock)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        assert await wait_for(pilot, lambda: bool(app.summaries) and settled(app, len(app.summaries)))
        overview = app.screen
        assert isinstance(overview, OverviewScreen)
        app._poll_timer.stop()  # keep the rows shown here: no refresh or late diagnosis replaces them
        app.watcher.stop()
        app.model.on_late = None
        overview.show(_rows(["healthy"] * 3, status="running"), "root")  # the first read: short cells
        await pilot.pause()
        rows = _rows([code.name for code in sorted(CODES.values(), key=lambda c: -len(c.short))[:3]])
        overview.show(rows, "root")  # the same runs, now with the longest badges: the cells change in place
        await pilot.pause()
        table = overview.query_one("#runs", DataTable)
        health = list(table.columns).index(next(k for k, c in table.columns.items() if c.label.plain == "health"))
        for width in WIDTHS:
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            right = sum(c.get_render_width(table) for c in table.ordered_columns[:health + 1])
            assert right <= table.scrollable_content_region.width, f"{width}: the health badge is cut"
            for row in range(len(rows)):
                cell = table.get_row_at(row)[health]
                assert cell.plain == f"{badge(rows[row].health)} {confidence(rows[row].health_confidence)}"
                assert table.ordered_columns[health].content_width >= cell.cell_len, f"{width}: the badge is cut to its column"
            _footer_fits(overview, width)


async def test_no_tab_or_footer_label_is_cut_in_the_run_view_or_compare(small_runs: Path) -> None:
    app = TuidiagApp(small_runs, clock=fixed_clock)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 2)
        await pilot.press("enter")
        screen = await _run_view(pilot, app)
        for width in (*WIDTHS, NARROW):  # NARROW: the narrowest terminal with the charts beside the diagnosis
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            _tabs_fit(screen.query_one("#charts", TabbedContent).query_one(Tabs), width)
            _footer_fits(screen, width)
        await pilot.press("escape", "space", "down", "space", "c")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        for width in WIDTHS:
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            _tabs_fit(app.screen.query_one(Tabs), width)
            _footer_fits(app.screen, width)
