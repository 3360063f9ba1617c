"""The run view's steps/s and the data-loading evidence never state two rates for one run at one moment.

The header's steps/s is the run's throughput (steps per wall-clock second over the newest 30 s, pauses
between steps included: the overview's figure too). The ``data_loading_bottleneck`` evidence used to
state "N steps/s (median step time over steps a-b)", a second rate over another window that could
contradict the header; it now states the median step time over the steps it names, and says that the
header's rate also counts the time between steps. Generated timing data (hypothesis): step times,
data-wait shares that change during the run, pauses between steps, logging every K steps.
"""

from __future__ import annotations

import re
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.evidence_checker import check_diagnosis
from tuidiag.diagnosis import diagnose
from tuidiag.diagnosis.view import RunView
from tuidiag.importers.run_writer import write_run
from tuidiag.importers.source import SourceRun, SourceSeries
from tuidiag.store import open_run
from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.detail import system_figures

WINDOW = re.compile(r"over steps (\d+)-(\d+)")


def _timed_run(root: Path, step_s: float, share_early: float, share_late: float, pause_every: int, pause: float,
               steps: int, log_every: int) -> Path:
    """A finished run whose steps take ``step_s`` (a little noise), waiting for data ``share_early`` of each step
    in its first half and ``share_late`` after, with ``pause`` seconds between steps every ``pause_every`` steps."""
    rng = np.random.default_rng(steps)
    all_steps = np.arange(steps)
    step_time = step_s * (1 + 0.1 * rng.random(steps))
    wait = step_time * np.where(all_steps < steps // 2, share_early, share_late)
    walls = 1_000.0 + np.cumsum(step_time) + (all_steps // pause_every) * pause
    kept = all_steps % log_every == 0
    series = [SourceSeries(name, all_steps[kept], values[kept], walls[kept]) for name, values in
              (("loss", 1.0 / (1 + all_steps)), ("time/step", step_time), ("time/data_wait", wait))]
    return write_run(SourceRun(Path("timed"), series, {"kind": "test"}), root).path


def _throughput(steps: np.ndarray, walls: np.ndarray, window: float = 30.0) -> float:
    """Steps per wall-clock second over the newest ``window`` seconds, worked out here (not by tuidiag)."""
    first = min(int(np.searchsorted(walls, walls[-1] - window)), len(steps) - 2)
    return float(steps[-1] - steps[first]) / float(walls[-1] - walls[first])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(step_s=st.floats(2.5e-3, 0.5), share_early=st.floats(0.0, 0.95), share_late=st.floats(0.0, 0.95),
       pause_every=st.integers(5, 200), pause=st.floats(0.0, 5.0), steps=st.integers(40, 600), log_every=st.sampled_from([1, 1, 3]))
def test_header_rate_and_evidence_are_both_true_and_never_two_rates(step_s: float, share_early: float, share_late: float,
                                                                   pause_every: int, pause: float, steps: int, log_every: int) -> None:
    with TemporaryDirectory() as tmp:
        path = _timed_run(Path(tmp), step_s, share_early, share_late, pause_every, pause, steps, log_every)
        run = open_run(path)
        header = dict(system_figures(RunView(run)))
        loss = run.series("train/loss")
        assert header["steps/s"] == fmt(_throughput(loss.steps, loss.wall_times))  # the header's rate is the throughput
        diagnosis = diagnose(run)
        check_diagnosis(path, diagnosis)  # every evidence line is true of the data
        found = next((f for f in diagnosis.findings + diagnosis.notes if f.code == "data_loading_bottleneck"), None)
        if found is None:
            return
        step_times = run.series("time/step")
        for line in found.evidence:
            assert not re.search(r"[\d.]+(e[+-]\d+)?\s*steps/s", line), f"a second rate beside the header's: {line}"
        timing = next(line for line in found.evidence if line.startswith("median step time"))
        first, last = (int(x) for x in WINDOW.search(timing).groups())
        inside = (step_times.steps >= first) & (step_times.steps <= last)
        assert f"median step time {fmt(np.median(step_times.values[inside]) * 1e3)} ms over steps {first}-{last}" in timing
        assert "the run view's steps/s also counts the time between steps" in timing


def test_the_rate_the_review_saw_twice() -> None:
    """The review's moment: pauses between steps make the throughput (header) lower than 1 / median step time;
    the evidence used to print the latter as steps/s beside it."""
    with TemporaryDirectory() as tmp:
        path = _timed_run(Path(tmp), 0.01, 0.6, 0.6, 20, 1.0, 400, 1)
        run = open_run(path)
        header = dict(system_figures(RunView(run)))
        found = next(f for f in diagnose(run).findings if f.code == "data_loading_bottleneck")
        assert float(header["steps/s"]) < 1 / 0.011  # throughput: pauses included
        assert not any("steps/s (" in line or re.search(r"\d steps/s", line) for line in found.evidence)
        assert any(line.startswith("median step time 10.") and "ms over steps" in line for line in found.evidence)


def test_a_recorded_run_drawn_from_its_envelopes_shows_the_overviews_steps_per_second(tmp_path: Path) -> None:
    """A run of the current recorder (a tail summary in run.json) is drawn from its envelopes; its header's
    steps/s used to be 1 / the mean step time of its newest buckets, a figure of its own beside the overview's
    throughput; it is now the overview's figure (the same summary), by construction."""
    import torch

    import tuidiag
    from tuidiag.viewmodel.model import RunsModel

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with tuidiag.Recorder(tmp_path / "paused", flush_interval=0.05) as rec:
        rec.watch(model, optimizer)
        for step in range(60):
            batch = torch.randn(8, 4)
            rec.batch(batch)  # step and data-wait times are recorded
            loss = model(batch).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rec.step(loss)
    runs = RunsModel(tmp_path)
    runs.discover()
    (summary,) = runs.refresh()
    detail = runs.detail(summary.key)
    assert runs._slots[next(iter(runs._slots))].envelopes is not None  # drawn from the envelopes
    assert summary.steps_per_s is not None and dict(detail.system)["steps/s"] == fmt(summary.steps_per_s)
