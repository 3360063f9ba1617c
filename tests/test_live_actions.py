"""Live actions (the seeds' Step 5) through control requests: scale the LR (scheduler too), clip
gradients, save a checkpoint; each logged as an ``action`` event; bad arguments never stop training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

import tuidiag
from tuidiag.format import GRAD_MAX_NORM, GRAD_NORM_TOTAL
from tuidiag.store import control_channel as ctl
from tuidiag.store import open_run


def _train(run_dir: Path, steps: int, action: tuple[str, dict[str, Any]], at: int = 3, lr: float = 0.1):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1000, gamma=0.5)
    grad_norms, lrs = [], []
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        rec.watch(model, optimizer, scheduler=scheduler)
        for step in range(steps):
            if step == at:
                request_id = ctl.write_request(run_dir, *action)
                rec.flush()
            x = torch.randn(16, 8) * 10
            model(x).pow(2).mean().backward()
            rec.step(1.0)
            grad_norms.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()))
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            lrs.append(optimizer.param_groups[0]["lr"])
    return model, optimizer, scheduler, request_id, grad_norms, lrs


def test_scale_lr_changes_optimizer_and_scheduler_and_is_an_event(tmp_path: Path) -> None:
    _, _, scheduler, request_id, _, lrs = _train(tmp_path / "r", 6, ("scale_lr", {"factor": 0.5}))
    assert ctl.read_status(tmp_path / "r", request_id)["state"] == "done"
    assert lrs[:3] == [0.1] * 3 and lrs[3:] == [0.05] * 3
    assert scheduler.base_lrs == [0.05]
    events = [e for e in open_run(tmp_path / "r").events if e.kind == "action"]
    assert len(events) == 1 and events[0].step == 3 and "LR x0.5" in events[0].message


def test_clip_grad_clips_from_the_step_after_and_keeps_pre_clip_norms(tmp_path: Path) -> None:
    *_, request_id, grad_norms, _ = _train(tmp_path / "r", 6, ("clip_grad", {"max_norm": 0.5}), lr=1e-4)
    assert ctl.read_status(tmp_path / "r", request_id)["state"] == "done"
    assert max(grad_norms[:4]) > 0.5 and all(n <= 0.5 + 1e-4 for n in grad_norms[4:])
    run = open_run(tmp_path / "r")
    recorded = run.series(GRAD_NORM_TOTAL)
    assert recorded.values[recorded.steps >= 4].max() > 0.5  # recorded before clipping
    assert list(run.series(GRAD_MAX_NORM).steps) == [4, 5]


def test_checkpoint_now_saves_loadable_state(tmp_path: Path) -> None:
    model, optimizer, _, request_id, _, _ = _train(tmp_path / "r", 4, ("checkpoint", {}), at=3)
    status = ctl.read_status(tmp_path / "r", request_id)
    assert status["state"] == "done" and "checkpoints/step3.pt" in status["message"]
    saved = torch.load(tmp_path / "r" / "checkpoints" / "step3.pt", weights_only=True)
    assert saved["step"] == 3 and set(saved["model"]) == set(model.state_dict())


def test_bad_action_arguments_fail_cleanly(tmp_path: Path) -> None:
    *_, request_id, _, lrs = _train(tmp_path / "r", 5, ("scale_lr", {"factor": -2}))
    status = ctl.read_status(tmp_path / "r", request_id)
    assert status["state"] == "failed" and "positive" in status["message"]
    assert lrs == [0.1] * 5


def _diagnosis(*codes: str):
    from tuidiag.diagnosis.finding import Diagnosis, Finding

    return Diagnosis("r", 10, [Finding(c, c, 0.8, "warning", [], "fix") for c in codes])


def test_proposals_follow_the_findings_and_the_lr_finder() -> None:
    from tuidiag.viewmodel.actions import propose

    high = propose(_diagnosis("lr_too_high"), lr=0.3, suggested=0.01, clipping=False)
    assert [p.action for p in high] == ["scale_lr", "clip_grad", "checkpoint"]
    assert high[0].args == {"factor": 0.033} and "LR finder" in high[0].label
    assert propose(_diagnosis("lr_too_high"), lr=0.3, suggested=None, clipping=True)[0].args == {"factor": 0.3}
    assert propose(_diagnosis("lr_too_low"), lr=1e-5, suggested=None, clipping=False)[0].args == {"factor": 3.0}
    healthy = propose(_diagnosis("healthy"), lr=1e-3, suggested=None, clipping=False)
    assert [p.action for p in healthy] == ["scale_lr", "checkpoint"] and healthy[0].args == {"factor": 0.5}


def test_cli_act_on_a_live_training_and_refusal_on_a_finished_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    from helpers import training_thread

    run_dir = tmp_path / "live"
    with training_thread(run_dir, pause=0.05):  # a thread of this process: the CLI finds it live all the same
        done = subprocess.run([sys.executable, "-m", "tuidiag", "act", str(run_dir), "--checkpoint"],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "checkpoints/step" in done.stdout and list((run_dir / "checkpoints").glob("step*.pt"))
    refused = subprocess.run([sys.executable, "-m", "tuidiag", "act", str(run_dir), "--scale-lr", "0.5"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "only to a live training" in refused.stderr
