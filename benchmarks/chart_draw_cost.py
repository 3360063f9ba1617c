"""What a chart costs to draw: its lines put on plotext's matrix by numpy against plotext's own drawing,
and its rows handed to Textual as strips against Textual's conversion of the same ``Text``.

The run view of the 10M-row run of ``screen_cost.py`` (500,000 steps x 20 metrics; written once under
``--data``) is opened in a headless app, and each of its charts is drawn at two sizes, linear and log:

- ``draw_chart`` as the monitor draws it (``plot_raster``: numpy), beside the same call with the numpy
  path switched off (plotext draws the lines: the baseline, measured in the same run);
- the drawing as strips (``line_strips.text_strips``), beside Textual's ``Visual.to_strips`` of the same
  ``Text`` (what Textual does for a widget whose ``render()`` returns it).

Each figure is the best of ``--repeat`` calls (warm caches), with the ratio to its baseline. Spiky series
(a min/max envelope from bottom to top at every column) are where plotext's per-point Python costs most.

Usage::

    python benchmarks/chart_draw_cost.py [--data /tmp/tuidiag-screen] [--steps 500000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import timeit
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import screen_cost  # noqa: E402

SIZES = ((96, 43), (156, 20))
"""(width, height) in cells: the run view's chart at 160x48, and a wide, short one."""


def best_ms(call: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` calls, in milliseconds."""
    return 1000 * min(timeit.repeat(call, number=1, repeat=repeat))


def measure(path: Path, repeat: int) -> list[tuple[str, str, float, float, float, float]]:
    """(chart, size and scale, numpy ms, plotext ms, strips ms, Textual ms) for each chart of ``path``'s run view."""
    from textual.visual import Visual, visualize

    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.run_screen import RunScreen
    from tuidiag.app.widgets import plot_rows
    from tuidiag.app.widgets.chart import MetricChart, draw_chart
    from tuidiag.app.widgets.line_strips import text_strips

    rows: list[tuple[str, str, float, float, float, float]] = []

    async def go() -> None:
        app = TuidiagApp(path)
        async with app.run_test(size=(160, 48)) as pilot:
            while not (isinstance(app.screen, RunScreen) and app.screen.detail is not None):
                await pilot.pause(0.05)
            widget = app.screen.query_one("#chart-loss", MetricChart)
            style, theme = widget.visual_style, app.ansi_theme
            take = plot_rows.take_signals
            for name, chart in app.screen.detail.charts.items():
                if not chart.lines:
                    continue
                for width, height in SIZES:
                    for log in (False, True):
                        draw = lambda: draw_chart(chart, log=log, marker=None, width=width, height=height)  # noqa: E731
                        numpy_ms = best_ms(draw, repeat)
                        plot_rows.take_signals = lambda monitor: None  # type: ignore[assignment]  # plotext draws the lines
                        try:
                            plotext_ms = best_ms(draw, repeat)
                        finally:
                            plot_rows.take_signals = take  # type: ignore[assignment]
                        text = draw()
                        strips_ms = best_ms(lambda: text_strips(text, style, width, height, theme), repeat)
                        textual_ms = best_ms(lambda: Visual.to_strips(widget, visualize(widget, text), width, height, style), repeat)
                        rows.append((name, f"{width}x{height}{' log' if log else ''}", numpy_ms, plotext_ms, strips_ms, textual_ms))

    asyncio.run(go())
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/tmp/tuidiag-screen"))
    parser.add_argument("--steps", type=int, default=500_000, help="steps of the run (x 20 metrics)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    run = screen_cost.big_run(args.data, args.steps)
    rows = measure(run, args.repeat)
    print(f"{'chart':<8} {'size':<11} {'numpy':>8} {'plotext':>8} {'ratio':>6}   {'strips':>7} {'Textual':>8} {'ratio':>6}")
    for name, size, numpy_ms, plotext_ms, strips_ms, textual_ms in rows:
        print(f"{name:<8} {size:<11} {numpy_ms:7.1f}  {plotext_ms:7.1f}  {numpy_ms / plotext_ms:5.2f}x   "
              f"{strips_ms:6.1f}  {textual_ms:7.1f}  {strips_ms / textual_ms:5.2f}x")
    total = [sum(r[i] for r in rows) for i in range(2, 6)]
    print(f"{'all':<8} {'':<11} {total[0]:7.1f}  {total[1]:7.1f}  {total[0] / total[1]:5.2f}x   "
          f"{total[2]:6.1f}  {total[3]:7.1f}  {total[2] / total[3]:5.2f}x   (ms, best of {args.repeat} each)")


if __name__ == "__main__":
    main()
