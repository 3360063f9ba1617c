"""Rules read from gradient norms: exploding, vanishing, dead layers, over-clipping."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import HUGE_GRAD, after_quiet, grad_at_start, lr_change, recent, start_level
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView
from tuidiag.format import ACT_DEAD_PREFIX, GRAD_NORM_PREFIX

ISOLATED_SHARE = 0.05
"""Gradient jumps on fewer than this share of steps, with calm norms since, are isolated (bad batches)."""


def _explosion(view: RunView) -> dict[str, float] | None:
    """The figures of an explosion: start level, recent level, growth, non-finite count; ``None`` if calm."""
    steps, g = view.grad_total
    if len(g) < 3:
        return None
    _, calm = after_quiet(view, steps, g)
    base = median(calm[: max(10, len(calm) // 5)]) if len(calm) >= 20 else float("nan")
    finite = np.isfinite(g)
    peak = float(np.max(g[finite])) if finite.any() else float("inf")
    nonfinite = int((~finite).sum())
    amp_skips = bool(nonfinite and nonfinite / len(g) < 0.05 and np.isfinite(view.loss[1]).all())
    facts = {"start": grad_at_start(view), "recent": median(recent(g, 0.2, 20)), "base": base, "peak": peak,
             "growth": peak / base if base > 0 else 0.0, "nonfinite": 0.0 if amp_skips else float(nonfinite), "amp_skips": float(amp_skips)}
    grew = len(calm) >= 20 and facts["growth"] >= 100 and peak >= 10
    facts["high_share"] = float((calm > 10 * base).mean()) if grew else 0.0
    if facts["start"] >= HUGE_GRAD or facts["recent"] >= HUGE_GRAD or grew or facts["nonfinite"]:
        return facts
    return None


def _isolated(facts: dict[str, float]) -> bool:
    """Only a few single-step jumps that came back down: atypical batches rather than an explosion."""
    calm_now = facts["start"] < HUGE_GRAD and facts["recent"] < HUGE_GRAD and not facts["nonfinite"]
    return calm_now and facts["high_share"] < ISOLATED_SHARE


def _explosion_confidence(facts: dict[str, float]) -> float:
    if facts["start"] >= HUGE_GRAD:
        return 0.88 + (0.05 if facts["nonfinite"] else 0.0)
    if _isolated(facts):
        return 0.6
    grown = 0.55 + 0.1 * np.log10(max(facts["growth"], 10) / 10) + (0.15 if facts["nonfinite"] else 0.0)
    return float(min(0.9, max(grown, 0.7 if facts["recent"] >= HUGE_GRAD else 0.0)))


def _explosion_onset(view: RunView, facts: dict[str, float]) -> int | None:
    steps, g = view.grad_total
    if facts["start"] >= HUGE_GRAD:
        return int(steps[0])
    limit = min(HUGE_GRAD, 10 * facts["base"]) if facts["base"] > 0 else HUGE_GRAD
    onset = np.flatnonzero(~np.isfinite(g) | (g > limit))
    return int(steps[onset[0]]) if len(onset) else None


def _explosion_evidence(facts: dict[str, float]) -> tuple[list[str], set[str]]:
    """Evidence lines of an explosion, and the tags the combiner reads (``from_start``, ``isolated``)."""
    evidence = [f"total gradient norm {fmt(facts['start'])} at the first steps, median {fmt(facts['recent'])} recently, "
                f"peak {fmt(facts['peak'])} (healthy range 0.1-10)"]
    if facts["base"] > 0 and facts["growth"] >= 10:
        evidence.append(f"rose {fmt(facts['growth'])}x from its median of {fmt(facts['base'])} after the first steps")
    tags = set()
    if facts["start"] >= HUGE_GRAD:
        tags.add("from_start")
        evidence.append("already far too large at the first step, before any update: initialization or input scale, not the LR")
    if _isolated(facts):
        tags.add("isolated")
        evidence.append(f"only {facts['high_share']:.1%} of steps were that high and the norm came back down: isolated jumps")
    if facts["nonfinite"] or facts["amp_skips"]:
        skips = " (isolated: looks like AMP loss-scale skips)" if facts["amp_skips"] else ""
        evidence.append(f"{int(facts['nonfinite']) or 'a few'} steps with non-finite gradient norms{skips}")
    return evidence, tags


def exploding_gradients(view: RunView) -> Finding | None:
    """Gradient norms far above the healthy range, growing without bound or jumping by orders of magnitude."""
    facts = _explosion(view)
    if facts is None:
        return None
    evidence, tags = _explosion_evidence(facts)
    if layers := _largest_layers(view):
        evidence.append(f"largest per-layer norms: {layers}")
    fix = f"clip by global norm (clip_grad_norm_(params, 1.0)); fix the init scale (Kaiming/Xavier), add normalization; reduce LR {lr_change(view, 0.3)}"
    severity = "critical" if facts["nonfinite"] else "warning"
    finding = Finding("exploding_gradients", "Exploding gradients", _explosion_confidence(facts), severity, evidence, fix, _explosion_onset(view, facts))
    finding.tags = tags
    return finding


def _largest_layers(view: RunView) -> str:
    peaks = []
    for name in view.param_order:
        values = view.series(GRAD_NORM_PREFIX + name)[1]
        values = values[np.isfinite(values)]
        if len(values):
            peaks.append((float(values.max()), name))
    return ", ".join(f"{n} {fmt(v)}" for v, n in sorted(peaks, reverse=True)[:3])


def vanishing_gradients(view: RunView) -> Finding | None:
    """Early layers get gradients orders of magnitude smaller than late layers."""
    layers = view.weight_params
    if len(layers) < 3 or view.n_steps < 20 or _loss_grew(view):
        return None
    medians = [median(recent(view.series(GRAD_NORM_PREFIX + n)[1], 0.3)) for n in layers]
    if not all(np.isfinite(medians)) or medians[-1] <= 0:
        return None
    first_q = max(1, len(layers) // 4)
    early = float(np.median(medians[:first_q]))
    orders = np.log10(medians[-1] / max(early, 1e-30))
    if orders < 3:
        return None
    evidence = [f"first layer {layers[0]} gets {fmt(medians[0])}, last layer {layers[-1]} {fmt(medians[-1])}: {orders:.1f} orders of magnitude apart (healthy: within 2)",
                "per-layer median gradient norms, input to output: " + ", ".join(fmt(m) for m in medians[:: max(1, len(medians) // 6)])]
    acts = view.model.get("activations") or []
    saturating = [a for a in acts if a in ("Sigmoid", "Tanh")]
    if saturating:
        evidence.append(f"the model uses {', '.join(saturating)} " + ("without normalization" if not view.model.get("has_norm") else "activations"))
    confidence = min(0.93, 0.75 + 0.05 * (orders - 3))
    fix = "use ReLU/GELU instead of sigmoid/tanh in hidden layers, add normalization (BatchNorm/LayerNorm) or residual connections, Kaiming/He init"
    return Finding("vanishing_gradients", "Vanishing gradients", confidence, "warning", evidence, fix, int(view.loss[0][0]) if view.n_steps else None)


def _loss_grew(view: RunView) -> bool:
    """The loss ended far above its start: the training diverged, which vanishing gradients cannot do."""
    values = view.loss[1]
    values = values[np.isfinite(values)]
    start = start_level(values)
    return len(values) >= 20 and start > 0 and median(recent(values)) > 1.5 * start


def _none_grads(view: RunView) -> tuple[int, list[str], int | None]:
    """(how many parameters recently had no gradient, their names if known, first such step)."""
    steps, count = view.series("grad/none_count")
    if not len(count) or not median(recent(count, 0.2, 5)) > 0:
        return 0, [], None
    event = next(iter(view.events("no_grad")), None)
    names = list(event.data.get("params", [])) if event else []
    return len(names) or int(median(recent(count, 0.2, 5))), names, int(steps[np.argmax(count > 0)])


def _zero_grads(view: RunView) -> tuple[list[str], int | None]:
    """Parameters whose gradient norm is exactly zero on every recent step, and the first zero step."""
    zero, first = [], None
    for name in view.param_order:
        steps, values = view.series(GRAD_NORM_PREFIX + name)
        if len(values) >= 20 and (recent(values, 0.2, 10) == 0).all():
            zero.append(name)
            step = int(steps[np.argmax(values == 0)])
            first = step if first is None else min(first, step)
    return zero, first


def dead_layer(view: RunView) -> Finding | None:
    """A parameter gets no gradient at all (None or exactly zero)."""
    n_none, missing, first_none = _none_grads(view)
    zero, first_zero = _zero_grads(view)
    if not n_none and (not zero or _relus_all_dead(view)):
        return None  # zero gradients behind fully dead ReLUs are dead_relu's finding
    evidence = []
    if n_none:
        evidence.append(f"{n_none} parameters get no gradient (None): {', '.join(missing[:6]) or 'names not recorded'}")
    if zero:
        evidence.append(f"{len(zero)} parameters have exactly zero gradient in every recent step: {', '.join(zero[:6])}")
    fix = "reconnect the graph: look for .detach(), torch.no_grad(), .item() or a module left out of forward(); freeze on purpose with requires_grad_(False)"
    first = first_none if first_none is not None else first_zero
    return Finding("dead_layer", "Parameters get no gradient", 0.92 if n_none else 0.85, "warning", evidence, fix, first)


def _relus_all_dead(view: RunView) -> bool:
    """Some ReLU layer has (nearly) every unit dead in its latest samples."""
    names = [n for n in view.run.metric_names if n.startswith(ACT_DEAD_PREFIX)]
    return any(median(view.series(n)[1][-3:]) >= 0.9 for n in names)


def over_clipping(view: RunView) -> Finding | None:
    """Gradient clipping is active on most steps."""
    steps, clipped = after_quiet(view, *view.series("grad/clipped"))
    if len(clipped) < 50:
        return None
    window = recent(clipped, 0.3, 50)
    share = float(window.mean())
    if share <= 0.8:
        return None
    norm = median(recent(view.grad_total[1], 0.3, 50))
    max_norm = view.manifest.get("max_grad_norm") or median(view.series("grad/max_norm")[1])
    evidence = [f"clipping active on {share:.0%} of the last {len(window)} recorded steps (> 80%)",
                f"median pre-clip norm {fmt(norm)} vs max_norm {fmt(float(max_norm))} ({fmt(norm / float(max_norm))}x)"]
    fix = f"raise max_norm to about {fmt(norm)} (the typical pre-clip norm) or reduce LR {lr_change(view, 0.3)}"
    confidence = 0.6 + 0.3 * (share - 0.8) / 0.2
    return Finding("over_clipping", "Gradient clipping on most steps", confidence, "warning", evidence, fix, int(steps[0]))


RULES = [exploding_gradients, vanishing_gradients, dead_layer, over_clipping]
