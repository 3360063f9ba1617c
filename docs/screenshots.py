"""Generate the README screenshots from the checked-in demo runs, with the real monitor run headless.

    python docs/screenshots.py                 # write docs/img/<name>.svg and docs/img/<name>.png
    python docs/screenshots.py --check         # regenerate the SVGs; exit 1 naming those that differ
    python docs/screenshots.py --only overview,jobs --out /tmp/shots

Each picture is the real ``TuidiagApp`` (``App.run_test``) on a copy of ``demo_runs/``, driven
by the keys a user would press, and exported with ``App.export_screenshot``. A fixed clock
(:data:`FIXED_NOW`) makes the ages the overview shows, and so the SVGs, the same on every
machine and every day: ``tests/test_screenshots.py`` regenerates the SVGs and fails while
a committed one differs (re-run this script after a change to the UI, and look at the PNGs).

Some pictures need what the demo runs do not hold, and are staged as the snapshot tests stage them:

* the Jobs tab shows a real LR finder result saved by ``tuidiag lr-find demo_runs/lr-too-high
  --yes`` (needs torch), checked in under ``docs/screenshot_inputs/`` and laid over the copy
  (``--refresh-inputs`` runs the job again); the copy of ``demo_runs/`` stays without it;
* the progress bar shows a fixed job state (no job process, no clock), and the two dialogs of a
  live training (the job confirmation, the fixes offered) are built by the same functions the app
  uses, with the proposals of the real diagnosis, for a made-up training process (the demo runs
  are not live).

PNG needs a system tool: ``rsvg-convert`` (Debian/Ubuntu: ``apt-get install librsvg2-bin``), or
else the ``cairosvg`` Python package. Without either the SVGs are written, the PNGs are not,
and the script says so (the README can point at the SVGs instead). The PNGs are drawn with the
fonts installed: Textual's SVGs ask for Fira Code (``apt-get install fonts-firacode``), else the
system's monospace font; braille and other glyphs that font lacks come from a fallback font and
are placed cell by cell (:func:`for_png`), so the charts keep their columns. Only the SVGs are
compared by the test: the PNGs may differ by a pixel from one machine's fonts to another's.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.cells import cell_len

ROOT = Path(__file__).resolve().parent.parent
DEMO_RUNS = ROOT / "demo_runs"
IMG = ROOT / "docs" / "img"
INPUTS = ROOT / "docs" / "screenshot_inputs"
"""Files laid over the copy of ``demo_runs/`` for the pictures that need them (a saved job result)."""
FIXED_NOW = 1_900_000_000.0
"""The clock of every picture (the value ``tests/app_helpers.py`` uses): ages are shown relative to it."""
README_SIZE = (100, 30)
"""Columns and rows of the README's pictures: readable at the width of a README page."""
NARROW_SIZE = (80, 24)
"""The smallest terminal the monitor is laid out for."""
JOBS_SIZE = (100, 48)
"""The Jobs tab: tall enough for the whole LR finder chart (20 lines) above the diagnosis."""
LOADED_WAIT = 60.0
"""Seconds to wait for the runs to be read (a loaded machine reads them slowly)."""
LIVE_PROCESS = {"pid": 4242, "host": "gpu-box", "device": "cuda:0"}
"""The made-up live training the two live dialogs name."""


@dataclass(frozen=True)
class Shot:
    """One picture: its file name (without suffix), terminal size and what it shows (the README's caption)."""

    name: str
    size: tuple[int, int]
    caption: str


