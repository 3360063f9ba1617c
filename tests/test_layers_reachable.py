"""Every layer of the Layers tab can be brought into view, the legend always shows, and a vanished gradient
reads apart from a small one.

The regression: at 80x24 on the vanishing-gradients demo only layers 0..16 showed; the layers with gradient
(18..24) and the legend were cut off with no scroll bar or "more" line, and every norm under 1e-6 had one colour.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.app_helpers import DEMO_RUNS, drawn_text, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.layers import LEVELS, LayerHeatmap, cell_style, legend, render_grid, window
from tuidiag.viewmodel.snapshot import STATUS_READING, LayerGrid

SIZES = [(80, 24), (120, 40), (200, 50)]
RUNS = ["vanishing-gradients", "lr-too-high", "healthy"]


def _grid(count: int) -> LayerGrid:
    return LayerGrid(tuple(f"l{i}.weight" for i in range(count)), np.linspace(-11, 1, count * 8).reshape(count, 8),
                     np.arange(9) * 10)


@pytest.mark.parametrize("width", [20, 40, 80, 200])
@pytest.mark.parametrize("height", [4, 6, 9, 15, 40])
@pytest.mark.parametrize("count", [1, 3, 8, 25, 70])
def test_scrolling_down_reaches_every_layer_in_the_lines_there_are(width: int, height: int, count: int) -> None:
    grid, seen, top = _grid(count), set(), 0
    for _ in range(count + 2):
        first, end, above, after = window(count, top, width, height)
        text = render_grid(grid, width, height=height, top=top).plain
        lines = text.split("\n")
        assert len(lines) <= max(height, 4 + len(legend(width))), (top, lines)  # one row and both "more" lines at least
        assert "log10 |grad|" in text and (("more" in text and "below" in text) == after)
        assert all(len(line) <= width for line in lines), lines  # one line each, as window() counts them
        assert ("above" in text) == above
        seen |= set(grid.layers[first:end])
        top = first + 1
    assert seen == set(grid.layers)


def test_the_scale_grades_norms_down_to_1e_minus_12() -> None:
    small, vanished, gone = cell_style(-6.5), cell_style(-9.5), cell_style(-11.5)
    assert len({small, vanished, gone}) == 3 and LEVELS[0][0] <= -12


@pytest.mark.parametrize("name", RUNS)
async def test_every_layer_of_a_run_is_reachable_in_the_layers_tab(name: str) -> None:
    """One app per run, resized through every size (the tab scrolled back to the top at each)."""
    app = TuidiagApp(DEMO_RUNS / name)
    async with app.run_test(size=SIZES[0]) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                              and app.screen.detail.summary.status != STATUS_READING, timeout=60)
        await pilot.press("5")
        grid = app.screen.query_one("#layer-grid", LayerHeatmap)
        layers = app.screen.detail.layers.layers
        assert layers and app.focused is grid  # the arrow keys scroll it at once
        for size in SIZES:
            await pilot.resize_terminal(*size)
            assert await wait_for(pilot, lambda: grid._drawn is not None and grid.size.area > 0
                                  and grid._drawn[3] == grid.size.height and app.size == size), size
            for _ in range(len(layers)):  # back to the top, by the key a user presses
                if grid.top == 0:
                    break
                await pilot.press("up")
            assert grid.top == 0, size
            seen: set[str] = set()
            for _ in range(len(layers) + 1):  # down a row at a time until the last layer is in view
                await pilot.pause()
                text = drawn_text(grid)
                assert "log10 |grad|" in text and "<-12" in text, (size, text)  # the legend stays in view
                shown = {line.split()[0] for line in text.split("\n") if line.strip()}
                seen |= shown & set(layers)
                if len(shown & set(layers)) < len(layers):
                    assert "more layer" in text, (size, text)  # what is out of view is announced
                if layers[-1] in shown:
                    break
                await pilot.press("down")
            assert seen == set(layers), size
