"""How often the LR finder calls a sweep reliable, before and after its stability check.

Two parts, both deterministic:

1. Generated sweep curves (no training): a sigmoid descent from 1e-7 to 10 with a
   blow-up near LR 1 and independent batch noise, cut where the smoothed loss passes
   4x its best (as the sweep stops), in four classes: clean (noise <= 1% of the
   descent), noisy (noise 1-10x the descent), flat, rising. For each class: the share
   marked reliable by the old check alone (the loss fell >= 5%) and by the whole
   check now (:func:`tuidiag.jobs.lr_find.assess`), and the time one check takes.
2. Real sweeps: an AdamW MLP trained 300 steps at 1e-3 (the issue's "healthy live
   run"), swept on its last 4 batches in each rotation and on its last 16; and a
   fresh SGD MLP swept on 25 batches. For each: the suggestion, the spread over
   resampled curves, and whether it is reliable before and now.

Usage::

    python benchmarks/lr_finder_stability.py [--curves 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tuidiag.jobs.factory import Parts  # noqa: E402
from tuidiag.jobs.lr_find import LRFindConfig, Smoother, Sweep, assess, descent_warning, lr_find, smoothed_sweep  # noqa: E402

CFG = LRFindConfig()


def curve(rng: np.random.Generator, kind: str) -> Sweep:
    """One generated sweep of ``kind``: clean, noisy, flat or rising."""
    n = int(rng.integers(30, 201))
    centre, width = rng.uniform(-5.0, -1.5), rng.uniform(0.2, 0.6)
    depth = {"clean": 1.0, "noisy": rng.uniform(0.0, 0.2), "flat": 0.0, "rising": -rng.uniform(0.0, 1.0)}[kind]
    noise = {"clean": rng.uniform(0.0, 0.01), "noisy": min(0.5, max(depth, 0.02) * rng.uniform(1.0, 10.0)),
             "flat": rng.uniform(0.0, 0.3), "rising": rng.uniform(0.0, 0.05)}[kind]
    lrs = 1e-7 * 1e8 ** (np.arange(n) / (n - 1))
    x = np.log10(lrs)
    losses = 2.0 - depth / (1 + np.exp(-(x - centre) / width)) + 0.5 * np.exp((x - 0.3) / 0.3) + rng.normal(0, noise, n)
    smoother, best = Smoother(CFG.smooth), np.inf
    for i, value in enumerate(losses):
        smoothed = smoother.add(float(value))
        best = min(best, smoothed)
        if smoothed > best + (CFG.diverge - 1) * abs(best):
            losses = losses[: i + 1]
            break
    return smoothed_sweep(Sweep([float(v) for v in lrs[: len(losses)]], [], [], "completed"), losses, CFG)


def old_reliable(sweep: Sweep, found: dict) -> bool:
    """The check before this change: a suggestion, and a loss that fell at least 5%."""
    return found["suggested_lr"] is not None and descent_warning(sweep, found["suggestions"]["window"]) is None


def generated(count: int) -> None:
    rng = np.random.default_rng(0)
    print(f"Generated curves ({count} per class, 30-200 steps)")
    print(f"{'class':<8} {'reliable before':>16} {'reliable now':>13} {'median spread':>14} {'ms per check':>13}")
    for kind in ("clean", "noisy", "flat", "rising"):
        before = now = 0
        spreads, seconds = [], 0.0
        for _ in range(count):
            sweep = curve(rng, kind)
            start = time.perf_counter()
            found = assess(sweep, CFG)
            seconds += time.perf_counter() - start
            before += old_reliable(sweep, found)
            now += bool(found["reliable"])
            spreads.append(found["stability"]["spread"] or np.inf)
        print(f"{kind:<8} {before / count:>16.0%} {now / count:>13.0%} {np.median(spreads):>13.1f}x {1000 * seconds / count:>13.1f}")


def _blobs(n: int, dims: int = 20, classes: int = 5, batch: int = 32, spread: float = 1.5) -> list:
    gen = torch.Generator().manual_seed(1)
    centres = torch.randn(classes, dims, generator=gen)
    out = []
    for _ in range(n):
        y = torch.randint(0, classes, (batch,), generator=gen)
        out.append((centres[y] + spread * torch.randn(batch, dims, generator=gen), y))
    return out


def _row(name: str, result: dict) -> None:
    check = result["stability"]
    spread = f"{check['low']:.2g}..{check['high']:.2g}" if check["low"] is not None else "-"
    before = result["suggested_lr"] is not None and "no clear descent" not in (result["warning"] or "")
    print(f"{name:<34} {result['suggested_lr']:>10.3g} {spread:>18} {result['batches']:>8} {str(before):>8} {str(result['reliable']):>6}")


def real() -> None:
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    print("\nReal sweeps (100 steps, 1e-7 to 10)")
    print(f"{'sweep':<34} {'suggested':>10} {'middle 80%':>18} {'batches':>8} {'before':>8} {'now':>6}")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    batches = _blobs(300)
    for x, y in batches:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    last4 = batches[-4:]
    for k in range(4):
        _row(f"AdamW mid-training, last 4, rot {k}", lr_find(Parts(model, optimizer, loss_fn, last4[k:] + last4[:k]), cpu))
    _row("AdamW mid-training, last 16", lr_find(Parts(model, optimizer, loss_fn, batches[-16:]), cpu))
    torch.manual_seed(0)
    fresh = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    sgd = torch.optim.SGD(fresh.parameters(), lr=1e-2, momentum=0.9)
    _row("SGD+momentum MLP, fresh, 25 batches", lr_find(Parts(fresh, sgd, loss_fn, _blobs(25, 10, 3, 64, 1.0)), cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--curves", type=int, default=200, help="generated curves per class")
    args = parser.parse_args()
    generated(args.curves)
    real()


if __name__ == "__main__":
    main()