SHOTS: tuple[Shot, ...] = (
    Shot("overview", README_SIZE, "the overview: every run of demo_runs/ with its health badge"),
    Shot("run-view", README_SIZE, "the run view of healthy: loss with EMA smoothing 0.99 (e) and the cursor's readout (<)"),
    Shot("diagnosis", README_SIZE, "the full diagnosis of lr-too-high (d)"),
    Shot("layers", README_SIZE, "per-layer gradient norms of vanishing-gradients (tab 5)"),
    Shot("compare", README_SIZE, "compare (space on two runs, then c): healthy against lr-too-high"),
    Shot("run-view-80x24", NARROW_SIZE, "lr-too-high in an 80x24 terminal"),
    Shot("job-confirm", README_SIZE, "l on a demo run: the LR finder's confirmation, with the factory it imports"),
    Shot("job-progress", README_SIZE, "the LR finder's progress bar under the run view"),
    Shot("jobs", JOBS_SIZE, "the Jobs tab (7) of lr-too-high after an LR finder run, and the diagnosis using it"),
    Shot("live-confirm", README_SIZE, "the confirmation of an LR finder run inside a live training"),
    Shot("live-action", README_SIZE, "the fixes offered for a live training (a), from its diagnosis and LR finder result"),
)
"""Every picture, in README order."""

_TERMINAL_ID = re.compile(r"terminal-\d+")


def normalise(svg: str) -> str:
    """The SVG without the terminal id Rich derives for its CSS classes (ids may differ; pictures compare equal)."""
    return _TERMINAL_ID.sub("terminal", svg)


Take = Callable[[str], Awaitable[None]]
"""``await take(name)``: export the screen now as the picture ``name``."""


@dataclass(frozen=True)
class Flow:
    """One app session that takes several pictures in turn (an app per picture costs seconds each)."""

    run: str
    """The path the monitor is started on, relative to the working directory (which holds ``demo_runs/``)."""
    size: tuple[int, int]
    names: tuple[str, ...]
    drive: Callable[..., Awaitable[None]]
    """``drive(pilot, app, take)``: press the keys and take ``names``, in that order."""
    with_inputs: bool = False
    """Whether :data:`INPUTS` is laid over the copy of ``demo_runs/``."""


async def _wait_for(pilot, condition: Callable[[], bool], what: str, timeout: float = LOADED_WAIT) -> None:
    """Let the app run until ``condition()`` holds; ``RuntimeError`` naming ``what`` after ``timeout`` seconds."""
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    if not condition():
        raise RuntimeError(f"screenshots: timed out waiting for {what}")


async def _run_loaded(pilot, app):
    """The run view on top, its detail read."""
    from tuidiag.app.screens.run_screen import RunScreen
    from tuidiag.viewmodel.snapshot import STATUS_READING

    await _wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                    and app.screen.detail.summary.status != STATUS_READING, "the run view")
    return app.screen


async def _drawn(pilot, screen) -> None:
    """Every chart and heatmap on screen drawn for its current size (never a frame of an older size)."""
    from tuidiag.app.widgets.chart import MetricChart
    from tuidiag.app.widgets.layers import LayerHeatmap

    def drawn() -> bool:
        charts = [c for c in screen.query(MetricChart) if c.display and c.size.area]
        grids = [g for g in screen.query(LayerHeatmap) if g.display and g.size.area]
        return (all(c._rendered is not None and c._rendered[0][1:3] == (c.size.width, c.size.height) for c in charts)
                and all(g._drawn is not None and g._drawn[1] == max(10, g.size.width - 2) for g in grids))

    await _wait_for(pilot, drawn, "the charts")


async def _to_row(pilot, app, name: str) -> None:
    """Put the overview's cursor on the run called ``name``."""
    from textual.widgets import DataTable

    table = app.screen.query_one("#runs", DataTable)
    names = [Path(str(key.value)).name for key in table.rows]
    table.move_cursor(row=names.index(name))
    await pilot.pause()


async def _open(pilot, app, name: str):
    """From the overview, open the run called ``name``; its run view once read."""
    await _to_row(pilot, app, name)
    await pilot.press("enter")
    return await _run_loaded(pilot, app)


