"""On a CUDA machine: the recorder adds no host-device synchronisation to a training step.

``torch.cuda.set_sync_debug_mode("error")`` makes every synchronising CUDA call raise;
the recorder must record a full step (loss, LR, gradient norms, input health) without
one. Runs only where CUDA is available.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tuidiag

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
def test_recording_a_step_never_synchronises(run_dir) -> None:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    x, y = torch.randn(16, 32, device="cuda"), torch.randint(0, 4, (16,), device="cuda")
    with tuidiag.Recorder(run_dir, activations_every=0, weights_every=0) as rec:
        rec.watch(model, optimizer, max_grad_norm=1.0)
        for _ in range(3):  # warm-up outside the check
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            rec.step(loss)
            optimizer.step()
            optimizer.zero_grad()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(20):
                rec.batch(x, y)
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                rec.step(loss)
                optimizer.step()
                optimizer.zero_grad()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    run = tuidiag.open_run(run_dir)
    assert len(run.series("train/loss")) == 23
    assert run.manifest["stats"]["errors"] == 0
