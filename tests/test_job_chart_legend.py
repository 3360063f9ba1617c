"""Every mark drawn in a job's chart is named in its legend: a line or glyph the reader cannot look up is noise.

The regression: the LR finder chart (Jobs tab) drew a vertical line at the suggested LR with no legend entry.
"""

from __future__ import annotations

import itertools
import math
import re

import pytest

from tuidiag.text.jobs import RUN_LR_GLYPH, SUGGESTED_GLYPH, loss_chart, lr_chart

_LEGEND = re.compile(r"^ (\S)\1 (\S.*?)(?: {2,}|$)")
_FRAME = set("┌┐└┘─┬┴┤├")


def _is_braille(char: str) -> bool:
    return "\u2800" <= char <= "\u28ff"


def unnamed_marks(chart: str) -> tuple[set[str], dict[str, str]]:
    """The glyphs drawn in the plot area that no legend entry names, and the legend (glyph -> label)."""
    lines = chart.split("\n")
    left = lines[0].index("┌")
    right = lines[0].index("┐")
    legend: dict[str, str] = {}
    unnamed: set[str] = set()
    in_legend = True
    for line in lines[1:]:
        if line[left:left + 1] in ("└", ""):
            break
        area = line[left + 1:right]
        found = _LEGEND.match(area) if in_legend else None
        if found:
            legend[found.group(1)] = found.group(2)
            area = " " * found.end(2) + area[found.end(2):]
        else:
            in_legend = False
        unnamed |= {c for c in area if c != " " and not _is_braille(c) and c not in _FRAME}
    return unnamed - set(legend), legend


def _sweep(n: int = 60) -> tuple[list[float], list[float]]:
    lrs = [1e-6 * 10 ** (i / 10) for i in range(n)]
    loss = [2.0 - 0.5 * math.tanh(math.log10(lr) + 3) + (5 * (math.log10(lr) + 1.5) if lr > 3e-2 else 0) for lr in lrs]
    return lrs, loss


SUGGESTED = [None, 1e-2, 3e-5, 10.0]  # inside the sweep, near its start, beyond its end
RUN_LRS = [None, 0.3, 1e-2, 1e-9]  # the run's LR: inside, on the suggestion, before the sweep
SIZES = [(76, 18), (40, 10), (120, 30)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("suggested,run_lr,optimizer_lr", list(itertools.product(SUGGESTED, RUN_LRS, [None, 0.05])))
def test_every_mark_of_the_lr_chart_is_in_its_legend(size: tuple[int, int], suggested: float | None,
                                                     run_lr: float | None, optimizer_lr: float | None) -> None:
    lrs, loss = _sweep()
    result = {"lrs": lrs, "smoothed": loss, "suggested_lr": suggested, "run_lr": run_lr, "optimizer_lr": optimizer_lr}
    chart = lr_chart(result, width=size[0], height=size[1])
    unnamed, legend = unnamed_marks(chart)
    assert not unnamed, chart
    in_sweep = suggested is not None and lrs[0] <= suggested <= lrs[-1]
    assert (SUGGESTED_GLYPH in legend) == in_sweep and (not in_sweep or "suggested LR" in legend[SUGGESTED_GLYPH]), chart
    if RUN_LR_GLYPH in legend:
        assert "run's LR" in legend[RUN_LR_GLYPH] if run_lr is not None else "optimizer's LR" in legend[RUN_LR_GLYPH]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_loss_chart_of_a_job_has_no_unnamed_mark(size: tuple[int, int]) -> None:
    chart = loss_chart([2.0 / (1 + i) for i in range(200)], width=size[0], height=size[1])
    assert unnamed_marks(chart)[0] == set(), chart


def test_an_unnamed_line_is_caught() -> None:
    """The check itself: a vertical line drawn with no legend entry (the reported chart) is found."""
    import plotext as plt

    lrs, loss = _sweep()
    plt.clear_figure()
    plt.plot_size(76, 18)
    plt.theme("clear")
    plt.plot(lrs, loss, marker="braille", label="smoothed loss")
    plt.xscale("log")
    plt.vline(1e-2)
    chart = plt.uncolorize(plt.build())
    plt.clear_figure()
    assert unnamed_marks(chart)[0] == {"│"}
