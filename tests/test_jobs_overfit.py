"""Overfit-one-batch (the seeds' checklist item 3) and the sharpness check, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import jobs_factory
import pytest
import torch

from tuidiag.cli.main import main
from tuidiag.jobs.factory import as_parts
from tuidiag.jobs.lr_find import LRFindConfig, lr_find
from tuidiag.jobs.overfit import OverfitConfig, overfit_batch
from tuidiag.store.job_results import list_results
from tuidiag.jobs.sharpness import SharpnessConfig, sharpness
from tuidiag.jobs.trainability import training_blocker

CPU = torch.device("cpu")


def _run(tmp_path: Path, factory: str) -> Path:
    run = tmp_path / "run"
    jobs_factory.record(run, f"jobs_factory:{factory}", steps=2)
    return run


def test_healthy_model_memorises_one_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "plain_mlp")
    capsys.readouterr()
    assert main(["overfit-batch", str(run), "--yes", "--json", "--device", "cpu", "--lr", "0.01"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] is True and result["reason"] == "target reached"
    assert result["final_loss"] <= 0.01 < result["initial_loss"]
    assert 0 < result["steps"] < 500 and len(result["losses"]) == result["steps"] + 1
    assert result["optimizer"] == "adam" and result["lr"] == pytest.approx(1e-2)
    assert len(list_results(run, "overfit_batch")) == 1


def test_model_that_ignores_its_input_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "broken")
    capsys.readouterr()
    assert main(["overfit-batch", str(run), "--yes", "--json", "--steps", "60", "--lr", "0.01"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] is False and result["reason"] == "steps exhausted" and result["steps"] == 60
    assert result["final_loss"] > 0.5 and "detached" in result["advice"]


def test_text_output_has_verdict_and_curve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "plain_mlp")
    assert main(["overfit-batch", str(run), "--yes", "--lr", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "Overfit one batch: PASS (target reached)" in out and "step" in out


def test_run_optimizer_option_uses_the_factory_optimizer() -> None:
    parts = as_parts(jobs_factory.plain_mlp())
    result = overfit_batch(parts, CPU, OverfitConfig(steps=60, lr=None, optimizer="run"))
    assert result["lr"] == pytest.approx(1e-2) and result["optimizer"] == "run"
    assert result["losses"][-1] < result["losses"][0]
    assert parts.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2)


@pytest.mark.parametrize(("factory", "optimizer", "lr"), [("plain_mlp", "run", 1e-7), ("broken", "run", 0.01),
                                                      ("broken", "adam", 0.01)])
def test_a_failure_with_the_runs_optimizer_does_not_blame_the_model(factory: str, optimizer: str, lr: float) -> None:
    """With the run's own optimizer a failure can be its settings (an LR of 1e-7 fits nothing in 30 steps), so the
    advice says so and points to the default test; only the default optimizer's failure blames the model or loss."""
    parts = as_parts(getattr(jobs_factory, factory)())
    result = overfit_batch(parts, CPU, OverfitConfig(steps=30, lr=lr, optimizer=optimizer))
    assert result["passed"] is False
    if optimizer == "run":
        assert result["advice"].startswith(f"the run's own optimizer at LR {lr:.3g} could not memorise one batch in 30 steps")
        assert "leave out --optimizer run" in result["advice"] and "no amount of training" not in result["advice"]
    else:
        assert "no amount of training fixes these" in result["advice"]


def test_sharpness_flat_vs_sharp_and_reproducible() -> None:
    parts = as_parts(jobs_factory.plain_mlp())
    overfit_batch(parts, CPU, OverfitConfig(steps=5))  # restored: the model is back at its initial weights
    small = sharpness(parts, CPU, SharpnessConfig(epsilon=0.01, samples=4))
    large = sharpness(parts, CPU, SharpnessConfig(epsilon=1.0, samples=4))
    again = sharpness(parts, CPU, SharpnessConfig(epsilon=1.0, samples=4))
    assert small["verdict"] == "flat" and abs(small["ratio"]) < 0.1
    assert large["ratio"] > small["ratio"] and large["verdict"] == "sharp"
    assert again["ratio"] == large["ratio"]  # private generator: same perturbations


def test_sharpness_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "healthy")
    capsys.readouterr()
    assert main(["sharpness", str(run), "--yes", "--samples", "3"]) == 0
    assert "Sharpness: " in capsys.readouterr().out
    assert main(["sharpness", str(run), "--yes", "--epsilon", "-1"]) == 2
    assert len(list_results(run, "sharpness")) == 1


