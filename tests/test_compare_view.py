"""The compare screen's charts mark where a run's loss first went NaN/Inf, as the run view does.

A matrix of pairs recorded through the public Recorder: neither run, one run or both going
non-finite (NaN or +-inf), at the first step, in the middle or at the last. Each chart's red
line is at the first non-finite step of the runs that have one, and nowhere when none does;
the chart then says "NaN at red line" and never when no run went non-finite, and the legend names the
step at which each run went bad (the red line is the first of them).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import tuidiag
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.app.widgets.chart import draw_chart
from tuidiag.viewmodel.compare_view import compare_view, run_compared

STEPS = 60


def _record(path: Path, bad_from: int | None, bad: float) -> Path:
    with tuidiag.Recorder(path, flush_interval=0.1) as rec:
        for i in range(STEPS):
            rec.step(bad if bad_from is not None and i >= bad_from else 2.0 / (1 + i))
            if i % 10 == 0:
                rec.log({"val/loss": 1.0 / (1 + i)})
    return path


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(("a_from", "b_from"), [(None, None), (None, 0), (None, 30), (None, STEPS - 1), (40, None), (45, 12)])
def test_the_loss_chart_marks_the_first_non_finite_step_of_any_run(tmp_path: Path, bad: float, a_from: int | None,
                                                                   b_from: int | None) -> None:
    runs = []
    for name, start in (("a", a_from), ("b", b_from)):
        run = open_run(_record(tmp_path / name, start, bad))
        runs.append(run_compared(name, run, diagnose(run), 120))
    view = compare_view(("a", "b"), runs)
    expected = tuple(sorted(s for s in (a_from, b_from) if s is not None))
    assert view.charts["loss"].nonfinite_steps == expected
    assert view.charts["val"].nonfinite_steps == ()  # the validation loss stayed finite in every run
    drawn = draw_chart(view.charts["loss"], log=False, marker=None, width=100, height=20).plain
    assert ("NaN at red line" in drawn) == bool(expected)
    labels = [label for label, _, _ in view.charts["loss"].lines]  # the legend names each run's first bad step
    assert labels == [name + (f" (NaN from {start})" if start is not None else "")
                      for name, start in (("a", a_from), ("b", b_from))]
    assert all(len(label) <= 30 for label in labels)  # the legend shows 30 cells of each: the step is never cut


def test_a_long_run_name_is_cut_so_the_legend_keeps_the_step(tmp_path: Path) -> None:
    name = "a-very-long-experiment-name-with-a-sweep-id-0123456789"
    run = open_run(_record(tmp_path / name, 7, math.nan))
    view = compare_view((name,), [run_compared(name, run, diagnose(run), 120)])
    (label,) = [label for label, _, _ in view.charts["loss"].lines]
    assert len(label) <= 30 and label.endswith(" (NaN from 7)") and label.startswith("a-very")
