"""The two harmful LR-finder cases of issue 11, kept as regression tests.

1. A healthy AdamW run at 1e-3, mid-training: a live sweep on the recent batches gave a
   suggestion 1000x lower, marked reliable; the diagnosis made it "LR too high (55%)", and the
   live action offered to scale the LR by 0.01.
2. An SGD run with the LR 10x too high: the curves said "LR too high (87%)"; a live sweep
   "within 3x" cut that to 54% and another finding went first.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import torch
from torch import nn

import tuidiag
from helpers import recorded_step
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.viewmodel.actions import finder_suggestion, lr_conflict, propose
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import job_records, read_result, save_result

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"


def _blobs(n: int, batch: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Five overlapping Gaussian classes: an MLP reaches a low but noisy loss within a few hundred steps."""
    gen = torch.Generator().manual_seed(1)
    centres = torch.randn(5, 20, generator=gen)
    out = []
    for _ in range(n):
        y = torch.randint(0, 5, (batch,), generator=gen)
        out.append((centres[y] + 1.5 * torch.randn(batch, 20, generator=gen), y))
    return out


def test_healthy_adamw_mid_training_live_sweep_is_unreliable_and_not_acted_on(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    run = tmp_path / "adamw"
    steps = 300
    with tuidiag.Recorder(run, flush_interval=30.0) as rec:
        rec.watch(model, optimizer, loss_fn=loss_fn)
        for step, (x, y) in enumerate(_blobs(steps)):
            if step == steps - 3:
                request_id = ctl.write_request(run, "lr_find", {})
                rec.flush()
            recorded_step(rec, model, optimizer, loss_fn, x, y)
    status = ctl.read_status(run, request_id)
    assert status["state"] == "done", status
    saved = read_result(run / status["result"])
    result = saved["result"]
    assert saved["step"] == steps - 3 and result["batches"] == 16  # the recorder kept 16 distinct batches
    assert result["reliable"] is False and "(not reliable" in result["comparison"]
    low, high = (float(v) for v in re.search(r"spans ([0-9.e+-]+)\.\.([0-9.e+-]+)", result["warning"]).groups())
    assert high / low > 3
    loaded = open_run(run)
    diagnosis = diagnose(loaded, jobs=job_records(loaded))
    assert not [f for f in diagnosis.findings if f.code in ("lr_too_high", "lr_too_low")]
    assert finder_suggestion(run) is None
    proposals = propose(diagnosis, 1e-3, finder_suggestion(run), clipping=False)
    assert all(p.args["factor"] >= 0.1 for p in proposals if p.action == "scale_lr")


def test_sgd_lr_10x_too_high_keeps_its_finding_when_a_sweep_says_within_3x(tmp_path: Path) -> None:
    run = tmp_path / "lr-too-high"
    shutil.copytree(DEMO / "lr-too-high", run)  # SGD at 0.3, diverging: the curves say the LR is too high
    before = diagnose(open_run(run))
    assert before.top.code == "lr_too_high"
    last = before.step
    checked = {"resamples": 32, "low": 0.15, "high": 0.3, "missing": 0, "spread": 2.0, "limit": 3.0}
    save_result(run, "lr_find", {"suggested_lr": 0.17, "reliable": True, "warning": None, "stability": checked,
                                 "optimizer_lr": 0.3, "run_lr": 0.3}, step=last, source="live")
    loaded = open_run(run)
    after = diagnose(loaded, jobs=job_records(loaded))
    assert [f.code for f in after.findings] == [f.code for f in before.findings]
    assert after.top.confidence == before.top.confidence
    [said] = [line for line in after.top.evidence if line.startswith("LR finder")]
    assert "within 3x" in said and "does not outweigh the curves" in said
    assert after.top.fix == before.top.fix
    assert not [p for p in propose(after, 0.3, finder_suggestion(run), clipping=False) if p.action == "scale_lr"]
    assert "not too high" in lr_conflict(after, 0.3, finder_suggestion(run))
