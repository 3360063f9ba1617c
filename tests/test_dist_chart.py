"""The distribution chart: which distributions a run has, in which order, and bands true to the rows.

Runs are generated over a matrix (parameters, logged tensors, run length, NaN quantiles, a
single-step spike) and read both ways the monitor reads them: whole (``open_run``) and as
envelopes (``open_envelopes``). Every line must stay inside the rows it draws, and each line's
extremes, a single-step spike included, must be drawn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tuidiag
from tests.dist_runs import quantile_rows
from tests.synthetic_runs import model_summary, write_run
from tuidiag.app.widgets.chart import draw_chart
from tuidiag.format import DIST_GRAD_PREFIX, DIST_WEIGHT_PREFIX, SUMMARY_QUANTILES
from tuidiag.store.envelope_run import open_envelopes
from tuidiag.viewmodel.detail import detail_data
from tuidiag.diagnosis.distributions import distribution_label, distribution_names
from tuidiag.viewmodel.distributions import BANDS, DIST_CHART, next_distribution, shown_distribution
from tuidiag.viewmodel.envelope_view import envelope_detail_data

POINTS = 80
"""Points per chart line: far fewer than the long runs' rows, so every line is downsampled."""

name_part = st.text(alphabet="abcxyz019._[]/", min_size=1, max_size=8).filter(lambda s: not s.endswith("/") and "//" not in s)


@settings(max_examples=30, deadline=None)
@given(params=st.lists(name_part, max_size=5, unique=True), logged=st.lists(name_part, max_size=3, unique=True),
       partial=st.booleans(), data=st.data())
def test_names_are_every_complete_family_logged_first_then_each_parameter_in_model_order(params, logged, partial, data) -> None:
    weights = data.draw(st.lists(st.sampled_from(params), unique=True)) if params else []
    grads = data.draw(st.lists(st.sampled_from(params), unique=True)) if params else []
    logged = [n for n in logged if not n.startswith(("dist/weight/", "dist/grad/"))]
    families = [*logged, *(DIST_WEIGHT_PREFIX + p for p in weights), *(DIST_GRAD_PREFIX + p for p in grads)]
    names = [f"{f}/{q}" for f in families for q in SUMMARY_QUANTILES] + ["train/loss", "grad_norm/total"]
    if partial:  # a family without every quantile row (a scalar logged as x/q50) is not a distribution
        names += ["lonely/q50", "lonely/q0"]
    order = data.draw(st.permutations(params))
    found = distribution_names(data.draw(st.permutations(names)), order)
    assert sorted(found) == sorted(families)
    n_logged = len(logged)
    assert sorted(found[:n_logged]) == sorted(logged)
    per_param = [f[len(DIST_WEIGHT_PREFIX):] if f.startswith(DIST_WEIGHT_PREFIX) else f[len(DIST_GRAD_PREFIX):] for f in found[n_logged:]]
    ranks = [order.index(p) for p in per_param]
    assert ranks == sorted(ranks)  # model order, each parameter's weights then its gradient
    for i, name in enumerate(found):  # the cycle visits each once and wraps
        assert next_distribution(found, name, 1) == found[(i + 1) % len(found)]
        assert next_distribution(found, next_distribution(found, name, 1), -1) == name
    assert shown_distribution(found, "not there") == (found[0] if found else None)


