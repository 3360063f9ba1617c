"""Underfitting names a plateau only: a loss that rose, or ended far above its start, never reads as one.

Generated runs (``tests/synthetic_runs.py``): the training and validation losses held close
together along a family of shapes. A flat loss near its start (with noise) is underfitting;
the same run with the loss climbing over the last 40% of the run, or ending several times
its start (a divergence, steadily or in a jump, then flat), is not, and no finding may call
that rise a plateau.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from synthetic_runs import healthy_series, model_summary, write_run  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

N = 400


def _shape(kind: str, factor: float, n: int) -> np.ndarray:
    """A loss curve from 2.3 (chance for 10 classes): flat, or rising ``factor``x steadily, late, or in a jump then flat."""
    t = np.arange(n) / (n - 1)
    if kind == "flat":
        return np.full(n, 2.3)
    if kind == "steady":
        return 2.3 * factor**t
    if kind == "late":  # flat, then a climb over the last 40%
        return 2.3 * factor ** np.clip((t - 0.6) / 0.4, 0, 1)
    return np.where(t < 0.3, 2.3, 2.3 * factor)  # "jump": up early, then flat far above the start


def _run(tmp_path: Path, kind: str, factor: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    s = healthy_series(N, seed)
    t = np.arange(N)
    loss = _shape(kind, factor, N) * (1 + 0.01 * rng.standard_normal(N))
    s["train/loss"] = (t, loss)
    every = t[::25]
    s["val/loss"] = (every, loss[every] * 1.02)
    return write_run(tmp_path / f"{kind}-{factor}-{seed}", s, model=model_summary())


RISING = [(kind, factor, seed) for kind in ("steady", "late", "jump") for factor in (1.3, 2.0, 10.0, 1e4) for seed in (0, 1)]


@pytest.mark.parametrize(("kind", "factor", "seed"), RISING, ids=[f"{k}-{f:g}-{s}" for k, f, s in RISING])
def test_rising_loss_is_not_underfitting(tmp_path: Path, kind: str, factor: float, seed: int) -> None:
    diagnosis = diagnose(open_run(_run(tmp_path, kind, factor, seed)))
    everything = diagnosis.findings + diagnosis.notes
    assert "underfitting" not in [f.code for f in everything]
    for finding in everything:
        assert "plateau" not in finding.title.lower() or finding.code != "underfitting"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_loss_near_its_start_is_underfitting(tmp_path: Path, seed: int) -> None:
    """The near miss: the same run with the loss flat at its start is the plateau the finding names."""
    diagnosis = diagnose(open_run(_run(tmp_path, "flat", 1.0, seed)))
    assert "underfitting" in [f.code for f in diagnosis.findings]
