"""The report's loss plot of a diverged run keeps the finite part readable and marks the divergence.

A matrix of diverging shapes (NaN from step k, +Inf, -Inf, an exponential blow-up, a blow-up then
NaN, one huge spike, a 1e6x slow growth), at an early, middle and late step, on a positive loss and
on one that goes below zero (a linear axis). In every plot:

- the x axis reaches the run's last step (the non-finite tail is not squeezed out);
- every finite point before the divergence lies inside the y axis, and the axis is not blown out:
  its top is at most a decade above those points on a log axis, or their range twice over on a linear one;
- the divergence is marked: a red vertical line at the first non-finite step, or at the first step
  the loss leaves the axis, named in the legend and the caption.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_runs import healthy_series, write_run  # noqa: E402
from tuidiag.diagnosis.view import RunView  # noqa: E402
from tuidiag.report import plotkit as kit  # noqa: E402
from tuidiag.report.plots_loss import draw_loss, plot_loss  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

N = 400
SHAPES = ("nan", "inf", "neg_inf", "exp", "exp_then_nan", "spike", "slow_1e6")
AT = (40, 200, 370)
BASES = ("positive", "below_zero")


def _loss(shape: str, at: int, base: str) -> np.ndarray:
    t = np.arange(N)
    noise = 0.02 * np.random.default_rng(at).standard_normal(N)
    loss = (1.2 * np.exp(-t / 120) + 0.2 if base == "positive" else -0.5 - 1.5 * (1 - np.exp(-t / 100))) + noise
    rest = N - at
    with np.errstate(over="ignore"):
        if shape in ("nan", "inf", "neg_inf"):
            loss[at:] = {"nan": np.nan, "inf": np.inf, "neg_inf": -np.inf}[shape]
        elif shape == "exp":
            loss[at:] = loss[at] + np.abs(loss[at]) * (1.3 ** np.arange(rest) - 1)
        elif shape == "exp_then_nan":
            loss[at:] = loss[at] + np.abs(loss[at]) * (1.5 ** np.arange(rest) - 1)
            loss[at + rest // 2:] = np.nan
        elif shape == "spike":
            loss[at] = 1e9
        else:  # 1e6x over the rest of the run
            loss[at:] = loss[at] + np.abs(loss[at]) * (np.exp(np.linspace(0, np.log(1e6), rest)) - 1)
    return loss


CASES = list(itertools.product(SHAPES, AT, BASES))


@pytest.mark.parametrize(("shape", "at", "base"), CASES, ids=[f"{s}-{a}-{b}" for s, a, b in CASES])
def test_a_diverged_loss_plot_is_readable_and_marked(tmp_path: Path, shape: str, at: int, base: str) -> None:
    series = healthy_series(N)
    loss = _loss(shape, at, base)
    series["train/loss"] = (np.arange(N), loss)
    view = RunView(open_run(write_run(tmp_path / "run", series)))
    fig, (ax,) = kit.new_figure()
    notes = "; ".join(plot_loss(ax, view))
    fig.canvas.draw()  # limits settle as they are saved

    left, right = ax.get_xlim()
    assert left <= 0 and right >= N - 1, (ax.get_xlim(), notes)

    early = loss[:at]
    bottom, top = ax.get_ylim()
    assert bottom <= early.min() and early.max() <= top, (ax.get_ylim(), early.min(), early.max(), notes)
    if ax.get_yscale() == "log":
        assert top <= 10 * early.max() * 1.01, (top, early.max(), notes)
    else:
        assert top - early.max() <= 2 * max(np.ptp(early), abs(float(np.median(early[:10])))) + 1e-9, (ax.get_ylim(), notes)

    finite = np.isfinite(loss)
    off = np.flatnonzero(finite & (loss > top))
    first_bad = int(np.flatnonzero(~finite)[0]) if (~finite).any() else None
    first_off = int(off[0]) if len(off) else None
    marked = {round(line.get_xdata()[0]) for line in ax.lines if len(set(line.get_xdata())) == 1}
    assert first_bad is not None or first_off is not None, notes  # every shape leaves the axis or turns non-finite
    if first_bad is not None:
        assert first_bad in marked and f"the first at step {first_bad}" in notes, (marked, notes)
    if first_off is not None:
        assert first_off in marked and "where it leaves the axis" in notes, (marked, first_off, notes)
    labels = ax.get_legend_handles_labels()[1]
    assert any("NaN/Inf" in label or "leaves the axis at step" in label for label in labels), labels
    fig.clear()


@pytest.mark.parametrize("shape", SHAPES)
def test_the_png_is_written(tmp_path: Path, shape: str) -> None:
    series = healthy_series(N)
    series["train/loss"] = (np.arange(N), _loss(shape, 200, "positive"))
    view = RunView(open_run(write_run(tmp_path / "run", series)))
    path = tmp_path / "loss.png"
    draw_loss(view, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_healthy_loss_is_not_capped(tmp_path: Path) -> None:
    view = RunView(open_run(write_run(tmp_path / "run", healthy_series(N))))
    fig, (ax,) = kit.new_figure()
    notes = "; ".join(plot_loss(ax, view))
    assert "capped" not in notes and "non-finite" not in notes
    fig.clear()