# ---- models that cannot train: every job answers with the cause, never a torch error ---------

JOBS = {  # command, extra arguments, how the result says "not trainable"
    "overfit-batch": (["--steps", "20"], lambda r: (r["passed"], r["reason"], r["blocked"]["code"], r["advice"])),
    "overfit-batch-run": (["--steps", "20", "--optimizer", "run"],
                          lambda r: (r["passed"], r["reason"], r["blocked"]["code"], r["advice"])),
    "lr-find": (["--steps", "10"], lambda r: (r["suggested_lr"], r["stopped"], r["stopped"].split(": ")[1], r["warning"])),
    "sharpness": (["--samples", "2"], lambda r: (r["verdict"], r["summary"], r["blocked"]["code"], r["blocked"]["explanation"])),
}
FIRST = {"overfit-batch": False, "overfit-batch-run": False, "lr-find": None, "sharpness": "untrainable"}
WORDS = {"all_frozen": "requires_grad=False", "some_frozen": "requires_grad=False", "detached_output": "grad_fn",
         "loss_without_grad_fn": "grad_fn", "integer_output": "integer tensor (int64)",
         "loss_per_sample": "not a scalar", "loss_as_float": "returned a float"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("untrainable") / "run"
    jobs_factory.record(run, "jobs_factory:plain_mlp", steps=2)
    return run


@pytest.mark.parametrize("case", sorted(jobs_factory.UNTRAINABLE))
@pytest.mark.parametrize("job", sorted(JOBS))
def test_a_model_that_cannot_train_gets_a_verdict_not_a_traceback(
        recorded: Path, job: str, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra, read = JOBS[job]
    capsys.readouterr()
    command = job.removesuffix("-run")
    code = main([command, str(recorded), "--yes", "--json", "--device", "cpu", "--factory", f"jobs_factory:{case}", *extra])
    out, err = capsys.readouterr()
    assert code == 1, err  # done, with a negative answer (documented in tuidiag.cli.jobs_cmd)
    assert "Traceback" not in out + err and "the job failed" not in err
    first, _, blocker, explanation = read(json.loads(out))
    assert first == FIRST[job] and blocker == jobs_factory.UNTRAINABLE[case]
    assert WORDS[case] in explanation
    main([command, str(recorded), "--yes", "--device", "cpu", "--factory", f"jobs_factory:{case}", *extra])
    text = capsys.readouterr().out
    assert WORDS[case] in text and "Traceback" not in text


def test_overfit_text_names_the_cause(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["overfit-batch", str(recorded), "--yes", "--factory", "jobs_factory:all_frozen"]) == 1
    out = capsys.readouterr().out
    assert "Overfit one batch: FAIL (not trainable: all_frozen), nothing trained" in out
    assert "requires_grad=False on all 6 parameter tensors" in out


def test_partly_frozen_model_still_trains_and_says_what_is_frozen(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["overfit-batch", str(recorded), "--yes", "--json", "--lr", "0.01", "--steps", "30",
                 "--factory", "jobs_factory:head_only"])
    result = json.loads(capsys.readouterr().out)
    assert result["blocked"] is None and result["steps"] > 0 and result["losses"][-1] < result["losses"][0] / 2
    assert code == (0 if result["passed"] else 1) and result["frozen_parameters"] == ["0.weight", "0.bias"]


def test_the_check_leaves_the_model_as_it_was() -> None:
    """One forward in training mode and a gradient: BatchNorm statistics, flags, RNG and .grad untouched."""
    parts = as_parts(jobs_factory.healthy())
    parts.model.eval()
    before = {k: v.clone() for k, v in parts.model.state_dict().items()}
    rng = torch.get_rng_state()
    batch = parts.batches[0]
    assert training_blocker(parts, batch, list(parts.model.parameters())) is None
    assert all(torch.equal(before[k], v) for k, v in parts.model.state_dict().items())
    assert not parts.model.training and torch.equal(rng, torch.get_rng_state())
    assert all(p.grad is None for p in parts.model.parameters())


def test_one_shot_batches_lose_nothing_to_the_check() -> None:
    """The LR finder checks on the first batch of a generator and still sweeps over every batch."""
    parts = as_parts(jobs_factory.plain_mlp())
    batches = list(parts.batches)[:6]
    parts.batches = iter(batches)
    result = lr_find(parts, CPU, LRFindConfig(steps=10, skip_start=0, skip_end=0))
    assert result["stopped"] == "data exhausted" and result["steps_run"] == 6
