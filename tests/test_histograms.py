"""``histograms_every``: every parameter's weight and gradient distributions, true to the tensors.

A real training records with several periods; at each recorded step the stored
quantiles must equal numpy's quantiles of the tensors as they were at that step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import tuidiag
from tuidiag.format import DIST_GRAD_PREFIX, DIST_WEIGHT_PREFIX, SUMMARY_QUANTILES
from tuidiag.recorder import ArgumentError


def _train(run_dir: Path, every: int, steps: int = 9) -> dict[tuple[int, str], np.ndarray]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), 0.1)
    seen: dict[tuple[int, str], np.ndarray] = {}
    with tuidiag.Recorder(run_dir, histograms_every=every) as rec:
        rec.watch(model, opt)
        for s in range(steps):
            loss = model(torch.randn(16, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            for name, p in model.named_parameters():
                seen[(s, DIST_WEIGHT_PREFIX + name)] = p.detach().numpy().ravel().copy()
                seen[(s, DIST_GRAD_PREFIX + name)] = p.grad.numpy().ravel().copy()
            rec.step(loss)
    assert rec.errors.count == 0 and rec.rejected_values == 0
    return seen


@pytest.mark.parametrize("every", [1, 4, 0])
def test_recorded_quantiles_are_the_tensors_quantiles_at_each_period(tmp_path: Path, every: int) -> None:
    seen = _train(tmp_path / "r", every)
    run = tuidiag.open_run(tmp_path / "r")
    dist = sorted(n for n in run.metric_names if n.startswith("dist/"))
    if every == 0:
        assert dist == []  # off by default
        return
    expected_steps = [s for s in range(9) if s % every == 0]
    for prefix in (DIST_WEIGHT_PREFIX, DIST_GRAD_PREFIX):
        for name in ("0.weight", "0.bias", "2.weight", "2.bias"):
            for key, level in SUMMARY_QUANTILES.items():
                series = run.series(f"{prefix}{name}/{key}")
                assert series.steps.tolist() == expected_steps
                for s, value in zip(series.steps, series.values):
                    assert value == pytest.approx(float(np.quantile(seen[(int(s), prefix + name)], level)), rel=1e-5, abs=1e-7)
            mean = run.series(f"{prefix}{name}/mean")
            for s, value in zip(mean.steps, mean.values):
                assert value == pytest.approx(float(seen[(int(s), prefix + name)].mean()), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", None])
def test_a_wrong_period_is_an_argument_error(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ArgumentError, match="histograms_every"):
        tuidiag.Recorder(tmp_path / "r", histograms_every=bad)
