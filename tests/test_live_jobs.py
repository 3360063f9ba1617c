"""Jobs inside a live training through control requests: the training continues bit-identically,
requests from anyone but the training's user are refused, the NaN hunt arms, and the CLI drives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import train_sending, training_thread
import torch
from torch import nn

from tests.conftest import examples
import tuidiag
from tuidiag.store import control_channel as ctl
from tuidiag.store import open_run
from tuidiag.store.job_results import list_results, read_result


def _train(run_dir: Path, steps: int, request: tuple[str, dict[str, Any]] | None = None, at: int = 5) -> tuple[list[float], dict[str, torch.Tensor], str | None]:
    """Train the healthy MLP (BatchNorm, Dropout, Adam) for ``steps`` with the recorder; send ``request`` at step ``at``."""
    losses, model, request_id = train_sending(run_dir, steps, request, at)
    return losses, {k: v.clone() for k, v in model.state_dict().items()}, request_id


@pytest.mark.parametrize("job,args", [("lr_find", {"steps": 20}), ("sharpness", {"samples": 3, "batches": 2}),
                                      ("overfit_batch", {"steps": 15})])
def test_training_after_a_live_job_is_bit_identical(tmp_path: Path, job: str, args: dict[str, Any]) -> None:
    plain_losses, plain_state, _ = _train(tmp_path / "plain", 12)
    losses, state, request_id = _train(tmp_path / "with-job", 12, (job, args))
    status = ctl.read_status(tmp_path / "with-job", request_id)
    assert status["state"] == "done", status
    result = read_result(tmp_path / "with-job" / status["result"])
    assert result["job"] == job and result["source"] == "live"
    assert losses == plain_losses
    assert all(torch.equal(state[k], plain_state[k]) for k in plain_state)
    assert not (tmp_path / "with-job" / "control" / f"{request_id}.request.json").exists()
    if job == "lr_find":
        assert result["result"]["steps_run"] > 5 and result["result"]["suggested_lr"] > 0


def test_job_events_and_manifest_say_the_run_accepts_requests(tmp_path: Path) -> None:
    _train(tmp_path / "r", 8, ("lr_find", {"steps": 10}))
    run = open_run(tmp_path / "r")
    assert run.manifest["control"]["pid"] == os.getpid() and run.manifest["control"]["loss_fn"] is True
    assert any(e.kind == "job" and "lr find (live)" in e.message for e in run.events)


def _request_file(run_dir: Path) -> Path:
    return next((run_dir / "control").glob("*.request.json"))


def test_group_writable_request_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        request_id = ctl.write_request(run_dir, "lr_find", {"steps": 10})
        _request_file(run_dir).chmod(0o666)
        rec.flush()
        rec.step(1.0)
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "refused" and "writable by group or others" in status["message"]
    assert not list_results(run_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file owned by another user needs root")
def test_request_from_another_user_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        request_id = ctl.write_request(run_dir, "lr_find", {"steps": 10})
        os.chown(_request_file(run_dir), 12345, 12345)
        rec.flush()
        rec.step(1.0)
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "refused" and "uid 12345" in status["message"]
    assert any(e.kind == "control_refused" for e in open_run(run_dir).events)


class SqrtLayer(nn.Module):
    """sqrt of its input: NaN in the forward pass for a negative input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x)


