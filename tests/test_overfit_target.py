"""Overfit one batch asks for a real drop: its target follows a low starting loss, and a pass that says nothing is
marked so. Pure parts (:func:`overfit_target`, :func:`report`, the verdict and the text) over a matrix of starting
loss / target ratios and step counts, and the real test on a model trained beforehand; the chart's x axis has whole steps."""

from __future__ import annotations

import math
import re

import jobs_factory
import pytest
import torch

from tuidiag.job_kinds.builtin import OVERFIT_BATCH
from tuidiag.job_kinds.configs import MIN_DROP, OverfitConfig, overfit_informative, overfit_target
from tuidiag.jobs.factory import as_parts
from tuidiag.jobs.overfit import overfit_batch, report
from tuidiag.text.jobs import loss_chart, render_overfit, step_ticks

CPU = torch.device("cpu")
RATIOS = (0.5, 1.0, 2.0, 4.92, 50.0, 99.0, 100.0, 230.0, 1e4)
"""Starting loss / set target: at, near and far above it (4.92: the review's trained model, 0.0492 against 0.01)."""


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("target", (0.01, 1e-4, 0.5))
def test_the_target_is_always_min_drop_below_a_positive_start(ratio: float, target: float) -> None:
    initial = ratio * target
    used = overfit_target(target, initial)
    assert used <= target and used <= initial / MIN_DROP * (1 + 1e-12)
    assert used == (target if ratio >= MIN_DROP else pytest.approx(initial / MIN_DROP))


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("steps", (1, 2, 5, 500))
def test_a_pass_means_the_loss_fell_min_drop_times(ratio: float, steps: int) -> None:
    """Losses falling 10x a step: the test passes only once below the target it reports, at least 100x below the start."""
    cfg = OverfitConfig(steps=steps)
    initial = ratio * cfg.target
    used = overfit_target(cfg.target, initial)
    curve = [initial * 0.1 ** i for i in range(steps + 1)]
    reached = next((i for i, v in enumerate(curve) if v <= used), None)
    losses, reason = (curve[:reached + 1], "target reached") if reached is not None else (curve[:steps], "steps exhausted")
    result = report(losses, reason, 1e-3, cfg, CPU)
    assert result["target"] == used and result["informative"] is True and overfit_informative(result)
    if result["passed"]:
        assert result["final_loss"] <= result["initial_loss"] / MIN_DROP * (1 + 1e-9) and result["steps"] >= 2
    text = render_overfit(result)
    verdict = OVERFIT_BATCH.verdict(result).text
    assert ("PASS" in text) is result["passed"] and verdict.startswith("PASS" if result["passed"] else "FAIL")
    if used < cfg.target:
        assert f"start/{MIN_DROP:g}, below the set 0.01" in text


@pytest.mark.parametrize("initial", (0.0, -0.3, 0.01, 0.004))
def test_a_start_at_the_target_is_not_informative(initial: float) -> None:
    """A loss at or below the target before any step (zero or negative: no relative target) passes without training."""
    cfg = OverfitConfig()
    if initial > 0:
        assert overfit_target(cfg.target, initial) < initial  # a positive start is never already at its own target
        return
    result = report([initial], "target reached", 1e-3, cfg, CPU)
    assert result["passed"] and result["steps"] == 0 and not overfit_informative(result)
    assert OVERFIT_BATCH.verdict(result).text.startswith("NOT INFORMATIVE") and not OVERFIT_BATCH.verdict(result).negative
    assert "NOT INFORMATIVE" in render_overfit(result) and "nothing was trained" in render_overfit(result)


@pytest.mark.parametrize("ratio", RATIOS)
def test_results_saved_before_the_rule_are_judged_by_their_start(ratio: float) -> None:
    """A stored pass without ``informative`` (older tuidiag) counts only if its start was MIN_DROP above its target."""
    old = {"passed": True, "reason": "target reached", "steps": 2, "initial_loss": 0.01 * ratio, "final_loss": 0.00744,
           "losses": [0.01 * ratio, 0.00744], "optimizer": "adam", "lr": 1e-3, "config": {"target": 0.01}, "advice": None}
    assert overfit_informative(old) is (ratio > MIN_DROP)
    assert ("NOT INFORMATIVE" in render_overfit(old)) is (ratio <= MIN_DROP)
    assert overfit_informative(dict(old, passed=False))  # a failure to fit is evidence whatever the start


@pytest.mark.parametrize("pretrain", (0, 300))
def test_a_trained_model_must_drop_100_times(pretrain: int) -> None:
    """The review's case for real: a model trained on the batch first starts near 0.01 and must still fall 100 times."""
    parts = as_parts(jobs_factory.plain_mlp())
    x, y = parts.batches[0]
    opt = torch.optim.Adam(parts.model.parameters(), 1e-2)
    for _ in range(pretrain):
        opt.zero_grad()
        parts.loss(x, y).backward()
        opt.step()
    result = overfit_batch(parts, CPU, OverfitConfig(steps=500, lr=1e-2))
    assert result["informative"] and result["target"] == pytest.approx(min(0.01, result["initial_loss"] / MIN_DROP))
    if pretrain:
        assert result["initial_loss"] < 0.01 * MIN_DROP and result["target"] < 0.01
    assert result["passed"] and result["final_loss"] <= result["initial_loss"] / MIN_DROP


def _x_labels(chart: str) -> list[str]:
    """The tick labels under the chart's bottom border."""
    lines = chart.splitlines()
    bottom = next(i for i, line in enumerate(lines) if "└" in line)
    return lines[bottom + 1].split()


@pytest.mark.parametrize("n", [*range(1, 41), 99, 100, 101, 250, 499, 500, 501])
def test_the_step_axis_has_whole_steps(n: int) -> None:
    labels = _x_labels(loss_chart([2.3 * 0.97 ** i for i in range(n)]))
    assert labels and all(re.fullmatch(r"\d+", t) for t in labels), labels
    ticks = [int(t) for t in labels]
    assert ticks[0] == 0 and ticks == sorted(set(ticks)) and ticks[-1] <= max(1, n - 1)
    assert step_ticks(max(1, n - 1)) == ticks


def test_non_finite_losses_keep_their_steps() -> None:
    """A NaN in the middle leaves a gap; the last step is still the last one drawn."""
    labels = _x_labels(loss_chart([1.0, math.nan, 0.5, 0.2]))
    assert labels[-1] == "3"