async def _overview_flow(pilot, app, take: Take) -> None:
    """The overview; healthy's charts; lr-too-high's diagnosis and a job on it; layers; compare; lr-too-high at 80x24."""
    from tuidiag import job_kinds
    from tuidiag.app.screens.compare import CompareScreen
    from tuidiag.app.screens.job_confirm import JobConfirmScreen
    from tuidiag.app.widgets.chart import MetricChart
    from tuidiag.viewmodel.job_progress import RUNNING, JobView
    from tuidiag.viewmodel.snapshot import STATUS_READING

    await _wait_for(pilot, lambda: len(app.summaries) == len(list(DEMO_RUNS.iterdir()))
                    and all(s.status != STATUS_READING for s in app.summaries), "every demo run")
    await take("overview")
    screen = await _open(pilot, app, "healthy")
    await pilot.press("e", *["less_than_sign"] * 4)  # smoothing 0.9 -> 0.99; the cursor 40 columns left of the end
    await _drawn(pilot, screen)
    await take("run-view")
    await pilot.press("escape", "escape")  # the cursor hidden, back to the overview
    screen = await _open(pilot, app, "lr-too-high")
    await pilot.press("d")
    await take("diagnosis")
    await pilot.press("d", "l")
    await _wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen), "the job confirmation")
    await take("job-confirm")
    await pilot.press("escape")
    kind = job_kinds.get("lr_find")  # the bar as the app shows it 12 s into the job (no job process runs)
    screen.show_job(JobView(screen.key, kind.name, kind.title, RUNNING, 40, kind.expected_steps(), 12.0, 18.0))
    await _drawn(pilot, screen)
    await take("job-progress")
    screen.show_job(None)
    await pilot.press("escape")
    screen = await _open(pilot, app, "vanishing-gradients")
    await pilot.press("5")
    await _drawn(pilot, screen)
    await take("layers")
    await pilot.press("escape")
    for name in ("healthy", "lr-too-high"):
        await _to_row(pilot, app, name)
        await pilot.press("space")
    await pilot.press("c")
    await _wait_for(pilot, lambda: isinstance(app.screen, CompareScreen)
                    and app.screen.query_one("#cmp-chart-loss", MetricChart).chart is not None, "compare")
    await _drawn(pilot, app.screen)
    await take("compare")
    await pilot.press("escape")
    await pilot.resize_terminal(*NARROW_SIZE)
    screen = await _open(pilot, app, "lr-too-high")
    await _drawn(pilot, screen)
    await take("run-view-80x24")


async def _jobs_flow(pilot, app, take: Take) -> None:
    """lr-too-high with its saved LR finder result: the two dialogs of a live training, then the Jobs tab."""
    from tuidiag.app import job_runner
    from tuidiag.app.action_requests import SHOWN_PAST
    from tuidiag.app.screens.job_confirm import JobConfirmScreen
    from tuidiag.app.screens.live_action import LiveActionScreen
    from tuidiag.store.manifest import read_manifest
    from tuidiag.viewmodel.actions import finder_suggestion, lr_conflict, past_actions, propose

    screen = await _run_loaded(pilot, app)
    detail, run_dir = screen.detail, Path(screen.key)
    manifest = {**read_manifest(run_dir), "control": LIVE_PROCESS}  # as app.on_tuidiag_app_job_prepared builds it
    where = job_runner.live_where(manifest, "lr_find", detail.summary.steps_per_s)
    app.push_screen(JobConfirmScreen("lr_find", job_runner.shown(job_runner.live_command("lr_find", screen.key)),
                                     str(manifest.get("factory")), screen.key, where))
    await take("live-confirm")
    await pilot.press("escape")
    suggested = finder_suggestion(run_dir)  # as action_requests.offer builds the offer
    proposals = propose(detail.diagnosis, detail.summary.lr, suggested, detail.clip_threshold is not None)
    app.push_screen(LiveActionScreen(run_dir.name, f"the training process (pid {LIVE_PROCESS['pid']} on {LIVE_PROCESS['host']})",
                                     proposals, tuple(past_actions(detail.events)[-SHOWN_PAST:]),
                                     lr_conflict(detail.diagnosis, detail.summary.lr, suggested)))
    await take("live-action")
    await pilot.press("escape")
    await pilot.resize_terminal(*JOBS_SIZE)
    await pilot.press("7")
    await _drawn(pilot, screen)
    await take("jobs")


