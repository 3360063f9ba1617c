"""Rules read from activation health: dead ReLUs, saturated sigmoid/tanh units."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import lr_change
from tuidiag.diagnosis.stats import median
from tuidiag.diagnosis.view import RunView
from tuidiag.format import ACT_DEAD_PREFIX, ACT_SATURATED_PREFIX

DEAD_LIMIT = 0.5
"""Share of units that are zero for every sample of a batch; healthy ReLU layers stay far below."""
SATURATED_LIMIT = 0.25


def _layers_over(view: RunView, prefix: str, limit: float) -> tuple[list[tuple[str, float]], int | None]:
    hits, first = [], None
    for name in view.run.metric_names:
        if not name.startswith(prefix):
            continue
        steps, values = view.series(name)
        if len(values) < 2:
            continue
        level = median(values[-3:])
        if level > limit:
            hits.append((name[len(prefix):], level))
            over = np.flatnonzero(values > limit)
            first = int(steps[over[0]]) if first is None else min(first, int(steps[over[0]]))
    return sorted(hits, key=lambda h: -h[1]), first


def dead_relu(view: RunView) -> Finding | None:
    """A large share of ReLU units never activate."""
    hits, first = _layers_over(view, ACT_DEAD_PREFIX, DEAD_LIMIT)
    if not hits:
        return None
    evidence = ["dead units (zero for the whole batch): " + ", ".join(f"{n} {v:.0%}" for n, v in hits[:5]),
                f"{DEAD_LIMIT:.0%} is the limit; healthy ReLU layers have few units dead across a whole batch"]
    fix = f"lower LR {lr_change(view, 0.3)}; use LeakyReLU/GELU; initialise biases slightly positive (0.01) with Kaiming init"
    return Finding("dead_relu", "Dead ReLU units", min(0.93, 0.7 + hits[0][1] - DEAD_LIMIT), "warning", evidence, fix, first)


def activation_saturation(view: RunView) -> Finding | None:
    """Sigmoid/tanh units stuck in their flat regions."""
    hits, first = _layers_over(view, ACT_SATURATED_PREFIX, SATURATED_LIMIT)
    if not hits:
        return None
    evidence = ["saturated units (pre-activation beyond +/-5): " + ", ".join(f"{n} {v:.0%}" for n, v in hits[:5])]
    fix = "add normalization before the activation, use a smaller init scale, or switch to ReLU/GELU"
    return Finding("activation_saturation", "Saturated sigmoid/tanh units", min(0.92, 0.65 + hits[0][1] - SATURATED_LIMIT), "warning", evidence, fix, first)


RULES = [dead_relu, activation_saturation]
