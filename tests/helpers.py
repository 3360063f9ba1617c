"""Tiny real trainings used by several tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

import tuidiag


def tiny_model(seed: int = 0) -> nn.Module:
    """A two-layer ReLU MLP with a sigmoid head (so both activation probes fire)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())


def train(run_dir: Path, steps: int = 30, lr: float = 1e-2, poison_at: int | None = None, **recorder_kwargs: Any) -> nn.Module:
    """Train ``tiny_model`` for ``steps`` steps with the recorder; optionally feed a NaN batch."""
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr)
    gen = torch.Generator().manual_seed(1)
    with tuidiag.Recorder(run_dir, config={"lr": lr}, **recorder_kwargs) as rec:
        rec.watch(model, optimizer, max_grad_norm=0.5)
        for step in range(steps):
            x = torch.randn(16, 8, generator=gen)
            if step == poison_at:
                x[0, 0] = float("nan")
            y = (x[:, :1] > 0).float()
            rec.batch(x, y)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            rec.step(loss)
            optimizer.step()
            optimizer.zero_grad()
            if step % 10 == 0:
                rec.log({"val/loss": float(step), "val/acc": torch.tensor(0.5)})
    return model


LIVE_TRAINING = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    import jobs_factory, tuidiag
    run_dir = Path(sys.argv[1])
    parts = jobs_factory.healthy()
    model, opt, loss_fn, batches = parts["model"], parts["optimizer"], parts["loss_fn"], parts["batches"]
    with tuidiag.Recorder(run_dir, flush_interval=0.2) as rec:
        rec.watch(model, opt, loss_fn=loss_fn)
        for step in range(100000):
            if (run_dir / "stop").exists():
                break
            x, y = batches[step % len(batches)]
            rec.batch(x, y)
            loss = loss_fn(model(x), y)
            loss.backward()
            rec.step(loss)
            opt.step()
            opt.zero_grad()
            time.sleep(0.01)
""")


@contextmanager
def live_training(run_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real training process (healthy MLP, ~100 steps/s) that accepts job requests until the block ends."""
    script = run_dir.parent / f"{run_dir.name}-train.py"
    script.write_text(LIVE_TRAINING.format(tests=str(Path(__file__).parent)))
    training = subprocess.Popen([sys.executable, str(script), str(run_dir)])
    try:
        for _ in range(600):  # the manifest names "control" once rec.watch() ran and a heartbeat wrote it
            if (run_dir / "run.json").exists() and '"control"' in (run_dir / "run.json").read_text():
                break
            time.sleep(0.1)
        yield training
    finally:
        (run_dir / "stop").touch()
        training.wait(60)


@contextmanager
def training_thread(run_dir: Path, pause: float = 0.01) -> Iterator[threading.Thread]:
    """A real training (healthy MLP, the recorder accepting job requests) in a thread of this process, until the block ends.

    Cheaper than :func:`live_training` (no interpreter or torch to start), for tests that need a
    live run and a job kind registered in this process only."""
    import jobs_factory

    stop = threading.Event()

    def train() -> None:
        torch.set_num_threads(1)
        parts = jobs_factory.healthy()
        model, opt, loss_fn, batches = parts["model"], parts["optimizer"], parts["loss_fn"], parts["batches"]
        with tuidiag.Recorder(run_dir, flush_interval=0.1) as rec:
            rec.watch(model, opt, loss_fn=loss_fn)
            step = 0
            while not stop.is_set():
                x, y = batches[step % len(batches)]
                rec.batch(x, y)
                loss = loss_fn(model(x), y)
                loss.backward()
                rec.step(loss)
                opt.step()
                opt.zero_grad()
                step += 1
                time.sleep(pause)

    thread = threading.Thread(target=train, name="training", daemon=True)
    thread.start()
    try:
        for _ in range(600):  # the manifest names "control" once rec.watch() ran and a heartbeat wrote it
            if (run_dir / "run.json").exists() and '"control"' in (run_dir / "run.json").read_text():
                break
            time.sleep(0.05)
        yield thread
    finally:
        stop.set()
        thread.join(60)