def _write(path: Path, params: int, logged: bool, steps: int, nan: bool, spike: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(params * 7 + steps)
    every = 1 if steps < 50 else 3
    at = np.arange(0, steps, every)
    series = {"train/loss": (np.arange(steps), 1.0 / (1 + np.arange(steps, dtype=float)))}
    families = [f"{prefix}layer{i}.weight" for i in range(params) for prefix in (DIST_WEIGHT_PREFIX, DIST_GRAD_PREFIX)]
    families += ["acts/[bold red]h[/]"] if logged else []
    for family in families:
        samples = rng.standard_normal((len(at), 64))
        if spike:
            samples[len(at) // 2, 0] = 1e4  # one step, one element
        rows = quantile_rows(family, at, samples)
        if nan:  # a tensor with no finite element: every quantile NaN at that step
            for key in SUMMARY_QUANTILES:
                rows[f"{family}/{key}"][1][len(at) // 3] = np.nan
            rows[f"{family}/nonfinite"] = (at, np.where(np.arange(len(at)) == len(at) // 3, 64.0, 0.0))
        series.update(rows)
    write_run(path, series, model=model_summary(params=[{"name": f"layer{i}.weight", "shape": [8, 8]} for i in range(params)]))
    return series


CASES = [(0, False, 1200, False, False), (0, True, 4, True, False), (0, True, 1200, False, True), (1, False, 4, False, False),
         (1, True, 1200, True, True), (1, False, 1200, True, False), (3, False, 1200, False, True), (3, True, 4, False, False),
         (3, True, 1200, True, False)]
"""(parameters, a logged tensor, steps, NaN quantiles at one step, a single-step spike): every pair of values of
any two of them occurs, but a 4-step run with a spike (no different from a long one)."""


@pytest.mark.parametrize("params,logged,steps,nan,spike", CASES, ids=str)
def test_the_chart_draws_each_band_within_its_rows_with_every_extreme(tmp_path, params, logged, steps, nan, spike) -> None:
    series = _write(tmp_path / "r", params, logged, steps, nan, spike)
    run, envelopes = tuidiag.open_run(tmp_path / "r"), open_envelopes(tmp_path / "r")
    expected = distribution_names(series)
    for read in (lambda d: detail_data(run, None, POINTS, dist=d), lambda d: envelope_detail_data(envelopes, POINTS, dist=d)):
        data = read(None)
        assert data.dists == expected
        if not expected:
            assert data.charts[DIST_CHART].lines == ()
            continue
        for wanted in (None, expected[-1]):
            shown = shown_distribution(expected, wanted)
            chart = read(wanted).charts[DIST_CHART]
            assert chart.title.startswith(distribution_label(shown))
            assert ("NaN/Inf elements left out" in chart.title) == nan
            assert [label for label, _, _ in chart.lines] == [label for _, label, _ in BANDS]
            for (suffix, _, _), (_, x, y) in zip(BANDS, chart.lines):
                steps_in, values = series[f"{shown}/{suffix}"]
                finite = np.isfinite(values)
                assert np.isfinite(y).all() and set(np.unique(x)) <= set(steps_in.tolist())
                assert set(np.unique(y)) <= set(values[finite].tolist())  # every point a recorded value
                assert y.max() == values[finite].max() and y.min() == values[finite].min()  # spikes and dips drawn
            text = draw_chart(chart, log=False, marker=None, width=80, height=20).plain
            assert distribution_label(shown)[:40] in text  # the name as written: brackets are not markup
    if expected:  # replay: the chart as of a step draws no later step
        at = steps // 2
        assert all(x.max() <= at for _, x, _ in detail_data(run, at, POINTS).charts[DIST_CHART].lines if len(x))


@pytest.mark.parametrize("params,logged", [(0, False), (3, True)])
def test_the_report_draws_the_first_distributions_or_says_how_to_record_them(tmp_path, params, logged) -> None:
    from tuidiag.diagnosis.distributions import NO_DISTRIBUTIONS
    from tuidiag.report.build import write_report
    from tuidiag.report.mdtext import md
    from tuidiag.report.plots_dist import MAX_PANELS

    series = _write(tmp_path / "r", params, logged, 40, nan=True, spike=False)
    text = write_report(tmp_path / "r", tmp_path / "report").read_text()
    count = len(distribution_names(series))
    if not count:
        assert not (tmp_path / "report" / "distributions.png").exists() and md(NO_DISTRIBUTIONS) in text
        return
    assert (tmp_path / "report" / "distributions.png").stat().st_size > 0
    assert f"{count} distributions recorded, the first {MAX_PANELS} drawn" in text
    assert f"{min(count, MAX_PANELS)} of those drawn had NaN/Inf elements" in text
