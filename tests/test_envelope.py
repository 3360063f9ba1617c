"""Min/max envelopes (``tuidiag.store.envelope``): exact over any aligned range, however built (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.store.envelope import SHIFT_STEP, Level, Pyramid, coarsen, from_rows, merge, zigzag

FIELDS = ("bucket", "count", "bad", "lo", "hi", "lo_pos", "first_step", "first_bad", "last_step", "last_value")
values = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 1e300, -1e-300]))


@st.composite
def series(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Rows in write order: mostly rising steps, with repeats, steps going back and gaps."""
    n = draw(st.integers(1, 120))
    jumps = draw(st.lists(st.sampled_from([0, 1, 1, 1, 2, 7, 300, -3]), min_size=n, max_size=n))
    steps = np.maximum(0, np.cumsum(jumps)).astype(np.int64)
    return steps, np.array(draw(st.lists(values, min_size=n, max_size=n)), np.float64)


def _same(a: Level, b: Level) -> None:
    assert a.shift == b.shift
    for name in FIELDS:
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    np.testing.assert_allclose(a.total, b.total, rtol=1e-9, atol=1e-6)


@settings(max_examples=examples(60), deadline=None)
@given(data=series(), shift=st.integers(0, 6), cuts=st.lists(st.integers(0, 1000), max_size=4), bounds=st.tuples(st.integers(0, 200), st.integers(0, 200)))
def test_extremes_of_any_range_are_the_raw_extremes(data: tuple[np.ndarray, np.ndarray], shift: int, cuts: list[int],
                                                    bounds: tuple[int, int]) -> None:
    """Built at once or from parts (shards) or grown flush by flush (a live tail): the same levels, and the min and
    max over any range of whole buckets equal those of the rows in it; the chart's points reach both."""
    steps, vals = data
    whole = Pyramid.of(from_rows(steps, vals, shift))
    pieces = np.split(np.arange(len(steps)), sorted({c % (len(steps) + 1) for c in cuts}))
    parts = [from_rows(steps[i], vals[i], shift) for i in pieces]
    _same(merge(parts), whole.levels[shift])
    grown = Pyramid.of(parts[0])
    for part in parts[1:]:
        grown.extend(part)
    assert sorted(grown.levels) == sorted(whole.levels)
    for s in whole.levels:
        _same(grown.levels[s], whole.levels[s])
        _same(coarsen(whole.levels[shift], s), whole.levels[s])
    lo, hi = (min(bounds) << shift), ((max(bounds) + 1) << shift)
    inside = (steps >= lo) & (steps < hi) & np.isfinite(vals)
    low, high = whole.extremes(lo, hi)
    if inside.any():
        assert (low, high) == (vals[inside].min(), vals[inside].max())
        x, y = zigzag(whole.levels[shift].between(lo, hi - 1))
        assert y.min() == vals[inside].min() and y.max() == vals[inside].max()
        assert np.all(np.diff(x) >= 0)
    else:
        assert np.isnan(low) and np.isnan(high)


def test_a_one_step_spike_shows_at_every_level() -> None:
    steps = np.arange(1_000_000, dtype=np.int64)
    vals = np.zeros(len(steps))
    vals[123_457] = 9.0
    pyramid = Pyramid.of(from_rows(steps, vals))
    for level in pyramid.levels.values():
        assert zigzag(level)[1].max() == 9.0
    assert pyramid.level_for(1_000_000, 300).shift == 12 and max(pyramid.levels) - min(pyramid.levels) == 6 * SHIFT_STEP
