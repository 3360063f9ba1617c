"""How long the NaN hunt's replay takes next to a plain training step.

Builds a transformer encoder (``--layers`` layers of width ``--width``, batch
``--batch`` x ``--tokens`` tokens) whose layer ``--at`` (default the last; 0 makes
every later op non-finite, the most work) receives a planted overflow (its input
scaled by 1e30 on one token), then times, on ``--device``: a plain
forward + backward, and :func:`tuidiag.jobs.nan_hunt.nan_hunt` on a capture of that
step (median of ``--repeat``, wall and CPU time of this process). Prints the verdict
so a wrong answer is seen too.
Usage::

    python benchmarks/nan_hunt_speed.py [--device cpu] [--layers 6] [--width 256] [--tokens 128] [--batch 16] [--at -1]
                                        [--src DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent


class Planted(nn.Module):
    """An encoder whose layer ``at`` sees one token scaled by 1e30: its attention overflows, NaN flows on."""

    def __init__(self, layers: int, width: int, at: int) -> None:
        super().__init__()
        make = lambda: nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0, batch_first=True)  # noqa: E731
        self.layers = nn.ModuleList(make() for _ in range(layers))
        self.head = nn.Linear(width, 1)
        self.at = at

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            if i == self.at:
                spike = torch.ones_like(x)
                spike[:, 0] = 1e30
                x = x * spike
            x = layer(x)
        return self.head(x).mean(1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time(fn: Any, device: torch.device, repeat: int) -> tuple[float, float]:
    """Median wall time and median CPU time of this process (steadier on a shared machine)."""
    wall, cpu = [], []
    for _ in range(repeat):
        _sync(device)
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        _sync(device)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    """Parse the arguments, time both, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--at", type=int, default=-1, help="layer that gets the spike (default: the last)")
    parser.add_argument("--src", type=Path, default=ROOT, help="measure the tuidiag in DIR/tuidiag (default: this one)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src.resolve()))
    from tuidiag.jobs.factory import as_parts
    from tuidiag.jobs.nan_hunt import nan_hunt

    device = torch.device(args.device)
    torch.manual_seed(0)
    model = Planted(args.layers, args.width, args.at % args.layers).to(device)
    parts = as_parts({"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1), "loss_fn": nn.MSELoss()})
    x = torch.randn(args.batch, args.tokens, args.width)
    y = torch.randn(args.batch, 1)
    capture = {"model_state": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
               "optimizer_state": {}, "batch": (x, y), "step": 0}

    def step() -> None:
        loss = parts.loss(x.to(device), y.to(device))
        loss.backward()
        model.zero_grad(set_to_none=True)

    result: dict[str, Any] = {}

    def hunt() -> None:
        result.update(nan_hunt(parts, capture, device))

    plain, plain_cpu = _time(step, device, args.repeat)
    replay, replay_cpu = _time(hunt, device, args.repeat)
    print(f"tuidiag from {args.src}; device {device}, {args.layers} layers x {args.width}, batch {args.batch} x {args.tokens} tokens")
    print(f"plain forward+backward: {plain * 1000:.0f} ms wall, {plain_cpu * 1000:.0f} ms CPU; "
          f"NaN hunt: {replay * 1000:.0f} ms wall, {replay_cpu * 1000:.0f} ms CPU")
    print(f"verdict: {result.get('verdict')}; {result.get('summary')}")


if __name__ == "__main__":
    main()
