"""Data wait under gradient accumulation, on real CPU trainings through the public ``Recorder`` API.

With several ``rec.batch()`` calls per optimizer step, each batch's wait runs from the end of
the previous batch's backward pass (or the previous optimizer step), so the compute of
earlier micro-batches never counts as waiting: fast data reads as a small share of the step
(no ``data_loading_bottleneck``), and a slow loader's wait is counted for every batch.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tuidiag  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

STEPS = 10
SLEEP = 0.005


def _train(run_dir: Path, accumulate: int, sleep: float) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 4))
        optimizer = torch.optim.SGD(model.parameters(), 1e-2)
        with tuidiag.Recorder(run_dir) as rec:
            rec.watch(model, optimizer)
            for _ in range(STEPS):
                for micro in range(accumulate):
                    time.sleep(sleep)  # the loader's wait for this batch
                    x, y = torch.randn(512, 64, generator=gen), torch.randint(0, 4, (512,), generator=gen)
                    rec.batch(x, y)
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    if micro == 0:
                        optimizer.zero_grad()
                    (loss / accumulate).backward()
                rec.step(loss)
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return run_dir


@pytest.mark.parametrize("accumulate", [4])
def test_fast_data_with_accumulation_is_no_bottleneck(tmp_path: Path, accumulate: int) -> None:
    run = open_run(_train(tmp_path / "run", accumulate, 0.0))
    wait, step = run.series("time/data_wait").values, run.series("time/step").values
    assert np.median(wait) < 0.3 * np.median(step), (np.median(wait), np.median(step))  # it was (accumulate - 1) / accumulate
    assert "data_loading_bottleneck" not in [f.code for f in diagnose(run).findings]


@pytest.mark.parametrize("accumulate", [4])
def test_a_slow_loader_counts_every_batch_wait(tmp_path: Path, accumulate: int) -> None:
    run = open_run(_train(tmp_path / "run", accumulate, SLEEP))
    wait, step = run.series("time/data_wait").values, run.series("time/step").values
    assert np.median(wait) >= 0.9 * accumulate * SLEEP, np.median(wait)
    assert (wait <= step).all()
