"""The LR finder's reliability on generated sweep curves: clean descents stay reliable and stable;
flat, rising, noisy or small descents are marked unreliable, and the warning shows the spread."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.jobs.lr_find import LRFindConfig, Smoother, Sweep, assess, smoothed_sweep
from tuidiag.jobs.lr_stability import SPREAD_LIMIT, Resampler, stability

CFG = LRFindConfig()
CURVES = settings(max_examples=examples(40), deadline=None, derandomize=True)
SPREAD = re.compile(r"over 32 resamples of the batch noise the middle 80% of suggestions spans ([0-9.e+-]+)\.\.([0-9.e+-]+)")


def sweep_curve(n: int, depth: float, noise: float, seed: int, centre: float = -3.0, width: float = 0.4) -> Sweep:
    """A range test's raw losses from 1e-7 to 10: a sigmoid descent of ``depth`` (negative: a rise)
    centred at 10**centre, a blow-up near LR 1, independent batch noise of ``noise``; cut where
    the smoothed loss passes 4x its best, as the sweep stops."""
    lrs = 1e-7 * 1e8 ** (np.arange(n) / (n - 1))
    x = np.log10(lrs)
    losses = 2.0 - depth / (1 + np.exp(-(x - centre) / width)) + 0.5 * np.exp((x - 0.3) / 0.3)
    losses = losses + np.random.default_rng(seed).normal(0, noise, n)
    smoother, best = Smoother(CFG.smooth), np.inf
    for i, value in enumerate(losses):
        smoothed = smoother.add(float(value))
        best = min(best, smoothed)
        if smoothed > best + (CFG.diverge - 1) * abs(best):
            losses = losses[: i + 1]
            break
    return smoothed_sweep(Sweep([float(v) for v in lrs[: len(losses)]], [], [], "completed"), losses, CFG)


def _spread_in(warning: str | None) -> tuple[float, float]:
    found = SPREAD.search(warning or "")
    assert found, warning
    return float(found.group(1)), float(found.group(2))


lengths = st.integers(30, 160)
centres = st.floats(-5.0, -1.5)
widths = st.floats(0.2, 0.6)
seeds = st.integers(0, 2**32 - 1)


@CURVES
@given(n=lengths, centre=centres, width=widths, noise=st.floats(0.0, 0.01), seed=seeds)
@example(n=100, centre=-3.0, width=0.4, noise=0.0, seed=0)
@example(n=30, centre=-1.5, width=0.6, noise=0.01, seed=1)
def test_clean_descents_stay_reliable_and_stable(n: int, centre: float, width: float, noise: float, seed: int) -> None:
    result = assess(sweep_curve(n, 1.0, noise, seed, centre, width), CFG)
    assert result["reliable"] is True and result["warning"] is None
    assert result["stability"]["spread"] <= SPREAD_LIMIT
    assert result["stability"]["low"] <= result["stability"]["high"]


@CURVES
@given(n=lengths, centre=centres, width=widths, depth=st.floats(0.0, 0.2), times=st.floats(1.0, 10.0), seed=seeds)
@example(n=100, centre=-3.0, width=0.4, depth=0.0, times=1.0, seed=0)  # flat and noisy
@example(n=60, centre=-3.0, width=0.4, depth=0.2, times=1.0, seed=3)  # a descent as large as the noise
def test_noisy_or_small_descents_are_unreliable_with_the_spread(n: int, centre: float, width: float, depth: float, times: float,
                                                                seed: int) -> None:
    noise = min(0.5, max(depth, 0.02) * times)  # batch noise at least as large as the descent, at most a quarter of the loss
    result = assess(sweep_curve(n, depth, noise, seed, centre, width), CFG)
    assert result["reliable"] is False
    low, high = _spread_in(result["warning"])
    assert low <= high


@CURVES
@given(n=lengths, centre=centres, width=widths, rise=st.floats(0.0, 1.0), noise=st.floats(0.0, 0.05), seed=seeds)
def test_flat_or_rising_curves_are_unreliable_with_the_spread(n: int, centre: float, width: float, rise: float, noise: float,
                                                              seed: int) -> None:
    result = assess(sweep_curve(n, -rise, noise, seed, centre, width), CFG)
    assert result["reliable"] is False
    assert "no clear descent" in result["warning"] or "unreliable" in result["warning"]
    _spread_in(result["warning"])


@pytest.mark.parametrize("n", [30, 100, 200])
@pytest.mark.parametrize("noise", [0.0, 0.05, 0.3])
def test_resampling_keeps_the_trend_the_length_and_a_non_finite_tail(n: int, noise: float) -> None:
    losses = np.linspace(2.0, 0.5, n) + np.random.default_rng(0).normal(0, noise, n)
    losses[-1] = np.nan
    out = Resampler(losses).draw(np.random.default_rng(1))
    assert len(out) == n and np.isnan(out[-1]) and np.isfinite(out[:-1]).all()
    assert abs(np.median(out[:-1] - losses[:-1])) <= max(0.02, 3 * noise)  # noise moved, trend kept
    if (losses[:-1] > 0).all():
        assert (out[:-1] > 0).all()  # positive losses are resampled in log space: they stay positive
    if noise == 0.0:
        np.testing.assert_allclose(out[:-1], losses[:-1], atol=1e-12)  # a straight noise-free line has nothing to move


def test_the_check_is_generic_over_the_rule_and_deterministic() -> None:
    losses = np.linspace(2.0, 1.0, 80) + np.random.default_rng(0).normal(0, 0.2, 80)
    lrs = 1e-7 * 1e8 ** (np.arange(80) / 79)
    fixed = stability(losses, lambda curve: 1e-3)
    assert fixed.stable and fixed.spread == 1.0 and fixed.warning() is None
    lowest = stability(losses, lambda curve: float(lrs[int(np.argmin(curve))]))
    assert lowest == stability(losses, lambda curve: float(lrs[int(np.argmin(curve))]))
    assert not lowest.stable and "spans" in lowest.warning()
    never = stability(losses, lambda curve: None)
    assert not never.stable and "32 of 32 resamples of the batch noise gave no suggestion" in never.warning()
    assert never.to_json()["spread"] is None
