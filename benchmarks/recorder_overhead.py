"""Recorder overhead per training step, against a bare loop and TensorBoard's SummaryWriter.

The same CPU loop (an MLP of 8 Linear layers of width 256, batch 64, Adam) runs in
three modes, interleaved in blocks within one process so that machine noise hits
every mode alike:

- ``bare``: no logging;
- ``tuidiag``: ``tuidiag.Recorder`` with ``watch`` (loss, LR, total and per-parameter
  gradient norms, every step; weight/update stats every 25 steps; activations every 50);
- ``tensorboard``: ``SummaryWriter.add_scalar`` for loss, LR, total and per-parameter
  gradient norms, every step (what users write today).

Prints the median step time per mode, and the median over blocks of each block's
ratio to the ``bare`` run right beside it (paired, so slow drifts of a shared
machine cancel out). Usage::

    python benchmarks/recorder_overhead.py [--blocks 15] [--steps 200] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

import tuidiag


def build(device: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(7):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(256, 10)).to(device)
    return model, torch.optim.Adam(model.parameters(), 1e-3)


def train_steps(model, optimizer, x, y, steps: int, hook) -> float:
    """Run ``steps`` steps calling ``hook(step, loss)`` after backward; return seconds per step."""
    criterion = nn.CrossEntropyLoss()
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for step in range(steps):
        loss = criterion(model(x), y)
        loss.backward()
        hook(step, loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


class Modes:
    """The three logging modes, each owning its model, optimizer and writer."""

    def __init__(self, device: str, tmp: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # one model for all modes (so memory placement cannot favour one), one optimizer
        # each (so the recorder's optimizer hooks exist only in its own mode)
        model, _ = build(device)
        self.models = {name: (model, torch.optim.Adam(model.parameters(), 1e-3)) for name in ("bare", "tuidiag", "tensorboard")}
        optimizer = self.models["tuidiag"][1]
        self.recorder = tuidiag.Recorder(tmp / "tuidiag", flush_interval=1.0)
        self.recorder.watch(model, optimizer)
        self.writer = SummaryWriter(str(tmp / "tb"))
        self.global_step = 0

    def hook(self, name: str):
        if name == "bare":
            return lambda step, loss: None
        if name == "tuidiag":
            return lambda step, loss: self.recorder.step(loss)
        return self._tensorboard

    def _tensorboard(self, step: int, loss: torch.Tensor) -> None:
        model, optimizer = self.models["tensorboard"]
        self.global_step += 1
        norms = {n: p.grad.norm() for n, p in model.named_parameters() if p.grad is not None}
        self.writer.add_scalar("train/loss", loss, self.global_step)
        self.writer.add_scalar("lr/group0", optimizer.param_groups[0]["lr"], self.global_step)
        self.writer.add_scalar("grad_norm/total", torch.linalg.vector_norm(torch.stack(list(norms.values()))), self.global_step)
        for n, v in norms.items():
            self.writer.add_scalar(f"grad_norm/{n}", v, self.global_step)

    def close(self) -> None:
        self.recorder.close()
        self.writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    x = torch.randn(64, 256, device=args.device)
    y = torch.randint(0, 10, (64,), device=args.device)
    with tempfile.TemporaryDirectory() as tmp:
        modes = Modes(args.device, Path(tmp))
        times: dict[str, list[float]] = {name: [] for name in modes.models}
        for name in modes.models:  # warm-up
            train_steps(*modes.models[name], x, y, 20, modes.hook(name))
        for block in range(args.blocks):
            order = list(modes.models) if block % 2 == 0 else list(reversed(modes.models))
            for name in order:
                times[name].append(train_steps(*modes.models[name], x, y, args.steps, modes.hook(name)))
        modes.close()
        dropped = modes.recorder.dropped_rows
    print(f"device={args.device} torch={torch.__version__} threads={torch.get_num_threads()} blocks={args.blocks} steps/block={args.steps}")
    print(f"{'mode':<12} {'median ms/step':>15} {'paired ratio vs bare':>21}")
    for name, samples in times.items():
        ratios = [s / b for s, b in zip(samples, times["bare"])]
        print(f"{name:<12} {statistics.median(samples) * 1e3:>15.3f} {statistics.median(ratios):>20.3f}x")
    print(f"tuidiag dropped rows: {dropped}")


if __name__ == "__main__":
    main()
