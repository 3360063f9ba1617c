"""The run view's ``data wait`` figure and the data-loading rule's evidence are one number over one window.

Timing series are generated (hypothesis: lengths, step times, wait shares, noise, and data waits
recorded at every step or only at some) and fed to a real :class:`~tuidiag.sources.foreign_run.ForeignRun`
through a :class:`~tuidiag.sources.run_source.Tail` that hands them over in memory (no files).
"""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.diagnosis.rules.data_wait import DATA_WAIT, STEP_TIME, data_wait_share
from tuidiag.diagnosis.rules.system import data_loading_bottleneck
from tuidiag.diagnosis.view import RunView
from tuidiag.importers.source import SourceSeries
from tuidiag.sources.foreign_run import ForeignRun
from tuidiag.sources.run_source import Batch, Tail
from tuidiag.viewmodel.detail import system_figures


class _Given(Tail):
    """Hands over the given series once."""

    def __init__(self, series: list[SourceSeries]) -> None:
        self.series = series

    def read(self) -> Batch:
        batch, self.series = Batch(series=self.series), []
        return batch


def _run(n: int, step_ms: float, share: float, noise: float, every: int, seed: int) -> ForeignRun:
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1, dtype=np.int64)
    step = step_ms / 1e3 * (1 + noise * rng.random(n))
    wait = step * share * (1 + noise * rng.standard_normal(n)).clip(0.1)
    keep = steps % every == 0 if every > 1 else np.ones(n, bool)
    walls = 1_700_000_000.0 + np.cumsum(step)
    series = [SourceSeries(STEP_TIME, steps, step, walls), SourceSeries(DATA_WAIT, steps[keep], wait[keep], walls[keep])]
    return ForeignRun("/nonexistent/generated", "generated", _Given(series))


@settings(max_examples=examples(40), deadline=None)
@given(n=st.integers(30, 800), step_ms=st.floats(3, 500), share=st.floats(0.35, 0.95), noise=st.floats(0, 1.5),
       every=st.sampled_from([1, 1, 3]), seed=st.integers(0, 2**16))
def test_strip_and_evidence_give_one_figure(n: int, step_ms: float, share: float, noise: float, every: int, seed: int) -> None:
    run = _run(n, step_ms, share, noise, every, seed)
    view = RunView(run)
    found = data_wait_share(view)
    assert found is not None
    strip = dict(system_figures(view))["data wait"]
    assert strip == found.percent
    finding = data_loading_bottleneck(view)
    if len(view.series(DATA_WAIT)[1]) < 20:  # the rule judges no fewer than 20 waits; the strip shows them
        assert finding is None
    elif found.share >= 0.3:
        assert finding is not None
        line = finding.evidence[0]
        assert line.startswith(f"the time between steps takes {strip} of each step")
        ranges = re.findall(r"steps? \d[\d,]*(?:-\d[\d,]*)?", line.split("medians over ", 1)[1])
        assert len(ranges) == len(set(ranges))  # no step range named twice
        if every == 1:
            assert len(ranges) == 1
    else:
        assert finding is None


def test_reviewed_example_one_range() -> None:
    """Waits at every step: one range in the evidence, the strip's percent in it."""
    run = _run(757, 20.0, 0.87, 0.0, 1, 0)
    finding = data_loading_bottleneck(RunView(run))
    assert finding is not None
    assert "the time between steps takes 87% of each step" in finding.evidence[0]
    assert finding.evidence[0].count("531-757") == 1 and dict(system_figures(RunView(run)))["data wait"] == "87%"