def test_nan_hunt_arms_and_names_the_module_when_the_nan_comes(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(SqrtLayer(), nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    run_dir = tmp_path / "r"
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        rec.watch(model, optimizer, loss_fn=loss_fn)
        for step in range(12):
            if step == 2:
                request_id = ctl.write_request(run_dir, "nan_hunt", {"steps": 50})
                rec.flush()
            x = torch.rand(8, 4) + (torch.tensor([[-1.0, 0, 0, 0]]) if step == 7 else 0)
            y = torch.zeros(8, 2)
            rec.batch(x, y)
            loss = loss_fn(model(x), y)
            loss.backward()
            rec.step(loss)
            optimizer.zero_grad()  # no optimizer step on the NaN: keep the weights finite
            if step == 2:
                assert ctl.read_status(run_dir, request_id)["state"] == "armed"
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "done", status
    result = read_result(run_dir / status["result"])["result"]
    assert result["step"] == 7 and result["module"] == "0" and result["pass"] == "forward", result


def test_nan_hunt_window_passes_without_a_nan(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        rec.watch(model, optimizer, loss_fn=nn.MSELoss())
        request_id = ctl.write_request(run_dir, "nan_hunt", {"steps": 3})
        rec.flush()
        for _ in range(6):
            x = torch.rand(4, 4)
            rec.batch(x, torch.zeros(4, 1))
            model(x).pow(2).mean().backward()
            rec.step(1.0)
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "done" and "no non-finite" in status["message"]


def test_job_without_loss_fn_fails_cleanly_and_training_goes_on(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    model = nn.Linear(4, 1)
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        rec.watch(model, torch.optim.SGD(model.parameters(), lr=0.1))
        request_id = ctl.write_request(run_dir, "lr_find", {"steps": 10})
        rec.flush()
        for _ in range(3):
            rec.batch(torch.rand(2, 4))
            assert isinstance(rec.step(1.0), int)
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "failed" and "loss_fn" in status["message"]


def test_cli_sends_the_job_to_the_live_training(tmp_path: Path) -> None:
    """The CLI in a process of its own; the training in a thread of this one (a training process of
    its own would start a second torch and prove nothing more: the request goes through files)."""
    run_dir = tmp_path / "live"
    with training_thread(run_dir):
        cli = subprocess.run([sys.executable, "-m", "tuidiag", "lr-find", str(run_dir), "--json", "--steps", "20"],
                             capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "runs inside the live training" in cli.stderr
    result = json.loads(cli.stdout)
    assert result["steps_run"] > 5 and result["suggested_lr"] > 0
    assert open_run(run_dir).status == "finished"  # the training went on after the job and ended normally
    assert list_results(run_dir, "lr_find")


# ---- the batches a live job sees ------------------------------------------------------------------

@settings(max_examples=examples(60), deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=60), most=st.integers(0, 20))
def test_recent_batches_keep_the_newest_within_count_and_bytes(sizes: list[int], most: int) -> None:
    from tuidiag.recorder.recent_batches import ALWAYS, RecentBatches

    kept = RecentBatches(most, max_bytes=100 * 4)  # 100 float32 values
    for step, size in enumerate(sizes):
        kept.add(step, (torch.zeros(size), torch.zeros(0)))
    n = len(kept)
    assert [b[0].numel() for b in kept.batches()] == sizes[-n:]  # the newest, in order
    assert min(len(sizes), ALWAYS) <= n <= max(most, ALWAYS)
    assert kept.nbytes == 4 * sum(sizes[-n:])
    assert n <= ALWAYS or kept.nbytes <= 400
    if n < min(len(sizes), max(most, ALWAYS)):  # one more would break the byte limit
        assert kept.nbytes + 4 * sizes[-n - 1] > 400
    assert kept.of_step(len(sizes) - 1) is kept.batches()[-1] and kept.of_step(len(sizes)) is None


@pytest.mark.parametrize("at,distinct", [(3, 4), (18, 16)])
def test_a_live_sweep_says_how_many_distinct_batches_it_saw(tmp_path: Path, at: int, distinct: int) -> None:
    from tuidiag.jobs.in_training import MIN_LIVE_BATCHES

    *_, request_id = _train(tmp_path / "r", at + 1, ("lr_find", {"steps": 30}), at=at)
    status = ctl.read_status(tmp_path / "r", request_id)
    result = read_result(tmp_path / "r" / status["result"])["result"]
    assert result["batches"] == distinct
    too_few = f"only {distinct} distinct recent batches"
    assert (too_few in (result["warning"] or "")) == (distinct < MIN_LIVE_BATCHES)
    if distinct < MIN_LIVE_BATCHES:
        assert result["reliable"] is False


def test_a_training_reusing_one_batch_tensor_counts_one_batch(tmp_path: Path) -> None:
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.rand(8, 4), torch.rand(8, 1)
    with tuidiag.Recorder(tmp_path / "r", flush_interval=30.0) as rec:
        rec.watch(model, optimizer, loss_fn=nn.MSELoss())
        for step in range(12):
            if step == 10:
                request_id = ctl.write_request(tmp_path / "r", "lr_find", {"steps": 20})
                rec.flush()
            rec.batch(x, y)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            rec.step(loss)
            optimizer.step()
            optimizer.zero_grad()
    result = read_result(tmp_path / "r" / ctl.read_status(tmp_path / "r", request_id)["result"])["result"]
    assert result["batches"] == 1 and result["reliable"] is False and "only 1 distinct" in result["warning"]
