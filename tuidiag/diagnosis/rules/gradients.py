"""Rules read from gradient norms: exploding, vanishing, dead layers, over-clipping."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import after_quiet, lr_change, recent
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_PREFIX


def exploding_gradients(view: RunView) -> Finding | None:
    """Gradient norms grow without bound or jump by orders of magnitude."""
    steps, g = after_quiet(view, *view.grad_total)
    if len(g) < 20:
        return None
    base = median(g[: max(10, len(g) // 5)])
    finite = np.isfinite(g)
    peak = float(np.max(g[finite])) if finite.any() else float("inf")
    nonfinite = int((~finite).sum())
    if not base > 0:
        return None
    amp_skips = nonfinite and nonfinite / len(g) < 0.05 and np.isfinite(view.loss[1]).all()
    growth = peak / base
    if not ((nonfinite and not amp_skips) or (growth >= 100 and peak >= 10)):
        return None
    onset = np.flatnonzero(~finite | (g > 10 * base))
    first = int(steps[onset[0]]) if len(onset) else None
    evidence = [f"total gradient norm rose from a median of {fmt(base)} to a peak of {fmt(peak)} ({fmt(growth)}x)"]
    if nonfinite:
        evidence.append(f"{nonfinite} steps with non-finite gradient norms" + (" (isolated: looks like AMP loss-scale skips)" if amp_skips else ""))
    layers = _largest_layers(view)
    if layers:
        evidence.append(f"largest per-layer norms: {layers}")
    confidence = min(0.9, 0.55 + 0.1 * np.log10(max(growth, 10) / 10) + (0.15 if nonfinite and not amp_skips else 0))
    fix = f"clip by global norm (clip_grad_norm_(params, 1.0)); reduce LR {lr_change(view, 0.3)}; check init"
    return Finding("exploding_gradients", "Exploding gradients", confidence, "critical" if nonfinite and not amp_skips else "warning", evidence, fix, first)


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
    if len(layers) < 3 or view.n_steps < 20:
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
    confidence = min(0.92, 0.6 + 0.06 * (orders - 3))
    fix = "use ReLU/GELU instead of sigmoid/tanh in hidden layers, add normalization (BatchNorm/LayerNorm) or residual connections, Kaiming/He init"
    return Finding("vanishing_gradients", "Vanishing gradients", confidence, "warning", evidence, fix, int(view.loss[0][0]) if view.n_steps else None)


def dead_layer(view: RunView) -> Finding | None:
    """A parameter gets no gradient at all (None or exactly zero)."""
    none_steps, none_count = view.series("grad/none_count")
    missing: list[str] = []
    first = None
    if len(none_count) and median(recent(none_count, 0.2, 5)) > 0:
        event = next(iter(view.events("no_grad")), None)
        missing = list(event.data.get("params", [])) if event else []
        first = int(none_steps[np.argmax(none_count > 0)])
    zero = []
    for name in view.param_order:
        steps, values = view.series(GRAD_NORM_PREFIX + name)
        tail = recent(values, 0.2, 10)
        if len(values) >= 20 and (tail == 0).all():
            zero.append(name)
            first = first if first is not None else int(steps[np.argmax(values == 0)])
    if not missing and not zero:
        return None
    evidence = []
    if missing:
        evidence.append(f"{len(missing) or int(median(none_count))} parameters get no gradient (None): {', '.join(missing[:6])}")
    if zero:
        evidence.append(f"{len(zero)} parameters have exactly zero gradient in every recent step: {', '.join(zero[:6])}")
    fix = "reconnect the graph: look for .detach(), torch.no_grad(), .item() or a module left out of forward(); freeze on purpose with requires_grad_(False)"
    return Finding("dead_layer", "Parameters get no gradient", 0.85, "warning", evidence, fix, first)


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
