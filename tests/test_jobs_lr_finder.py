"""The LR range test: agreement with torch-lr-finder, a problem with a known LR limit, the CLI."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import jobs_factory
import numpy as np
import pytest
import torch
from torch import nn

from tuidiag.cli.main import main
from tuidiag.jobs.factory import Parts, as_parts
from tuidiag.jobs.lr_find import LRFindConfig, compare_lr, lr_find, steepest_index, valley_index
from tuidiag.jobs.lr_suggest import DEFAULT_RULE, RULES
from tuidiag.store.job_results import list_results

CPU = torch.device("cpu")


def _torch_lr_finder_suggestion(factory: str, steps: int) -> float:
    """torch-lr-finder's steepest-gradient suggestion on the same model, data and seed."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from torch.utils.data import DataLoader, TensorDataset

    torch_lr_finder = pytest.importorskip("torch_lr_finder")
    built = getattr(jobs_factory, factory)()
    xs = torch.cat([x for x, _ in built["batches"]])
    ys = torch.cat([y for _, y in built["batches"]])
    loader = DataLoader(TensorDataset(xs, ys), batch_size=len(built["batches"][0][0]), shuffle=False)
    finder = torch_lr_finder.LRFinder(built["model"], built["optimizer"], built["loss_fn"], device="cpu")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        finder.range_test(loader, start_lr=1e-7, end_lr=10, num_iter=steps)
        fig, ax = plt.subplots()
        _, suggestion = finder.plot(ax=ax)
        plt.close(fig)
    return float(suggestion)


@pytest.mark.parametrize("factory", ["plain_mlp", "healthy"])
def test_steepest_agrees_with_torch_lr_finder_within_3x(factory: str) -> None:
    result = lr_find(as_parts(getattr(jobs_factory, factory)()), CPU, LRFindConfig(steps=100))
    ours = result["suggestions"]["steepest"]
    theirs = _torch_lr_finder_suggestion(factory, 100)
    ratio = ours / theirs
    print(f"{factory}: tuidiag steepest {ours:.3g}, torch-lr-finder {theirs:.3g}, ratio {ratio:.2f}")
    assert 1 / 3 <= ratio <= 3
    assert result["stopped"] == "diverged"


