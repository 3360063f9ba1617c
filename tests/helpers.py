"""Tiny real trainings used by several tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
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


def recorded_step(rec: tuidiag.Recorder, model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable[..., Any],
                  x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One step of a plain training loop through the recorder (batch, forward, backward, ``rec.step``, the optimizer's
    step, ``zero_grad``); its loss."""
    rec.batch(x, y)
    loss = loss_fn(model(x), y)
    loss.backward()
    rec.step(loss)
    optimizer.step()
    optimizer.zero_grad()
    return loss


def train_sending(run_dir: Path, steps: int, request: tuple[str, dict[str, Any]] | None = None, at: int = 5,
                  before: Callable[[nn.Module], None] | None = None,
                  wrap: Callable[[nn.Module], nn.Module] | None = None) -> tuple[list[float], nn.Module, str | None]:
    """Train the healthy MLP (BatchNorm, Dropout, Adam) for ``steps`` with a recorder that accepts job requests; at step
    ``at``, call ``before(model)`` and send ``request`` (job, args) through the control channel. ``wrap``: what the
    training watches and calls instead of the MLP (``DistributedDataParallel``, say). Returns the losses, the model
    (wrapped) and the request's id."""
    import jobs_factory

    from tuidiag.store import control_channel as ctl

    parts = jobs_factory.healthy()
    model, optimizer, loss_fn, batches = parts["model"], parts["optimizer"], parts["loss_fn"], parts["batches"]
    if wrap is not None:
        model = wrap(model)
    torch.manual_seed(1)
    losses, request_id = [], None
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        rec.watch(model, optimizer, loss_fn=loss_fn)
        for step in range(steps):
            if request is not None and step == at:
                if before is not None:
                    before(model)
                rec.flush()  # the rows so far are on disk (a job reads the run's first losses)
                request_id = ctl.write_request(run_dir, *request)
                rec.flush()  # the writer thread polls RUN/control at each flush
            x, y = batches[step % len(batches)]
            losses.append(recorded_step(rec, model, optimizer, loss_fn, x, y).item())
    return losses, model, request_id


def train_live(run_dir: Path, stop: Callable[[], bool], pause: float = 0.01) -> None:
    """Train the healthy MLP (BatchNorm, Dropout, Adam) with a recorder that accepts job requests, one step
    per ``pause`` seconds or so, until ``stop()``: the live run of the job tests, in a process or a thread."""
    import jobs_factory

    torch.set_num_threads(1)
    parts = jobs_factory.healthy()
    model, opt, loss_fn, batches = parts["model"], parts["optimizer"], parts["loss_fn"], parts["batches"]
    with tuidiag.Recorder(run_dir, flush_interval=0.2) as rec:
        rec.watch(model, opt, loss_fn=loss_fn)
        step = 0
        while not stop():
            x, y = batches[step % len(batches)]
            recorded_step(rec, model, opt, loss_fn, x, y)
            step += 1
            time.sleep(pause)


LIVE_TRAINING = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    import helpers
    run_dir = Path(sys.argv[1])
    helpers.train_live(run_dir, lambda: (run_dir / "stop").exists(), float(sys.argv[2]))
""")
"""A training script: ``python SCRIPT RUN PAUSE`` runs :func:`train_live` until ``RUN/stop`` exists."""


def _wait_for_control(run_dir: Path) -> None:
    """Until the manifest names "control": rec.watch() ran and a heartbeat wrote it (at most 60 s)."""
    for _ in range(1200):
        if (run_dir / "run.json").exists() and '"control"' in (run_dir / "run.json").read_text():
            return
        time.sleep(0.05)


def start_training(run_dir: Path, pause: float = 0.01) -> subprocess.Popen[bytes]:
    """Start :data:`LIVE_TRAINING` in a process of its own; touch ``RUN/stop`` to end it."""
    script = run_dir.parent / f"{run_dir.name}-train.py"
    script.write_text(LIVE_TRAINING.format(tests=str(Path(__file__).parent)))
    return subprocess.Popen([sys.executable, str(script), str(run_dir), str(pause)])


@contextmanager
def live_training(run_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real training process (healthy MLP, ~100 steps/s) that accepts job requests until the block ends."""
    training = start_training(run_dir)
    try:
        _wait_for_control(run_dir)
        yield training
    finally:
        (run_dir / "stop").touch()
        training.wait(60)


@contextmanager
def training_thread(run_dir: Path, pause: float = 0.01) -> Iterator[threading.Thread]:
    """:func:`train_live` in a thread of this process until the block ends: cheaper than :func:`live_training`
    (no interpreter or torch to start), for tests that need a live run and a job kind registered here only."""
    stop = threading.Event()
    thread = threading.Thread(target=train_live, args=(run_dir, stop.is_set, pause), name="training", daemon=True)
    thread.start()
    try:
        _wait_for_control(run_dir)
        yield thread
    finally:
        stop.set()
        thread.join(60)
