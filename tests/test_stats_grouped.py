"""The vectorised medians the overshoot signatures use give exactly the per-group medians of ``stat_of``.

``grouped_median`` (any keys) and ``column_medians`` (series sampled together) replace a
median per sampled step, which took most of ``diagnose``'s time on a 1M-step run; both must
keep the statistic's meaning: the median of the finite values, NaN where there are none.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.diagnosis.evidence import stat_of
from tuidiag.diagnosis.stats import column_medians, grouped_median

VALUES = st.one_of(st.floats(-1e6, 1e6), st.just(float("nan")), st.just(float("inf")), st.just(float("-inf")))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), VALUES), max_size=40))
def test_grouped_median_is_the_median_of_each_keys_finite_values(pairs: list[tuple[int, float]]) -> None:
    keys = np.array([k for k, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=float)
    distinct, medians = grouped_median(keys, values)
    assert list(distinct) == sorted(set(keys.tolist()))
    expected = [stat_of(values[keys == k], "median") for k in distinct]
    assert np.array_equal(medians, np.array(expected, dtype=float), equal_nan=True)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 5).flatmap(lambda rows: st.lists(st.lists(VALUES, min_size=rows, max_size=rows), max_size=12)))
def test_column_medians_is_the_median_of_each_columns_finite_values(columns: list[list[float]]) -> None:
    rows = np.array(columns, dtype=float).T if columns else np.empty((1, 0))
    expected = [stat_of(rows[:, j], "median") for j in range(rows.shape[1])]
    assert np.array_equal(column_medians(rows), np.array(expected, dtype=float), equal_nan=True)
