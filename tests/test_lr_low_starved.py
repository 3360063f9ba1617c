"""LR too low is never claimed while a weight layer gets next to no gradient.

"Gradients are there, steps are too small" is false for a layer whose gradient is zero,
below an absolute floor, or orders of magnitude below the largest layer's (the vanishing-
gradients case, where the total norm is the last layer's alone). The matrix plants the
LR-too-low signature of ``tests/cause_runs.py`` (tiny update ratios, a flat loss) and then
scales one weight layer's gradient norm (first, middle or last layer) by 10^-k; the rule
fires exactly when every layer stays within :data:`~tuidiag.diagnosis.rules.lr.STARVED_ORDERS`
of the largest and above :data:`~tuidiag.diagnosis.rules.lr.STARVED_FLOOR`, and every evidence
line of the diagnosis is checked against the raw run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cause_runs  # noqa: E402
from evidence_checker import check_diagnosis  # noqa: E402
from synthetic_runs import LAYERS  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.diagnosis.rules.lr import STARVED_FLOOR, STARVED_ORDERS  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

ORDERS = (0.0, 1.0, 2.0, 3.5, 6.0, 10.0)
"""How many orders of magnitude the chosen layer's gradient norm is scaled down."""


def _write(root: Path, layer: int, orders: float) -> Path:
    def starve(s: cause_runs.Series, e: cause_runs.Extra, at: int) -> None:
        steps, values = s[f"grad_norm/{LAYERS[layer]}"]
        s[f"grad_norm/{LAYERS[layer]}"] = (steps, values * 10.0**-orders)
        s["grad_norm/total"] = (steps, np.sqrt(sum(s[f"grad_norm/{n}"][1] ** 2 for n in LAYERS)))

    cause_runs.PLANTS["_starve"] = starve
    try:
        return cause_runs.write(root, f"starved-{layer}-{orders}", [("lr_too_low", 0), ("_starve", 0)])
    finally:
        del cause_runs.PLANTS["_starve"]


@pytest.mark.parametrize("orders", ORDERS)
@pytest.mark.parametrize("layer", range(len(LAYERS)))
def test_lr_too_low_only_when_every_layer_gets_gradient(tmp_path: Path, layer: int, orders: float) -> None:
    run_dir = _write(tmp_path, layer, orders)
    diagnosis = diagnose(open_run(run_dir))
    codes = {f.code for f in diagnosis.findings + diagnosis.notes}
    planted = 0.4 * 10.0**-orders  # the base run's layers hover around 0.4
    starved = planted < STARVED_FLOOR or orders >= STARVED_ORDERS
    assert ("lr_too_low" in codes) is not starved, (layer, orders, codes)
    check_diagnosis(run_dir, diagnosis)
