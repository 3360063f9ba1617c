"""The data-wait figure of a run drawn from its envelopes says what it is: a mean over the newest buckets.

The data-loading rule (and the strip of a run read whole) states the median data wait over the median step
time over the newest 30 % of the run (:func:`~tuidiag.diagnosis.rules.data_wait.data_wait_share`); the
envelopes hold no medians, so the envelope run's strip shows the mean over the finest buckets holding the
newest steps, and its text names the statistic and the steps it covers. The runs here are written by the
recorder's own writer, with skewed waits (mostly short, some long) so that the mean and the median differ.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tuidiag.diagnosis.rules.data_wait import DATA_WAIT, STEP_TIME, data_wait_share
from tuidiag.diagnosis.view import RunView
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store import open_run
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.viewmodel.detail import system_figures
from tuidiag.viewmodel.model import RunsModel


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))


def _run(run_dir: Path, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A finished run with step times and skewed data waits (one in 8 steps waits 20x longer); its two series."""
    rng = np.random.default_rng(seed)
    step_time = 0.05 * (1 + 0.2 * rng.random(steps))
    wait = np.where(rng.random(steps) < 0.125, 0.4, 0.01) * step_time / 0.05
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600)
    layout = Layout(["train/loss", STEP_TIME, DATA_WAIT])
    for step in range(steps):
        writer.submit(MetricBatch(step, 1.7e9 + step * 0.05, layout, np.array([1.0 / (1 + step), step_time[step], wait[step]])))
        if step % 500 == 499:
            writer.flush()
    writer.close()
    manifest = new_manifest(run_dir.name, {}, 1, 1.0)
    manifest.update(status="finished", last_step=writer.last_step, summary=writer.tail.to_json())
    write_manifest(run_dir, manifest)
    return step_time, wait


@pytest.mark.parametrize(("steps", "seed"), [(3000, 0), (2071, 1), (777, 2)])
def test_envelope_strip_states_a_mean_over_the_steps_it_names(tmp_path: Path, steps: int, seed: int) -> None:
    step_time, wait = _run(tmp_path / "run", steps, seed)
    model = RunsModel(tmp_path)
    model.discover()
    (summary,) = model.refresh()
    detail = model.detail(summary.key, points=100)
    assert detail is not None and model._slots[tmp_path / "run"].envelopes is not None  # drawn from its envelopes
    shown = dict(detail.system)["data wait"]
    percent, rest = shown.split(" ", 1)
    covered = int(rest.removeprefix("(mean, last ").removesuffix(" steps)").replace(",", ""))
    assert rest == f"(mean, last {covered:,} steps)"
    assert 200 <= covered <= 200 + 256  # the finest buckets (256 steps) holding the newest 200 steps
    newest = slice(steps - covered, steps)
    assert percent == f"{wait[newest].mean() / step_time[newest].mean():.0%}"
    rule = data_wait_share(RunView(open_run(tmp_path / "run")))  # what the rule states: medians, another window
    assert rule is not None and rule.wait.stat == "median" and rule.step.stat == "median"
    assert rule.wait.value == pytest.approx(np.median(wait[rule.wait.first:rule.wait.last + 1]))
    assert percent != rule.percent  # skewed waits: the two figures differ, and the strip does not claim the rule's


def test_a_run_read_whole_shows_the_rules_figure(tmp_path: Path) -> None:
    """The strip of a run read whole is the rule's median figure, unlabelled as before."""
    _run(tmp_path / "run", 1000, 3)
    view = RunView(open_run(tmp_path / "run"))
    rule = data_wait_share(view)
    assert rule is not None and dict(system_figures(view))["data wait"] == rule.percent
