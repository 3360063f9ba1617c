"""The LR finder's suggestion rules on generated curves, and a smoke run of their benchmark."""

from __future__ import annotations

import contextlib
import io
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.jobs.lr_suggest import DEFAULT_RULE, MIN_DESCENT, RULES, descent, floor_end_index, suggest, suggest_all

ROOT = Path(__file__).resolve().parent.parent


@st.composite
def range_test_curves(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A sweep's (lrs, losses): a plateau, a descent of any depth (none included), a rise, noise; any scale and sign."""
    n = draw(st.integers(3, 120))
    lo = draw(st.floats(-8, -2))
    lrs = np.logspace(lo, lo + draw(st.floats(0.5, 9)), n)
    x = np.log10(lrs)
    center = draw(st.floats(float(x[0]), float(x[-1])))
    depth = draw(st.floats(0, 2))
    width = draw(st.floats(0.05, 2))
    losses = 1.0 - depth * (1 + np.tanh((x - center) / width)) / 2
    rise_at = draw(st.floats(float(x[0]), float(x[-1]) + 1))
    losses = losses + draw(st.floats(0, 5)) * np.clip(x - rise_at, 0, None) ** 2
    noise = draw(st.floats(0, 0.3))
    losses = losses + noise * np.random.default_rng(draw(st.integers(0, 2**16))).standard_normal(n)
    scale, shift = draw(st.floats(1e-3, 1e3)), draw(st.floats(-3, 3))
    return lrs, scale * (losses + shift)


@settings(max_examples=examples(150), deadline=None)
@given(range_test_curves())
def test_every_rule_picks_a_finite_lr_inside_the_sweep_deterministically(curve: tuple[np.ndarray, np.ndarray]) -> None:
    lrs, losses = curve
    first = suggest_all(lrs, losses)
    assert set(first) == set(RULES)
    for name, lr in first.items():
        assert math.isfinite(lr), name
        assert lrs[0] <= lr <= lrs[-1], name
    assert suggest_all(lrs, losses) == first
    assert suggest(lrs, losses) == first[DEFAULT_RULE]


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=60))
def test_rules_accept_any_finite_curve(values: list[float]) -> None:
    lrs = np.logspace(-7, 1, len(values))
    for name, lr in suggest_all(lrs, np.array(values)).items():
        assert math.isfinite(lr) and lrs[0] <= lr <= lrs[-1], name


def _textbook(lrs: np.ndarray, center: float, width: float, blow_up: float) -> np.ndarray:
    """Plateau at 2, a descent to 0.5 around ``10**center``, then a steep rise from ``10**blow_up``."""
    x = np.log10(lrs)
    return 0.5 + 1.5 * (1 - np.tanh((x - center) / width)) / 2 + 20 * np.clip(x - blow_up, 0, None) ** 2


@settings(max_examples=examples(60), deadline=None)
@given(center=st.floats(-5, -2), width=st.floats(0.3, 0.8), gap=st.floats(1.5, 3), noise=st.floats(0.003, 0.02),
       seed=st.integers(0, 999))
def test_valley_lands_in_the_descent_of_a_textbook_curve(center: float, width: float, gap: float, noise: float,
                                                         seed: int) -> None:
    """As a smoothed sweep looks: a noisy plateau (a noise-free one would be one long decreasing run), then a
    descent over a decade or more (on a much sharper one, after a long plateau, the valley can fall just before it)."""
    lrs = np.logspace(-7, 1, 100)
    losses = _textbook(lrs, center, width, center + gap) + noise * np.random.default_rng(seed).standard_normal(100)
    # the descent: from where 5% of the drop is done (give or take one point of the sweep) to the minimum
    start, end = 10 ** (center - math.atanh(0.9) * width) / (lrs[1] / lrs[0]), 10 ** (center + gap)
    for rule in ("valley", "valley_floor"):
        assert start <= suggest(lrs, losses, rule) <= end, rule


@settings(max_examples=examples(60), deadline=None)
@given(rise=st.floats(-4, 0), level=st.floats(0.05, 10), noise=st.floats(0, 0.004), seed=st.integers(0, 999))
def test_valley_floor_on_a_flat_curve_is_a_tenth_of_where_the_loss_starts_rising(rise: float, level: float, noise: float,
                                                                                  seed: int) -> None:
    """A mid-training checkpoint's sweep: flat within noise, then the loss grows once the LR is too high."""
    lrs = np.logspace(-7, 1, 100)
    x = np.log10(lrs)
    losses = level * (1 + noise * np.random.default_rng(seed).standard_normal(100) + np.clip(x - rise, 0, None) ** 2)
    lr = suggest(lrs, losses, "valley_floor")
    # the loss has risen by MIN_DESCENT at rise + sqrt(MIN_DESCENT) decades; noise moves that by a little
    assert 10 ** (rise - 1.1) <= lr <= 10 ** (rise + math.sqrt(MIN_DESCENT + 8 * noise) - 1) * 1.0001


def test_floor_end_and_descent_on_small_curves() -> None:
    assert floor_end_index(np.array([1.0, 0.99, 1.0, 1.2, 3.0])) == 2
    assert floor_end_index(np.array([-1.0, -1.02, -0.99])) == 2  # negative losses: tolerance of the size
    assert descent(np.array([2.0, 1.5, 1.0, 3.0])) == pytest.approx(0.5)
    assert descent(np.array([-1.0, -1.5, 0.0])) == pytest.approx(0.5)
    assert descent(np.array([0.0, -1.0])) == math.inf and descent(np.array([0.0, 1.0])) == 0.0
    with pytest.raises(KeyError):
        suggest(np.logspace(-3, 0, 5), np.ones(5), "no-such-rule")


def test_benchmark_quick_run_scores_every_rule_and_torch_lr_finder() -> None:
    pytest.importorskip("torch_lr_finder")
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks import lr_finder_quality as bench
    finally:
        sys.path.remove(str(ROOT))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert bench.main(["--quick", "--cases", "mlp-classes/momentum"]) == 0
    text = out.getvalue()
    row = next(line for line in text.splitlines() if line.startswith("| mlp-classes/momentum"))
    cells = row.strip("|").split("|")[4:]
    assert len(cells) == len(RULES) + 1  # every rule, then torch-lr-finder
    for cell in cells:
        lr, ratio = (float(v.split()[0]) for v in cell.split(","))
        assert lr > 0 and ratio > 0
    assert f"| {DEFAULT_RULE} (default) |" in text and "| torch-lr-finder |" in text
