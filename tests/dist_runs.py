"""Runs with distribution rows (``name/q0`` ... ``name/q100``), written in the real run format.

The quantiles are numpy's quantiles of seeded samples, so a chart of them is what
``rec.log(name=array)`` or ``histograms_every`` would have stored for those samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.synthetic_runs import LAYERS, Series, healthy_series, write_run
from tuidiag.format import DIST_GRAD_PREFIX, DIST_WEIGHT_PREFIX, SUMMARY_QUANTILES


def quantile_rows(name: str, steps: np.ndarray, samples: np.ndarray) -> Series:
    """``name/q0`` ... ``name/q100`` of ``samples`` (one row of samples per step)."""
    levels = list(SUMMARY_QUANTILES.values())
    q = np.quantile(samples, levels, axis=1)
    return {f"{name}/{key}": (steps, q[i]) for i, key in enumerate(SUMMARY_QUANTILES)}


def dist_series(n: int = 600, every: int = 5, params: tuple[str, ...] = LAYERS, logged: tuple[str, ...] = ("acts/hidden",),
                spike_at: int | None = None, seed: int = 0) -> Series:
    """A healthy run's series plus weight and gradient distributions of ``params`` every ``every`` steps and the
    logged distributions ``logged``; the gradients' maximum jumps 100-fold at step ``spike_at`` (when given)."""
    rng = np.random.default_rng(seed)
    out = healthy_series(n, seed)
    steps = np.arange(0, n, every)
    for i, param in enumerate(params):
        scale = 0.1 * (i + 1) * (1 + steps / n)[:, None]
        out.update(quantile_rows(DIST_WEIGHT_PREFIX + param, steps, scale * rng.standard_normal((len(steps), 256))))
        grads = 0.01 * np.exp(-steps / n)[:, None] * rng.standard_normal((len(steps), 256))
        if spike_at is not None:
            grads[steps == spike_at, 0] = 100 * np.abs(grads).max()
        out.update(quantile_rows(DIST_GRAD_PREFIX + param, steps, grads))
    for name in logged:
        out.update(quantile_rows(name, steps, np.abs(rng.standard_normal((len(steps), 256))) * (1 + steps / n)[:, None]))
    return out


def write_dist_run(run_dir: Path, **kwargs: object) -> Path:
    """A finished run of :func:`dist_series` (``kwargs``: its arguments), 0.01 s a step: the same files each time."""
    return write_run(run_dir, dist_series(**kwargs), step_seconds=0.01)  # type: ignore[arg-type]
