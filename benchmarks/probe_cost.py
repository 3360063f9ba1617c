"""What the silent-bug probes add to a training step: the stale-gradient hooks and the loss function's check.

One recorder watches the loop of ``benchmarks/recorder_overhead.py`` (an MLP of 8 Linear
layers of width 256, batch 64, Adam, ``nn.CrossEntropyLoss`` given to ``watch``, integer
targets given to ``rec.batch``). The probes' sampling period is switched between blocks
of steps, interleaved so that machine noise hits every mode alike:

- ``off``: the probes never sample (period 10**9);
- ``every 10``: the default (after every 10th optimizer step, on every 10th step);
- ``every step``: both probes sample every step (the cost of one sample, paid each step).

Prints the median step time per mode and the median of each block's ratio to the
``off`` block beside it; then, because a shared machine's noise can hide a 1% cost, the
cost of one sample of each probe timed on its own (best of 7 repeats). Usage::

    python benchmarks/probe_cost.py [--blocks 11] [--steps 200] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn

import tuidiag
from tuidiag.recorder import loss_probe, stale_grads

MODES = {"off": 10**9, "every 10": 10, "every step": 1}


def build(device: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The overhead benchmark's model and optimizer."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(7):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(256, 10)).to(device)
    return model, torch.optim.Adam(model.parameters(), 1e-3)


def block(rec: tuidiag.Recorder, model: nn.Module, optimizer: torch.optim.Optimizer, criterion: nn.Module,
          x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    """Seconds per step over ``steps`` recorded steps."""
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        rec.batch(x, y)
        loss = criterion(model(x), y)
        loss.backward()
        rec.step(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


def best_of(fn: Callable[[], None], n: int) -> float:
    """Seconds per call of ``fn``, the best of 7 repeats of ``n`` calls."""
    runs = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - start) / n)
    return min(runs)


def sample_costs(model: nn.Module, criterion: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, float]:
    """(one loss-probe sample, one stale-gradient sample, a forward+backward step without either), in seconds."""
    out = model(x).detach()
    probe = loss_probe.LossProbe(criterion, lambda: False, lambda where, exc: None)

    def with_loss_probe() -> None:
        probe.arm(0)
        criterion(out, y)
        probe.parts()

    optimizer = torch.optim.SGD(model.parameters(), 0.0)  # lr 0: the model does not change
    stale = stale_grads.StaleGradProbe(optimizer, x.device, lambda: False, lambda where, exc: None)

    def step(period: int) -> None:
        stale_grads.EVERY = period
        optimizer.step()  # arms the hooks when the period is 1
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        stale.parts()

    loss_cost = best_of(with_loss_probe, 2000) - best_of(lambda: criterion(out, y), 2000)
    sampled, plain = best_of(lambda: step(1), 200), best_of(lambda: step(10**9), 200)
    stale.close()
    return loss_cost, sampled - plain, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=11)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    x = torch.randn(64, 256, device=args.device)
    y = torch.randint(0, 10, (64,), device=args.device)
    model, optimizer = build(args.device)
    criterion = nn.CrossEntropyLoss()
    times: dict[str, list[float]] = {name: [] for name in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        with tuidiag.Recorder(Path(tmp) / "run", flush_interval=1.0) as rec:
            rec.watch(model, optimizer, loss_fn=criterion)
            block(rec, model, optimizer, criterion, x, y, 20)  # warm-up
            for b in range(args.blocks):
                for name in (MODES if b % 2 == 0 else reversed(MODES)):
                    loss_probe.EVERY = stale_grads.EVERY = MODES[name]
                    times[name].append(block(rec, model, optimizer, criterion, x, y, args.steps))
            errors = rec.errors.count
    print(f"device={args.device} torch={torch.__version__} threads={torch.get_num_threads()} blocks={args.blocks} "
          f"steps/block={args.steps} recorder errors={errors}")
    print(f"{'probes':<12} {'median ms/step':>15} {'paired ratio vs off':>20}")
    for name, samples in times.items():
        ratios = [s / o for s, o in zip(samples, times["off"])]
        print(f"{name:<12} {statistics.median(samples) * 1e3:>15.3f} {statistics.median(ratios):>19.3f}x")
    loss_cost, stale_cost, plain = sample_costs(model, criterion, x, y)
    params = sum(1 for p in model.parameters() if p.requires_grad)
    print(f"one loss-probe sample: {loss_cost * 1e6:.1f} us; one stale-gradient sample ({params} parameters): "
          f"{stale_cost * 1e6:.1f} us; a forward+backward step: {plain * 1e3:.2f} ms; at every 10th step both add "
          f"{(loss_cost + stale_cost) / 10 / plain:.2%} per step")


if __name__ == "__main__":
    main()
