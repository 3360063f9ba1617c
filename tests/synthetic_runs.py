"""Synthetic runs for unit tests of the rules: hand-made series written in the real run format.

``healthy_series`` gives every metric a rule reads, with healthy values; a test
changes a few of them to plant one symptom and ``write_run`` stores the result
through the real ``ShardWriter`` and manifest helpers, so rules see exactly what
they would see from a recording. No torch needed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from tuidiag.format import STATUS_FINISHED
from tuidiag.recorder.writer import EventRow, Layout, MetricBatch, ShardWriter
from tuidiag.store.manifest import new_manifest, write_manifest

Series = dict[str, tuple[np.ndarray, np.ndarray]]
LAYERS = ("layer0.weight", "layer1.weight", "layer2.weight")


def healthy_series(n: int = 600, seed: int = 0) -> Series:
    """Every metric the rules read, as a healthy small run of ``n`` steps would record it."""
    rng = np.random.default_rng(seed)
    t, every25, every50 = np.arange(n), np.arange(0, n, 25), np.arange(0, n, 50)
    loss = 1.2 * np.exp(-t / 120) + 0.2 + 0.02 * rng.standard_normal(n)
    out: Series = {"train/loss": (t, loss), "lr/group0": (t, np.full(n, 1e-3)), "model/training": (t, np.ones(n)),
                   "val/loss": (every25, 1.2 * np.exp(-every25 / 120) + 0.25), "val/acc": (every25, 0.9 - 0.6 * np.exp(-every25 / 120)),
                   "grad/none_count": (t, np.zeros(n)), "time/step": (t[1:], np.full(n - 1, 0.01)),
                   "time/data_wait": (t[1:], np.full(n - 1, 3e-4)), "input/mean": (t, 0.01 * rng.standard_normal(n)),
                   "input/std": (t, np.ones(n)), "input/abs_max": (t, np.full(n, 4.0)), "input/nonfinite": (t, np.zeros(n)),
                   "target/majority_share": (t, np.full(n, 0.3)), "act/dead_frac/relu": (every50, np.full(len(every50), 0.05))}
    norms = [np.abs(0.4 + 0.05 * rng.standard_normal(n)) for _ in LAYERS]
    out.update({f"grad_norm/{name}": (t, v) for name, v in zip(LAYERS, norms)})
    out["grad_norm/total"] = (t, np.sqrt(sum(v**2 for v in norms)))
    out.update({f"update_ratio/{name}": (every25, np.full(len(every25), 1e-3)) for name in LAYERS})
    return out


def model_summary(weight_layers: int = 3, **extra: Any) -> dict[str, Any]:
    """A manifest ``model`` entry for a small ReLU MLP (override any key with ``extra``)."""
    params = [{"name": name, "shape": [32, 32], "numel": 1024, "trainable": True} for name in LAYERS]
    summary = {"class": "MLP", "params": params, "n_params": 3072, "n_trainable": 3072, "weight_layers": weight_layers,
               "has_norm": False, "has_dropout": False, "activations": ["ReLU"]}
    return summary | extra


def write_run(run_dir: Path, series: Series, model: dict[str, Any] | None = None, events: list[EventRow] | None = None,
              config: dict[str, Any] | None = None, step_seconds: float | None = None, **manifest: Any) -> Path:
    """Write ``series`` (and ``events``) as a finished run through ``ShardWriter``; returns ``run_dir``.

    ``step_seconds``: each step's wall time is that many seconds after a fixed start (default: the time of writing)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    by_step: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for name, (steps, values) in series.items():
        for step, value in zip(steps.tolist(), values.tolist()):
            by_step[step].append((name, value))
    writer = ShardWriter(run_dir, 0, flush_interval=60.0, max_queue=len(by_step) + len(events or []) + 10)
    layouts: dict[tuple[str, ...], Layout] = {}
    for step in sorted(by_step):
        names = tuple(n for n, _ in by_step[step])
        layout = layouts.setdefault(names, Layout(list(names)))
        wall = time.time() if step_seconds is None else 1_800_000_000.0 + step * step_seconds
        writer.submit(MetricBatch(step, wall, layout, np.array([v for _, v in by_step[step]])), len(names))
    for event in events or []:
        writer.submit(event)
    writer.close()
    last = max(by_step) if by_step else None
    info = new_manifest(run_dir.name, config or {"lr": 1e-3, "batch_size": 64}, 1, 1.0)
    info.update(status=STATUS_FINISHED, last_step=last, model=model if model is not None else model_summary(), **manifest)
    write_manifest(run_dir, info)
    return run_dir


def log_diverging_scalars(writer: Any, steps: int = 300) -> None:
    """Scalars of a training that diverges, through any SummaryWriter-like ``writer``: the loss falls 1%
    a step, grows 1.5x a step from step 150 (the gradient norm with it) and is NaN from step 200."""
    loss = 2.0
    for step in range(steps):
        loss = loss * 0.99 if step < 150 else loss * 1.5
        writer.add_scalar("train/loss", loss if step < 200 else float("nan"), step)
        writer.add_scalar("train/lr", 0.5, step)
        writer.add_scalar("train/grad_norm", 1.0 if step < 150 else 1.5 ** (step - 150), step)
