"""Rules read from activation health: dead ReLUs, saturated sigmoid/tanh units."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Evidence, Level, Measure, measure
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.lr_target import scaled
from tuidiag.diagnosis.moves import INIT_SMALLER, LR_DOWN, fix_text
from tuidiag.diagnosis.module_names import DEAD_FAMILY, SATURATING_FAMILY, family, module_label
from tuidiag.diagnosis.view import RunView
from tuidiag.format import ACT_DEAD_PREFIX, ACT_SATURATED_PREFIX

DEAD_LIMIT = 0.5
"""Share of units that are zero for every sample of a batch; healthy ReLU layers stay far below."""
SATURATED_LIMIT = 0.25


def _layers_over(view: RunView, prefix: str, limit: float) -> tuple[list[tuple[str, Measure]], tuple[int, int] | None]:
    """Layers whose median over their last 3 samples is above ``limit`` (highest first), and the onset: the first sample
    at which any was, with the earliest step it may have begun (the step after that layer's sample before, if any)."""
    hits, onset = [], None
    for name in view.run.metric_names:
        if not name.startswith(prefix):
            continue
        steps, values = view.series(name)
        if not len(values):  # one sample is enough: it counts every unit over a whole batch
            continue
        level = measure(name, steps[-3:], values[-3:], "median")
        if level.value > limit:
            hits.append((name[len(prefix):], level))
            i = int(np.flatnonzero(values > limit)[0])
            this = (int(steps[i]), int(steps[i - 1]) + 1 if i > 0 else int(steps[i]))
            onset = this if onset is None or this[0] < onset[0] else onset
    return sorted(hits, key=lambda h: -h[1].value), onset


def _hits_line(view: RunView, what: str, hits: list[tuple[str, Measure]], limit: float, kinds: tuple[str, ...],
               refs: tuple[float, ...] = ()) -> Evidence:
    """The layers over ``limit``, each named with its type and place (:func:`module_label`) and its median share."""
    shown = hits[:5]
    kind = family(view.model, kinds)
    same = len({(m.first, m.last) for _, m in shown}) <= 1
    items = ", ".join(f"{module_label(view.model, n, kind)} {m.value:.0%}" + ("" if same else f" ({m.where})") for n, m in shown)
    items += f" over {shown[0][1].where}" if same else ""
    samples = "the last 3 samples" if all(m.first < m.last for _, m in shown) else "the samples so far (up to 3)"
    return Evidence(f"{what}, median of {samples}: {items}", *(Level(m, above=limit) for _, m in shown), refs=(3, *refs))


def dead_relu(view: RunView) -> Finding | None:
    """A large share of ReLU units never activate."""
    hits, onset = _layers_over(view, ACT_DEAD_PREFIX, DEAD_LIMIT)
    if not hits or onset is None:
        return None
    limit = Evidence(f"{DEAD_LIMIT:.0%} is the limit; healthy ReLU layers have few units dead across a whole batch",
                     refs=(DEAD_LIMIT,))
    evidence: list[str] = [_hits_line(view, "dead units (zero for the whole batch)", hits, DEAD_LIMIT, DEAD_FAMILY), limit]
    fix = fix_text(scaled(LR_DOWN, "lower", view.lr_now, 0.3), "use LeakyReLU/GELU",
                   "initialise biases slightly positive (0.01) with Kaiming init")
    finding = Finding("dead_relu", "Dead ReLU units", min(0.93, 0.7 + hits[0][1].value - DEAD_LIMIT), "warning", evidence, fix,
                      onset[0])
    finding.onset_from = onset[1]
    return finding


def activation_saturation(view: RunView) -> Finding | None:
    """Sigmoid/tanh units stuck in their flat regions."""
    hits, onset = _layers_over(view, ACT_SATURATED_PREFIX, SATURATED_LIMIT)
    if not hits or onset is None:
        return None
    evidence: list[str] = [_hits_line(view, "saturated units (pre-activation beyond +/-5)", hits, SATURATED_LIMIT, SATURATING_FAMILY,
                                      (-5, 5))]
    fix = fix_text("add normalization before the activation", (INIT_SMALLER, "use a smaller init scale"), "or switch to ReLU/GELU")
    confidence = min(0.92, 0.65 + hits[0][1].value - SATURATED_LIMIT)
    finding = Finding("activation_saturation", "Saturated sigmoid/tanh units", confidence, "warning", evidence, fix, onset[0])
    finding.onset_from = onset[1]
    return finding


RULES = [dead_relu, activation_saturation]
