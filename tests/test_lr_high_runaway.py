"""No median of the loss in the LR-too-high finding spans the runaway that ended in a non-finite loss.

A window whose median covers a runaway (the loss climbing 1e3-1e30x in the steps before
it turns NaN) reads as calm and contradicts the divergence the same finding states: "the
loss fell 30% ... to 0.935 over steps 204-253" of a run at 2.8e32 by step 253. The matrix
plants the LR-too-high signature of ``tests/cause_runs.py`` at a few steps, on falling and
flat losses, then a runaway of a chosen size over the 10 steps before a NaN at a chosen
step; every median of the loss that the finding quotes must lie within two orders of
magnitude of every finite loss in its window, no two of its windows may be nearly the same
steps (one window, one value: "10.8 over steps 240-250" beside "13 over steps 241-250"),
the divergence line names where the runaway began, and every evidence line is checked
against the raw run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cause_runs  # noqa: E402
from evidence_checker import check_diagnosis  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.diagnosis.evidence import Change, Measure  # noqa: E402
from tuidiag.format import LOSS  # noqa: E402
from tuidiag.diagnosis.view import RunView  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

HIDDEN = 100.0
"""A window whose largest finite loss is this many times its median hides a runaway."""


def _runaway(orders: float, nan_at: int) -> cause_runs.Plant:
    def plant(s: cause_runs.Series, e: cause_runs.Extra, at: int) -> None:
        steps, loss = s["train/loss"]
        ramp = np.where((steps >= nan_at - 10) & (steps < nan_at), 10.0 ** (orders * np.clip((steps - nan_at + 11) / 10, 0, 1)), 1.0)
        s["train/loss"] = (steps, np.where(steps >= nan_at, np.nan, loss * ramp))
        g_steps, g = s["grad_norm/total"]
        s["grad_norm/total"] = (g_steps, g * np.where((g_steps >= nan_at - 10) & (g_steps < nan_at), 10.0**orders, 1.0))
    return plant


def _measures(claim: object) -> list[Measure]:
    if isinstance(claim, Measure):
        return [claim]
    if isinstance(claim, Change):
        return [claim.before, claim.after]
    return [m for name in ("measure", "left", "right") if isinstance(m := getattr(claim, name, None), Measure)]


@pytest.mark.parametrize("loss", ["falling", "flat"])
@pytest.mark.parametrize("orders", [3.0, 30.0])
@pytest.mark.parametrize("nan_at", [260, 330, 399])
@pytest.mark.parametrize("lr_at", [40, 120])
def test_no_loss_median_spans_the_runaway(tmp_path: Path, loss: str, orders: float, nan_at: int, lr_at: int) -> None:
    cause_runs.PLANTS["_runaway"] = _runaway(orders, nan_at)
    try:
        run_dir = cause_runs.write(tmp_path, "run", [("lr_too_high", lr_at), ("_runaway", nan_at)], loss)
    finally:
        del cause_runs.PLANTS["_runaway"]
    diagnosis = diagnose(open_run(run_dir))
    found = [f for f in diagnosis.findings if f.code == "lr_too_high"]
    assert found, [f.code for f in diagnosis.findings]
    steps, values = RunView(open_run(run_dir)).loss
    windows = {(m.first, m.last): m.value for line in found[0].evidence for claim in getattr(line, "claims", ())
               for m in _measures(claim) if m.metric == LOSS and m.stat == "median"}
    for (a, b), (c, d) in ((x, y) for x in windows for y in windows if x < y):
        shared = max(0, min(b, d) - max(a, c) + 1)
        assert shared < 0.5 * (max(b, d) - min(a, c) + 1), ("near-identical windows, not one", (a, b), (c, d), windows)
    for line in found[0].evidence:
        for m in (m for claim in getattr(line, "claims", ()) for m in _measures(claim)):
            if m.metric != LOSS or m.stat != "median":
                continue
            window = values[(steps >= m.first) & (steps <= m.last) & np.isfinite(values)]
            assert window.max() <= HIDDEN * m.value, (str(line), m)
    assert any("ran away from step" in line for line in found[0].evidence), found[0].evidence
    check_diagnosis(run_dir, diagnosis)