FLOWS: tuple[Flow, ...] = (
    Flow("demo_runs", README_SIZE, ("overview", "run-view", "diagnosis", "job-confirm", "job-progress", "layers", "compare",
                                     "run-view-80x24"), _overview_flow),
    Flow("demo_runs/lr-too-high", README_SIZE, ("live-confirm", "live-action", "jobs"), _jobs_flow, with_inputs=True),
)
"""Every app session; together they take every picture of :data:`SHOTS` once."""


@contextmanager
def _demo_copy(with_inputs: bool) -> Iterator[Path]:
    """A temporary directory holding a copy of ``demo_runs/`` (with :data:`INPUTS` laid over it), as the working directory."""
    before = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="tuidiag-shots-") as tmp:
        shutil.copytree(DEMO_RUNS, Path(tmp) / "demo_runs")
        if with_inputs:
            shutil.copytree(INPUTS, Path(tmp) / "demo_runs", dirs_exist_ok=True)
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(before)


async def _run_flow(flow: Flow, wanted: set[str]) -> dict[str, str]:
    """The SVGs of ``flow``'s pictures that are in ``wanted``, by name."""
    from tuidiag.app.app import TuidiagApp

    svgs: dict[str, str] = {}
    with _demo_copy(flow.with_inputs):
        app = TuidiagApp(Path(flow.run), clock=lambda: FIXED_NOW)
        app.animation_level = "none"
        async with app.run_test(size=flow.size) as pilot:
            async def take(name: str) -> None:
                assert name in flow.names, name
                size = next(shot.size for shot in SHOTS if shot.name == name)
                if tuple(app.size) != size:
                    raise RuntimeError(f"screenshots: {name} taken at {tuple(app.size)}, listed at {size}")
                await pilot.pause()
                await pilot.wait_for_scheduled_animations()
                await pilot.pause()
                if name in wanted:
                    svgs[name] = normalise(app.export_screenshot())
            await flow.drive(pilot, app, take)
    return svgs


def render(names: set[str] | None = None) -> dict[str, str]:
    """The normalised SVG of each picture in ``names`` (default: all), by name, in :data:`SHOTS` order."""
    wanted = {shot.name for shot in SHOTS} if names is None else set(names)
    unknown = wanted - {shot.name for shot in SHOTS}
    if unknown:
        raise ValueError(f"unknown screenshots: {', '.join(sorted(unknown))}")
    svgs: dict[str, str] = {}
    for flow in FLOWS:
        if wanted & set(flow.names):
            svgs.update(asyncio.run(_run_flow(flow, wanted)))
    return {shot.name: svgs[shot.name] for shot in SHOTS if shot.name in svgs}


_TEXT = re.compile(r'(<text\b[^>]*?\bx=")([0-9.]+)("[^>]*?\btextLength="([0-9.]+)"[^>]*>)([^<]*)(</text>)')
_PLAIN = frozenset(chr(c) for c in range(32, 127)) | {"\N{NO-BREAK SPACE}"}
"""Characters every monospace font draws one cell wide: a text of only these is left as one run."""


def _one_glyph_per_cell(match: re.Match[str]) -> str:
    """The ``<text>`` of ``match`` with each character in its own ``<tspan>`` at its cell's x."""
    head, x, mid, length, body, tail = match.groups()
    chars = html.unescape(body)
    cells = cell_len(chars)
    if not cells or set(chars) <= _PLAIN:
        return match.group(0)
    width, at, spans = float(length) / cells, float(x), []
    for char in chars:
        spans.append(f'<tspan x="{at:g}">{html.escape(char, quote=False)}</tspan>')
        at += width * cell_len(char)
    return f"{head}{x}{mid}{''.join(spans)}{tail}"


