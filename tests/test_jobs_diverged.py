"""A live job on a model that had diverged says so, and the diagnosis does not use it.

A review trained a CNN without ``zero_grad`` until its weights blew up (loss about 100, 60x its
start) and ran the jobs there: the LR finder advised raising the LR 11x, the overfit-one-batch
test failed and blamed the loss function and the data, the sharpness check read SHARP, all
without a word about the state of the weights. A job whose own starting loss is more than
:data:`~tuidiag.jobs.diverged_start.DIVERGED_FACTOR` times the run's first losses (or not
finite) now marks its result: the LR finder's suggestion unreliable (so the diagnosis does not
use it), the overfit test and sharpness NOT INFORMATIVE, each with the figures.

Real trainings through the recorder and its control channel, each job on healthy and on
blown-up weights (the last layer scaled, as a diverged run leaves it), and the pure check over
any pair of losses.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from helpers import train_sending
from tuidiag import job_kinds
from tuidiag.diagnosis import diagnose
from tuidiag.job_kinds.configs import overfit_informative
from tuidiag.jobs.diverged_start import DIVERGED_FACTOR, WRAPPER_PREFIXES, diverged_note
from tuidiag.store import control_channel as ctl
from tuidiag.store import open_run
from tuidiag.store.run_start import FirstLosses, RunStart, run_start
from tuidiag.store.job_results import job_records, read_result
from tuidiag.text.jobs import render

JOBS = {"lr_find": {"steps": 30}, "overfit_batch": {"steps": 20}, "sharpness": {"samples": 3, "batches": 2}}


def _train(run_dir: Path, job: str, blow_up: float, steps: int = 30, at: int = 20, layer: int = -1,
           wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None) -> dict[str, Any]:
    """Train the healthy MLP with the recorder; at step ``at`` scale its layer ``layer`` by ``blow_up`` and send ``job``
    (the last layer: the loss soars; the first, under BatchNorm: the loss stays as it was, the weights do not).
    ``wrap``: what the training watches instead of the MLP."""

    def scale(model: torch.nn.Module) -> None:
        with torch.no_grad():
            getattr(model, "module", model)[layer].weight.mul_(blow_up)

    _, _, request_id = train_sending(run_dir, steps, (job, JOBS[job]), at, scale, wrap)
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "done", status
    return read_result(run_dir / status["result"])


@pytest.mark.parametrize("blow_up", [1.0, 200.0])
@pytest.mark.parametrize("job", list(JOBS))
def test_a_job_on_blown_up_weights_says_the_model_had_diverged(tmp_path: Path, job: str, blow_up: float) -> None:
    record = _train(tmp_path / "run", job, blow_up)
    result = record["result"]
    diverged = blow_up > 1
    assert bool(result.get("diverged")) == diverged, result.get("diverged")
    verdict = job_kinds.get(job).verdict_of(result)
    text = render(job, result)
    if diverged:
        first = run_start(tmp_path / "run").losses
        assert first is not None and first.where == "steps 0-9"
        assert f"over {first.where}" in result["diverged"] and "diverged" in text
        assert "NOT INFORMATIVE" in job_kinds.get(job).verdicts[verdict].text or job == "lr_find"
    if job == "lr_find":
        assert result["reliable"] is not diverged
        assert verdict == ("unreliable" if diverged else "suggested")
        run = open_run(tmp_path / "run")
        used = [line for f in diagnose(run, jobs=job_records(run)).findings for line in f.evidence if "LR finder" in line]
        assert not diverged or all("not used" in line for line in used), used
    elif job == "overfit_batch":
        assert overfit_informative(result) is not diverged
        assert not diverged or (result["advice"] is None and "loss function" not in text)
    else:
        assert verdict == ("diverged" if diverged else result["verdict"])


@given(start=st.one_of(st.floats(0, 1e6), st.sampled_from([math.inf, -math.inf, math.nan])), median=st.floats(1e-6, 100))
@example(start=DIVERGED_FACTOR * 2.0, median=2.0).via("on the line: not diverged")
@example(start=DIVERGED_FACTOR * 2.0 * 1.001, median=2.0).via("just above it")
def test_the_check_says_diverged_exactly_above_the_factor_or_when_not_finite(start: float, median: float) -> None:
    note = diverged_note(start, RunStart(FirstLosses(median, 0, 9), {}))
    assert (note is not None) == (not math.isfinite(start) or start > DIVERGED_FACTOR * median), (start, median)
    if note is not None:
        assert "steps 0-9" in note and "--offline" in note


def test_without_first_losses_nothing_is_claimed() -> None:
    assert diverged_note(1e9, None) is None
    assert diverged_note(1e9, RunStart(FirstLosses(0.0, 0, 9), {})) is None  # a run that started at zero loss: no ratio to judge by


@pytest.mark.parametrize("job", list(JOBS))
def test_weights_blown_up_under_a_normal_loss_are_diverged_too(tmp_path: Path, job: str) -> None:
    """The first layer scaled 1e4 under the MLP's BatchNorm: the loss is as before, the weights are not (a review's SGD at
    LR 10 left norms of 5e15 under a loss of 1.7, and the overfit test blamed the loss function)."""
    result = _train(tmp_path / "run", job, 1e4, layer=0)["result"]
    assert result.get("diverged") and "the norm of '0.weight'" in result["diverged"], result.get("diverged")
    assert job_kinds.get(job).verdict_of(result) in ("unreliable", "diverged")


def test_a_weight_is_blown_up_from_a_hundredfold_growth() -> None:
    first = {"fc.weight": (0, 2.0), "fc.bias": (0, 0.0)}
    start = RunStart(None, first)
    assert diverged_note(1.0, start, {"fc.weight": 199.0, "fc.bias": 1e9}) is None  # a bias from 0: no ratio
    assert "'fc.weight' was 201, 100x its 2 at step 0" in diverged_note(1.0, start, {"fc.weight": 201.0})
    assert "not finite" in diverged_note(1.0, start, {"fc.weight": math.inf})
    assert diverged_note(1.0, start, {"other": 1e9}) is None  # a weight the run never recorded


PREFIXES = ["", *WRAPPER_PREFIXES, "module._orig_mod.", "_orig_mod.module."]


@pytest.mark.parametrize("job_side", PREFIXES)
@pytest.mark.parametrize("recorded_side", PREFIXES)
def test_a_weight_is_matched_through_wrapper_prefixes_and_named_as_recorded(recorded_side: str, job_side: str) -> None:
    """The recorder names weights through the model it watches (``module.`` under DDP, ``_orig_mod.`` under
    ``torch.compile``); a live job on DDP runs on the local replica, whose names lack the prefix."""
    start = RunStart(None, {f"{recorded_side}0.weight": (0, 2.0), f"{recorded_side}module_list.0.bias": (0, 1.0)})
    note = diverged_note(1.0, start, {f"{job_side}0.weight": 400.0, f"{job_side}module_list.0.bias": 1.0})
    assert note is not None and f"the norm of '{recorded_side}0.weight' was 400, 200x its 2 at step 0" in note
    assert diverged_note(1.0, start, {f"{job_side}0.weight": 3.0, f"{job_side}module_list.0.bias": 1.0}) is None


def test_a_live_job_on_a_ddp_training_checks_its_weights(tmp_path: Path) -> None:
    """A real ``DistributedDataParallel`` training (one process, gloo): the recorder records ``module.``-prefixed
    weight norms, the job runs on the replica; the first layer scaled 1e4 under BatchNorm is caught by its norm."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        result = _train(tmp_path / "run", "overfit_batch", 1e4, layer=0, wrap=DistributedDataParallel)["result"]
    finally:
        dist.destroy_process_group()
    assert run_start(tmp_path / "run").norms and all(name.startswith("module.") for name in run_start(tmp_path / "run").norms)
    assert result.get("diverged") and "the norm of 'module.0.weight'" in result["diverged"], result.get("diverged")