def _linear_regression() -> tuple[Parts, float]:
    """Full-batch least squares with plain SGD: gradient descent diverges above 2 / lambda_max."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=gen) * torch.linspace(0.5, 2.0, 8)
    y = x @ torch.randn(8, 1, generator=gen)
    model = nn.Linear(8, 1, bias=False)
    nn.init.zeros_(model.weight)
    hessian = 2.0 * x.T @ x / len(x)  # of mean((x w - y)^2)
    critical = 2.0 / float(torch.linalg.eigvalsh(hessian).max())
    parts = Parts(model, torch.optim.SGD(model.parameters(), lr=0.01), nn.MSELoss(), [(x, y)])
    return parts, critical


def test_known_lr_range_on_a_quadratic() -> None:
    parts, critical = _linear_regression()
    result = lr_find(parts, CPU, LRFindConfig(steps=120, start=1e-5, end=10.0))
    assert result["stopped"] == "diverged"
    diverged_at = result["lrs"][-1]
    assert diverged_at > critical  # no divergence below the stability limit of gradient descent
    assert result["rule"] == DEFAULT_RULE and result["suggested_lr"] == result["suggestions"][DEFAULT_RULE]
    assert critical / 30 < result["suggestions"]["steepest"] < critical
    assert critical / 100 < result["suggestions"]["valley"] < critical
    assert critical / 100 < result["suggestions"]["valley_floor"] < critical
    assert result["suggestions"]["min_div10"] < critical


def test_smoothing_is_bias_corrected_and_suggestions_are_on_the_curve() -> None:
    parts, _ = _linear_regression()
    result = lr_find(parts, CPU, LRFindConfig(steps=60, start=1e-5, end=10.0))
    assert result["smoothed"][0] == pytest.approx(result["losses"][0])  # no pull towards 0 at the start
    lrs, smoothed = np.array(result["lrs"]), np.array(result["smoothed"])
    a, b = result["suggestions"]["window"]
    assert result["suggestions"]["min_div10"] == pytest.approx(lrs[a:b][np.argmin(smoothed[a:b])] / 10)
    assert result["suggested_lr"] in result["lrs"]


def test_steepest_and_valley_on_a_synthetic_curve() -> None:
    lrs = np.logspace(-6, 0, 61)
    losses = 1.0 - np.tanh(np.log10(lrs) + 3.0)  # steepest descent at lr = 1e-3
    assert lrs[steepest_index(lrs, losses)] == pytest.approx(1e-3)
    assert 1e-4 < lrs[valley_index(losses)] < 1e-1


def test_compare_lr_sentence() -> None:
    assert compare_lr(3e-2, 3e-3) == "current LR 0.03 is 10x above the suggested 0.003"
    assert "within 3x" in compare_lr(1e-3, 2e-3)
    assert compare_lr(None, 1e-3) is None


def test_cli_json_saves_the_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    jobs_factory.record(run, "jobs_factory:healthy", steps=3)
    capsys.readouterr()
    assert main(["lr-find", str(run), "--yes", "--json", "--steps", "40", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert "jobs_factory:healthy" in err
    assert result["run_lr"] == pytest.approx(1e-3)
    assert 1e-5 < result["suggested_lr"] < 10
    assert result["steps_run"] <= 40
    saved = list_results(run, "lr_find")
    assert len(saved) == 1 and json.loads(saved[0].read_text())["result"]["suggested_lr"] == result["suggested_lr"]
    assert not [p for p in (run / "jobs").iterdir() if p.name.startswith(".")]


def test_cli_text_draws_the_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    jobs_factory.record(run, "jobs_factory:plain_mlp", steps=2)
    assert main(["lr-find", str(run), "--yes", "--steps", "50"]) == 0
    out = capsys.readouterr().out
    assert "learning rate (log)" in out and f"Suggested LR (rule {DEFAULT_RULE})" in out
    assert all(name in out for name in RULES) and "suggested" in out
    assert "\x1b[" not in out  # no colour codes when stdout is not a terminal


@pytest.mark.parametrize("argv", [["--start", "1", "--end", "0.1"], ["--steps", "2"], ["--device", "cuda:99"], ["--device", "tpu?"]])
def test_bad_arguments_are_refused_before_the_factory_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    run = tmp_path / "run"
    jobs_factory.record(run, "jobs_factory:healthy", steps=1)
    calls = jobs_factory.BUILD_CALLS["count"]
    assert main(["lr-find", str(run), "--yes", *argv]) == 2
    assert "tuidiag lr-find:" in capsys.readouterr().err
    assert jobs_factory.BUILD_CALLS["count"] == calls
    assert not (run / "jobs").exists()


@pytest.mark.parametrize("given", [5, 12, 40, 50, 80])
@pytest.mark.parametrize("one_shot", [True, False], ids=["generator", "list"])
def test_lr_find_stops_when_a_one_shot_iterator_runs_out_and_says_so(given: int, one_shot: bool) -> None:
    """A generator of ``given`` batches under a 50-step sweep stops when it runs out, and the warning says so first (a
    review read 'the model may be stuck' under a sweep cut at 16 steps); a list is restarted and never runs out."""
    built = jobs_factory.plain_mlp()
    batches = (built["batches"] * 4)[:given]
    built["batches"] = (b for b in batches) if one_shot else batches
    result = lr_find(as_parts(built), CPU, LRFindConfig(steps=50))
    cut = one_shot and given < 50
    assert (result["stopped"] == "data exhausted") == cut  # else it ran to its end, or stopped when the loss diverged
    assert result["steps_run"] == given if cut else result["steps_run"] <= 50
    assert all(math.isfinite(v) for v in result["smoothed"])
    if cut:
        assert result["reliable"] is False and result["warning"].startswith(f"the batches ran out after {given} of 50 steps")
    else:
        assert "ran out" not in str(result["warning"])


def test_a_model_that_cannot_learn_gets_an_unreliable_suggestion() -> None:
    from tuidiag.jobs.factory import as_parts

    result = lr_find(as_parts(jobs_factory.broken()), torch.device("cpu"), LRFindConfig(steps=60))
    assert result["reliable"] is False and "no clear descent" in result["warning"]


def test_a_healthy_model_gets_a_reliable_suggestion() -> None:
    from tuidiag.jobs.factory import as_parts

    result = lr_find(as_parts(jobs_factory.plain_mlp()), torch.device("cpu"), LRFindConfig(steps=60))
    assert result["reliable"] is True and result["warning"] is None


@pytest.mark.parametrize("run_lr", [None, 0.001, 0.002])
def test_the_lr_comparisons_are_printed_once_each(run_lr: float | None) -> None:
    """The run's LR at the job's step first; the optimizer's only when it is another LR (a factory's initial one):
    live, the run's LR is the optimizer's, and the same LR is never compared twice."""
    from tuidiag.text.jobs import render_lr_find

    mine = "the optimizer's LR 0.001 is within 3x of the suggested 0.00148"
    run_line = f"the run's LR at step 40 {run_lr} is within 3x of the suggested 0.00148"
    result = {"suggested_lr": 1.48e-3, "rule": "valley_floor", "reliable": True, "warning": None,
              "suggestions": {"valley_floor": 1.48e-3, "window": [0, 3]}, "lrs": [1e-4, 1e-3, 1e-2], "losses": [1.0, 0.9, 1.2],
              "smoothed": [1.0, 0.9, 1.2], "steps_run": 3, "stopped": "end", "comparison": mine, "optimizer_lr": 0.001,
              "run_lr": run_lr, "run_comparison": run_line if run_lr is not None else None}
    text = render_lr_find(result)
    assert text.count(mine) == (0 if run_lr == 0.001 else 1)
    assert text.count(run_line) == (0 if run_lr is None else 1)
    if run_lr == 0.002:
        assert text.index(run_line) < text.index(mine)
