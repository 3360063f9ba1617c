"""Rules read from gradient norms: exploding, vanishing, dead layers, over-clipping."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Change, Compare, Evidence, Fact, Level, Measure, measure, quoted
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.lr_target import scaled
from tuidiag.diagnosis.moves import CLIP_LOOSER, CLIP_TIGHTER, INIT_SMALLER, LR_DOWN, fix_text
from tuidiag.diagnosis.rules.nothing_trains import nothing_trains
from tuidiag.diagnosis.rules.measures import HUGE_GRAD, after_quiet, listing, recent, start_level, start_measure, tail
from tuidiag.diagnosis.stats import median
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import ACT_DEAD_PREFIX, GRAD_NORM_PREFIX, GRAD_NORM_TOTAL

MIN_CLIPPED = 20
"""Over-clipping is judged once this many steps after the quiet ones were recorded (then on the newest 30%, at least 50)."""
ISOLATED_SHARE = 0.05
"""Gradient jumps on fewer than this share of steps, with calm norms since, are isolated (bad batches)."""


def _explosion(view: RunView) -> tuple[dict[str, float], dict[str, Measure]] | None:
    """The figures of an explosion (start level, recent level, growth, non-finite count) and their measures; ``None`` if calm.

    Growth is the largest finite norm after the baseline window (the first fifth of the steps
    after the quiet ones) over the median of that window.
    """
    steps, g = view.grad_total
    if len(g) < 3:
        return None
    c_steps, calm = after_quiet(view, steps, g)
    k = max(10, len(calm) // 5)
    m: dict[str, Measure] = {key: measure(GRAD_NORM_TOTAL, steps, g, stat) for key, stat in
                             (("all", "max_finite"), ("count", "count"), ("nonfinite", "nonfinite"))}
    m["recent"] = measure(GRAD_NORM_TOTAL, *tail(steps, g), "median")
    start = start_measure(GRAD_NORM_TOTAL, steps, g, 1)  # before any update (see measures.grad_at_start)
    if start is not None:
        m["start"] = start
    if len(calm) >= 20:
        m["base"] = measure(GRAD_NORM_TOTAL, c_steps[:k], calm[:k], "median")
        m["later"] = measure(GRAD_NORM_TOTAL, c_steps[k:], calm[k:], "max_finite")
    base = m["base"].value if "base" in m else float("nan")
    later = calm[k:][np.isfinite(calm[k:])] if len(calm) >= 20 else np.empty(0)
    peak = float(later.max()) if len(later) else 0.0
    nonfinite = int(m["nonfinite"].value)
    amp_skips = bool(nonfinite and nonfinite / len(g) < 0.05 and np.isfinite(view.loss[1]).all())
    facts = {"start": start.value if start is not None else float("nan"), "recent": m["recent"].value, "base": base,
             "growth": peak / base if base > 0 else 0.0, "nonfinite": 0.0 if amp_skips else float(nonfinite),
             "amp_skips": float(amp_skips)}
    grew = len(calm) >= 20 and facts["growth"] >= 100 and peak >= 10
    if grew:
        m["high"] = measure(GRAD_NORM_TOTAL, c_steps, calm, "share_above", 10 * base)
    facts["high_share"] = m["high"].value if grew else 0.0
    huge = facts["start"] >= HUGE_GRAD or facts["recent"] >= HUGE_GRAD or grew
    if facts["nonfinite"] and not huge and _follows_the_loss(view, steps, g):
        facts["nonfinite"] = 0.0  # the NaN loss's own backward: nonfinite_loss explains it, nothing exploded
    if huge or facts["nonfinite"]:
        return facts, m
    return None


def _follows_the_loss(view: RunView, steps: np.ndarray, g: np.ndarray) -> bool:
    """The first non-finite gradient norm came no earlier than the first non-finite loss."""
    loss_steps, loss = view.loss
    bad_loss = loss_steps[~np.isfinite(loss)]
    bad_grad = steps[~np.isfinite(g)]
    return bool(len(bad_loss) and len(bad_grad) and bad_grad[0] >= bad_loss[0])


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


def _percent(share: float) -> str:
    """A share as a percentage, with two significant digits below 1% (so a small share never reads as 0%)."""
    return f"{share:.0%}" if share >= 0.01 or share == 0 else f"{share * 100:.2g}%"


def _levels_line(m: dict[str, Measure]) -> Evidence:
    """The total norm at the start, recently (when that window is later) and at its largest."""
    parts, claims = [], []
    start, recent_, top = m.get("start"), m["recent"], m["all"]
    if start is not None:
        parts.append(f"{fmt(start.value)} at {start.where}")
        claims.append(Level(start))
    if np.isfinite(recent_.value) and (start is None or recent_.first > start.last):
        parts.append(f"median {fmt(recent_.value)} over {recent_.where}")
        claims.append(Level(recent_))
    if np.isfinite(top.value):
        parts.append(f"largest finite {fmt(top.value)} over {top.where}")
    if not parts:
        return Evidence(f"total gradient norm: no finite value over {top.where}", Level(top))
    return Evidence(f"total gradient norm: {', '.join(parts)} (healthy range 0.1-10)", *claims, Level(top), refs=(0.1, 10))


def _explosion_evidence(facts: dict[str, float], m: dict[str, Measure]) -> tuple[list[str], set[str]]:
    """Evidence lines of an explosion, and the tags the combiner reads (``from_start``, ``isolated``)."""
    evidence: list[str] = [_levels_line(m)]
    base, later = m.get("base"), m.get("later")
    if base is not None and later is not None and base.value > 0 and np.isfinite(later.value) and later.value >= 10 * base.value:
        evidence.append(Evidence(f"rose {fmt(later.value / base.value)}x after the first steps: from a median of {fmt(base.value)} "
                                 f"over {base.where} to a largest finite value of {fmt(later.value)} over {later.where}",
                                 Change(base, later, "up")))
    tags = set()
    if facts["start"] >= HUGE_GRAD:
        tags.add("from_start")
        start = m["start"]
        evidence.append(Evidence(f"already {fmt(start.value)} at {start.where}, the first recorded step, before any update, far "
                                 "above the healthy range: initialization or input scale, not the LR", Level(start, above=HUGE_GRAD)))
    if _isolated(facts) and base is not None and "high" in m:
        tags.add("isolated")
        high, recent_ = m["high"], m["recent"]
        evidence.append(Evidence(f"only {_percent(high.value)} of the steps {high.where} were above {fmt(high.arg or 0.0)} (10x the "
                                 f"median of {base.where}), and the norm is back to a median of {fmt(recent_.value)} over "
                                 f"{recent_.where}: isolated jumps", Level(high), Level(base), Level(recent_, below=HUGE_GRAD),
                                 refs=(10,)))
    if facts["nonfinite"] or facts["amp_skips"]:
        skips = " (isolated: looks like AMP loss-scale skips)" if facts["amp_skips"] else ""
        bad, count = m["nonfinite"], m["count"]
        text = f"{int(bad.value)} of the {int(count.value)} gradient norms over {bad.where} are non-finite{skips}"
        evidence.append(Evidence(text, Level(bad), Level(count)))
    return evidence, tags


def exploding_gradients(view: RunView) -> Finding | None:
    """Gradient norms far above the healthy range, growing without bound or jumping by orders of magnitude."""
    found = _explosion(view)
    if found is None:
        return None
    facts, m = found
    evidence, tags = _explosion_evidence(facts, m)
    if layers := _largest_layers(view):
        evidence.append(layers)
    fix = fix_text((CLIP_TIGHTER, "clip by global norm (clip_grad_norm_(params, 1.0))"),
                   (INIT_SMALLER, "fix the init scale (Kaiming/Xavier), add normalization"),
                   scaled(LR_DOWN, "reduce", view.lr_now, 0.3))
    severity = "critical" if facts["nonfinite"] else "warning"
    finding = Finding("exploding_gradients", "Exploding gradients", _explosion_confidence(facts), severity, evidence, fix,
                      _explosion_onset(view, facts))
    finding.tags = tags
    return finding


def _largest_layers(view: RunView) -> Evidence | None:
    peaks = []
    for name in view.param_order:
        steps, values = view.series(GRAD_NORM_PREFIX + name)
        if np.isfinite(values).any():
            peaks.append((measure(GRAD_NORM_PREFIX + name, steps, values, "max_finite"), name))
    top = sorted(peaks, key=lambda p: -p[0].value)[:3]
    if not top:
        return None
    items = listing([m for m, _ in top], [n for _, n in top])
    return Evidence(f"largest finite per-layer gradient norms: {items}", *(Level(m) for m, _ in top))


def vanishing_gradients(view: RunView) -> Finding | None:
    """Early layers get gradients orders of magnitude smaller than late layers."""
    layers = view.weight_params
    if len(layers) < 3 or view.n_steps < 20 or _loss_grew(view):
        return None
    measures = []
    for name in layers:
        steps, values = view.series(GRAD_NORM_PREFIX + name)
        if not len(values):
            return None
        measures.append(measure(GRAD_NORM_PREFIX + name, *tail(steps, values, 0.3), "median"))
    medians = [m.value for m in measures]
    if not all(np.isfinite(medians)) or medians[-1] <= 0:
        return None
    first_q = max(1, len(layers) // 4)
    early = float(np.median(medians[:first_q]))
    orders = np.log10(medians[-1] / max(early, 1e-30))
    if orders < 3:
        return None
    first, last = measures[0], measures[-1]
    apart = (f"{np.log10(last.value / first.value):.1f} orders of magnitude apart (healthy: within 2)" if first.value > 0
             else "the first layer gets none at all")
    shown = list(range(0, len(layers), max(1, len(layers) // 6)))
    evidence: list[str] = [
        Evidence(f"median gradient norm of the first layer {listing([first], [layers[0]])}, of the last layer "
                 f"{listing([last], [layers[-1]])}: {apart}", Compare(last, first, "above"), refs=(2,)),
        Evidence("per-layer median gradient norms, input to output: "
                 + listing([measures[i] for i in shown], [layers[i] for i in shown]), *(Level(measures[i]) for i in shown))]
    acts = view.model.get("activations") or []
    saturating = [a for a in acts if a in ("Sigmoid", "Tanh")]
    if saturating:
        norm = bool(view.model.get("has_norm"))
        facts = (Fact("manifest", "model.activations", tuple(acts)), Fact("manifest", "model.has_norm", view.model.get("has_norm")))
        uses = f"the model uses {', '.join(saturating)} " + ("activations" if norm else "without normalization")
        evidence.append(Evidence(uses, *facts))
    confidence = min(0.93, 0.75 + 0.05 * (orders - 3))
    fix = "use ReLU/GELU instead of sigmoid/tanh in hidden layers, add normalization (BatchNorm/LayerNorm) or residual connections, Kaiming/He init"
    first = _vanished_since(view, layers[:first_q], layers[-1])
    return Finding("vanishing_gradients", "Vanishing gradients", confidence, "warning", evidence, fix, first)


def _vanished_since(view: RunView, early: list[str], last: str) -> int | None:
    """The first step at which the last layer's gradient norm was 3 orders of magnitude above the early layers' median."""
    series = [view.series(GRAD_NORM_PREFIX + name) for name in (*early, last)]
    steps = series[-1][0]
    if any(len(s) != len(steps) or not np.array_equal(s, steps) for s, _ in series):
        return int(steps[0]) if len(steps) else None  # sampled at different steps: judged over the whole run only
    low = np.median(np.stack([v for _, v in series[:-1]]), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        apart = series[-1][1] >= 1e3 * low
    return int(steps[np.argmax(apart)]) if apart.any() else int(steps[0])


def _loss_grew(view: RunView) -> bool:
    """The loss ended far above its start: the training diverged, which vanishing gradients cannot do."""
    values = view.loss[1]
    values = values[np.isfinite(values)]
    start = start_level(values)
    return len(values) >= 20 and start > 0 and median(recent(values)) > 1.5 * start


def _none_grads(view: RunView) -> tuple[Measure | None, list[str], int | None, int | None]:
    """(recent median count of parameters without a gradient, the names an event gave, its step, the first such step)."""
    steps, count = view.series("grad/none_count")
    if not len(count):
        return None, [], None, None
    level = measure("grad/none_count", *tail(steps, count, 0.2, 5), "median")
    if not level.value > 0:
        return None, [], None, None
    event = next(iter(view.events("no_grad")), None)
    names = [str(n) for n in event.data.get("params", [])] if event else []
    return level, names, event.step if event else None, int(steps[np.argmax(count > 0)])


def _zero_grads(view: RunView) -> tuple[list[str], list[Measure], int | None]:
    """Parameters whose gradient norm is exactly zero on every recent step, the measures saying so, and the first zero step."""
    zero, measures, first = [], [], None
    for name in view.param_order:
        steps, values = view.series(GRAD_NORM_PREFIX + name)
        if len(values) >= 20 and (recent(values, 0.2, 10) == 0).all():
            zero.append(name)
            measures.append(measure(GRAD_NORM_PREFIX + name, *tail(steps, values, 0.2, 10), "max"))
            step = int(steps[np.argmax(values == 0)])
            first = step if first is None else min(first, step)
    return zero, measures, first


def dead_layer(view: RunView) -> Finding | None:
    """A parameter gets no gradient at all (None or exactly zero), or nothing trains (:mod:`.nothing_trains`)."""
    if (whole := nothing_trains(view)) is not None:
        return whole
    none, missing, event_step, first_none = _none_grads(view)
    zero, zero_measures, first_zero = _zero_grads(view)
    if none is None and (not zero or _relus_all_dead(view)):
        return None  # zero gradients behind fully dead ReLUs are dead_relu's finding
    evidence: list[str] = []
    if none is not None:
        named = (f"; the recorder named {', '.join(quoted(n) for n in missing[:6])}" if missing else "")
        claims = [Level(none)] + ([Fact("event", "no_grad", (event_step, tuple(missing[:6])))] if missing else [])
        text = f"{fmt(none.value)} parameters get no gradient (None) per step, median over {none.where}{named}"
        evidence.append(Evidence(text, *claims))
    if zero:
        evidence.append(Evidence(f"{len(zero)} parameters have a gradient norm of exactly 0 at every step of: "
                                 + listing(zero_measures[:6], zero[:6]), *(Level(m, equal=0.0) for m in zero_measures)))
    fix = "reconnect the graph: look for .detach(), torch.no_grad(), .item() or a module left out of forward(); freeze on purpose with requires_grad_(False)"
    first = first_none if first_none is not None else first_zero
    return Finding("dead_layer", "Parameters get no gradient", 0.92 if none is not None else 0.85, "warning", evidence, fix, first)


def _relus_all_dead(view: RunView) -> bool:
    """Some ReLU layer has (nearly) every unit dead in its latest samples."""
    names = [n for n in view.run.metric_names if n.startswith(ACT_DEAD_PREFIX)]
    return any(median(view.series(n)[1][-3:]) >= 0.9 for n in names)


def over_clipping(view: RunView) -> Finding | None:
    """Gradient clipping is active on most steps."""
    steps, clipped = after_quiet(view, *view.series("grad/clipped"))
    if len(clipped) < MIN_CLIPPED:
        return None
    share = measure("grad/clipped", *tail(steps, clipped, 0.3, 50), "mean")
    if share.value <= 0.8:
        return None
    count = measure("grad/clipped", *tail(steps, clipped, 0.3, 50), "count")
    text = f"clipping active on {share.value:.0%} of the {int(count.value)} recorded steps {share.where} (> 80%)"
    evidence: list[str] = [Evidence(text, Level(share, above=0.8), Level(count), refs=(0.8,))]
    g_steps, g = view.grad_total
    norm = measure(GRAD_NORM_TOTAL, *tail(g_steps, g, 0.3, 50), "median") if len(g) else None
    limit = view.clip_threshold
    if norm is not None and limit is not None and np.isfinite(norm.value):
        value = float(limit.value)
        source = f"recorded at {limit.where}" if isinstance(limit, Measure) else "from the run's settings"
        evidence.append(Evidence(f"median pre-clip norm {fmt(norm.value)} over {norm.where} vs max_norm {fmt(value)} ({source}): "
                                 f"{fmt(norm.value / value)}x", Level(norm), Compare(norm, limit)))
    known = norm is not None and np.isfinite(norm.value)
    typical = f"to about {fmt(norm.value)} (the typical pre-clip norm)" if known and norm is not None else "(a higher limit)"
    fix = fix_text((CLIP_LOOSER, f"raise max_norm {typical}"), scaled(LR_DOWN, "reduce", view.lr_now, 0.3, lead="or "))
    confidence = 0.6 + 0.3 * (share.value - 0.8) / 0.2
    return Finding("over_clipping", "Gradient clipping on most steps", confidence, "warning", evidence, fix, _clipping_since(view))


def _clipping_since(view: RunView) -> int:
    """The first step (quiet ones included) from which clipping was active on most (> 80%) of the steps through the newest."""
    steps, clipped = view.series("grad/clipped")
    ok = np.isfinite(clipped)
    steps, clipped = steps[ok], clipped[ok]
    suffix = np.cumsum(clipped[::-1])[::-1] / np.arange(len(clipped), 0, -1)
    return int(steps[np.argmax(suffix > 0.8)])


RULES = [exploding_gradients, vanishing_gradients, dead_layer, over_clipping]