def for_png(svg: str) -> str:
    """``svg`` as a converter draws it on its cells: spaces kept (``xml:space``), and each character of a text
    with glyphs the monospace font may lack (braille, blocks) placed at its own cell, since a fallback font's
    glyphs are wider and would push the rest of the line out of its columns."""
    return _TEXT.sub(_one_glyph_per_cell, svg.replace("<svg ", '<svg xml:space="preserve" ', 1))


def png_converter() -> Callable[[str, Path], None] | None:
    """A function writing a PNG from an SVG's text (rsvg-convert, else cairosvg), or None when neither is installed."""
    tool = shutil.which("rsvg-convert")
    if tool is not None:
        return lambda svg, png: subprocess.run([tool, "-o", str(png)], input=for_png(svg).encode(), check=True)
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        return None
    return lambda svg, png: cairosvg.svg2png(bytestring=for_png(svg).encode(), write_to=str(png))


def write(svgs: dict[str, str], out: Path) -> list[Path]:
    """Write each SVG to ``out``, and its PNG where a converter is installed; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    convert = png_converter()
    written = []
    for name, svg in svgs.items():
        path = out / f"{name}.svg"
        path.write_text(svg, encoding="utf-8")
        written.append(path)
        if convert is not None:
            convert(svg, path.with_suffix(".png"))
            written.append(path.with_suffix(".png"))
    if convert is None:
        print("screenshots: no PNG written: install rsvg-convert (apt-get install librsvg2-bin) or cairosvg", file=sys.stderr)
    return written


def stale(svgs: dict[str, str], committed: Path = IMG) -> list[str]:
    """The pictures whose SVG in ``committed`` is missing or differs from ``svgs``."""
    differ = []
    for name, svg in svgs.items():
        path = committed / f"{name}.svg"
        if not path.is_file() or normalise(path.read_text(encoding="utf-8")) != svg:
            differ.append(name)
    return differ


def refresh_inputs() -> Path:
    """Run the LR finder on a copy of lr-too-high (needs torch) and keep its result as the Jobs tab's input."""
    with _demo_copy(with_inputs=False) as tmp:
        subprocess.run([sys.executable, "-m", "tuidiag", "lr-find", "demo_runs/lr-too-high", "--yes"], check=True,
                       stdout=subprocess.DEVNULL)
        results = sorted((tmp / "demo_runs" / "lr-too-high" / "jobs").glob("lr_find-*.json"))
        target = INPUTS / "lr-too-high" / "jobs"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        return Path(shutil.copy2(results[-1], target))


def main(argv: list[str] | None = None) -> int:
    """Command line: write the pictures, or check the committed ones (exit status 1 when stale)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed SVGs; write nothing")
    parser.add_argument("--only", help="comma-separated picture names (default: all)")
    parser.add_argument("--out", type=Path, default=IMG, help=f"where to write (default {IMG})")
    parser.add_argument("--refresh-inputs", action="store_true", help="run the LR finder again for the Jobs tab (torch)")
    args = parser.parse_args(argv)
    if args.refresh_inputs:
        print(f"saved {refresh_inputs()}")
    svgs = render(set(args.only.split(",")) if args.only else None)
    if args.check:
        differ = stale(svgs)
        for name in differ:
            print(f"stale: docs/img/{name}.svg (re-run python docs/screenshots.py)")
        return 1 if differ else 0
    captions = {shot.name: shot.caption for shot in SHOTS}
    for path in write(svgs, args.out):
        print(f"{path}  ({captions[path.stem]})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # a source checkout's tuidiag, not an older installed one
    sys.exit(main())
