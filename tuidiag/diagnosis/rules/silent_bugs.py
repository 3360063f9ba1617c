"""Rules for the silent bugs: the loss looks almost plausible, yet the training is wrong.

Gradients never zeroed, probabilities fed to a loss that expects logits, loss inputs
that broadcast, labels that do not belong to their inputs (batches ordered by class: :mod:`tuidiag.diagnosis.rules.batch_order`).
The first three read the recorder's direct probes (``grad/stale_norm``, ``loss_fn/*``,
see ``docs/format.md``); the last reads the loss against the chance level.
"""

from __future__ import annotations

import math

import numpy as np

from tuidiag.diagnosis.evidence import (
    Change, Compare, Evidence, Fact, Level, Measure, at_step, change_words, measure, quoted, signed_percent,
)
from tuidiag.diagnosis.finding import Finding
from tuidiag.job_kinds.configs import overfit_informative
from tuidiag.diagnosis.moves import fix_text
from tuidiag.diagnosis.rules.measures import after_quiet, drop_of, finite_only, first_vs_last, steps_between, tail, update_ratio
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import (
    EVENT_LOSS_FN, EVENT_LOSS_SHAPES, GRAD_NORM_TOTAL, GRAD_STALE_NORM, LOSS, LOSS_FN_BROADCAST, LOSS_FN_CLASSES,
    LOSS_FN_PROB_ROWS, LOSS_FN_UNIT_SHARE, LR_GROUP0,
)
from tuidiag.store import Event

MIN_SAMPLES = 3
"""A probe whose single sample could be an accident (inputs in [0, 1]) is judged from this many sampled steps."""
STALE_SHARE = 0.5
"""Gradients left over at more than this share of the sampled steps were not zeroed."""
PROB_ROWS = 0.9
"""A loss input whose typical share of probability rows is this high was given probabilities."""
CROSS_ENTROPY = ("CrossEntropyLoss", "cross_entropy")
CLASS_LOSSES = (*CROSS_ENTROPY, "NLLLoss", "nll_loss")
CHANCE_BAND = (0.9, 1.08)
"""A loss within this band around log(classes) sits at the chance level."""
MIN_AT_CHANCE = 40
"""Losses judged (after the quiet steps) before a loss at the chance level says anything about the labels: a model can
sit there for a few dozen steps before it starts to learn (in the suite's tune split, a CNN under SGD at batch size 16
left it at step ~55, 35 steps after the quiet ones)."""
STILL_FALLING = 0.05
"""A loss whose newest third of the recent window is this much below its first third is leaving the chance level: a model
that starts slowly, not labels it cannot learn (memorising shuffled labels lowers the loss far more slowly)."""
GENERALISES = 0.94
"""A validation loss below this share of the chance level, and no higher than the training loss, learns from the inputs
something that holds on data the model never trained on: labels unrelated to their inputs cannot give that (on held-out
data nothing beats the class shares, log(classes) when balanced). In the suite's trainings with misaligned labels the
validation loss stayed at 0.96-1.04 of the chance level; an underfitting residual MLP near it had 0.92, below its
training loss."""
HEALTHY_GRAD = (1e-3, 1e3)
MOVING_RATIO = 1e-4
"""An update/weight ratio below this (a tenth of a healthy pace) explains a loss stuck at chance by steps too small to
learn (``lr_too_low``): Adam at 1e-5 on correct labels read 'Labels do not match' at 96% with a ratio of 6e-5."""


def _loss_fn_event(view: RunView) -> Event | None:
    events = view.events(EVENT_LOSS_FN)
    return events[-1] if events else None


def _loss_fn_fact(event: Event | None) -> tuple[str, list[Fact]]:
    """The loss function's name as lines quote it, with the fact backing it (none without the event)."""
    if event is None:
        return "the loss function", []
    name = str(event.data.get("key"))
    return f"the loss function {quoted(name)}", [Fact("event", EVENT_LOSS_FN, (event.step, (name,)))]


# ---- grad_not_zeroed --------------------------------------------------------------------------------------------


ACCUMULATING = 2.0
"""A total gradient norm that at least doubled from the first tenth of the run to the last is the climb gradients that
add up show; a smaller rise is not offered as evidence (a review read '+0.72%' as a line of the case)."""


def _grad_trend(view: RunView) -> Evidence | None:
    """The total gradient norm's climb over the run, when it at least doubled (:data:`ACCUMULATING`)."""
    change = first_vs_last(GRAD_NORM_TOTAL, *view.grad_total)
    if change is None or change.says != "up" or not change.after.value >= ACCUMULATING * change.before.value:
        return None
    before, after = change.before, change.after
    return Evidence(f"the total gradient norm {change_words(change)}: median {fmt(before.value)} over {before.where}, "
                    f"{fmt(after.value)} over {after.where} (each step adds to the gradients of the steps before)", change)


def grad_not_zeroed(view: RunView) -> Finding | None:
    """``param.grad`` still held the previous step's gradient when backward began: ``zero_grad()`` is missing.

    One sampled step is enough: each sample looks at ``param.grad`` directly (gradient
    accumulation done right reads 0 there)."""
    steps, stale = finite_only(*view.series(GRAD_STALE_NORM))
    if not len(stale):
        return None
    share = measure(GRAD_STALE_NORM, steps, stale, "share_above", 0.0)
    if share.value <= STALE_SHARE:
        return None
    count = measure(GRAD_STALE_NORM, steps, stale, "count")
    typical = measure(GRAD_STALE_NORM, steps, stale, "median")
    evidence: list[str] = [Evidence(
        f"when backward began, the optimizer's parameters still held the gradient of earlier steps at {share.value:.0%} of the "
        f"{len(stale)} sampled steps over {share.where} (median norm {fmt(typical.value)}): nothing zeroed it after "
        "optimizer.step()",
        Level(share, above=STALE_SHARE), Level(count), Level(typical))]
    g_steps, g = steps_between(*finite_only(*view.grad_total), share.first, share.last)
    if len(g):
        total = measure(GRAD_NORM_TOTAL, g_steps, g, "median")
        evidence.append(Evidence(f"the left-over gradient (median norm {fmt(typical.value)} over {typical.where}) is "
                                 f"{fmt(typical.value / total.value)}x the total gradient norm's median {fmt(total.value)} over "
                                 f"{total.where}", Compare(typical, total)))
    trend = _grad_trend(view)
    if trend is not None:
        evidence.append(trend)
    fix = fix_text("call optimizer.zero_grad(set_to_none=True) once per optimizer step in the training loop: just before "
                   "loss.backward(), or right after optimizer.step()",
                   "with gradient accumulation on purpose, zero right after each optimizer.step()")
    confidence = 0.95 if share.value >= 0.9 else 0.8
    seen = int(np.argmax(stale > 0))
    first = int(steps[seen])
    title = "Gradients are never zeroed (zero_grad missing)"
    finding = Finding("grad_not_zeroed", title, confidence, "critical", evidence, fix, first)
    # the probe samples every few steps: the left-over gradient may have been there since the step after the last
    # sample that read none, or, when the first sample already found one, since one sampling interval before it
    # (never before step 1, the first step that can hold an earlier step's gradient)
    every = int(np.median(np.diff(steps))) if len(steps) > 1 else first
    finding.onset_from = int(steps[seen - 1]) + 1 if seen > 0 else min(first, max(1, first - every + 1))
    return finding


# ---- double_softmax ---------------------------------------------------------------------------------------------


def _softmax_modules(view: RunView) -> Evidence | None:
    kinds = view.model.get("module_kinds")
    if not isinstance(kinds, dict):
        return None
    for name in ("Softmax", "Sigmoid"):
        count = kinds.get(name)
        if isinstance(count, int) and count > 0:
            fact = Fact("manifest", f"model.module_kinds.{name}", count)
            return Evidence(f"the model has {count} {quoted(name)} module(s)", fact)
    return None


def _ce_floor(view: RunView) -> Evidence | None:
    """The loss never went below the floor that cross-entropy of probabilities has: log(1 + (C-1)/e)."""
    c_steps, classes = finite_only(*view.series(LOSS_FN_CLASSES))
    steps, loss = finite_only(*view.loss)
    if not len(classes) or not len(loss):
        return None
    widest = measure(LOSS_FN_CLASSES, c_steps, classes, "max")
    c = int(widest.value)
    floor = math.log(1 + (c - 1) / math.e)
    lowest = measure(LOSS, steps, loss, "min")
    if c < 2 or lowest.value < floor * (1 - 1e-6):
        return None
    return Evidence(f"the loss never went below {fmt(lowest.value)} over {lowest.where}; with probabilities as input, "
                    f"cross-entropy over {c} classes (the input's width, at most, over {widest.where}) cannot go below "
                    f"{fmt(floor)}",
                    Level(lowest), Level(widest), refs=(floor,))


def _probabilities(view: RunView) -> tuple[Measure, Measure, str] | None:
    """The typical share of probability rows (or of inputs in [0, 1]) and its count, when the loss was given probabilities."""
    for metric, words in ((LOSS_FN_PROB_ROWS, "of its input rows lay in [0, 1] and summed to 1"),
                          (LOSS_FN_UNIT_SHARE, "of its inputs lay in [0, 1]")):
        steps, values = finite_only(*view.series(metric))
        if len(values) < (1 if metric == LOSS_FN_PROB_ROWS else MIN_SAMPLES):  # rows that sum to 1 are no accident; inputs
            continue  # in [0, 1] can be small logits by chance
        typical = measure(metric, steps, values, "median")
        if typical.value < (1.0 if metric == LOSS_FN_UNIT_SHARE else PROB_ROWS):
            return None
        return typical, measure(metric, steps, values, "count"), words
    return None


def double_softmax(view: RunView) -> Finding | None:
    """A loss that expects logits (or log-probabilities) was given probabilities."""
    found = _probabilities(view)
    if found is None:
        return None
    typical, count, words = found
    event = _loss_fn_event(view)
    name, facts = _loss_fn_fact(event)
    expects = str(event.data.get("expects")) if event is not None else "logits"
    first = Evidence(f"{name} expects {expects}, but it was given probabilities: a median {typical.value:.0%} {words}, "
                     f"over the {int(count.value)} sampled steps of {typical.where}",
                     Level(typical), Level(count), *facts, refs=(0, 1))
    evidence: list[str] = [first]
    kind = str(event.data.get("key")) if event is not None else ""
    floor = _ce_floor(view) if kind in CROSS_ENTROPY and typical.metric == LOSS_FN_PROB_ROWS else None
    modules = _softmax_modules(view)
    evidence += [line for line in (floor, modules) if line is not None]
    if kind in ("NLLLoss", "nll_loss"):
        fix = fix_text("give NLLLoss log-probabilities: torch.log_softmax(logits, dim=1) where the model's output is computed, "
                       "not softmax (or return the logits and use CrossEntropyLoss)")
    elif typical.metric == LOSS_FN_UNIT_SHARE:
        fix = fix_text("drop the sigmoid applied to the model's output before the loss call (BCEWithLogitsLoss applies it "
                       "itself), or keep it and use BCELoss")
    else:
        fix = fix_text("return logits from the model: remove the final softmax (nn.Softmax or .softmax(dim=1)) before the loss "
                       "call, CrossEntropyLoss applies log-softmax itself; apply softmax only for predictions")
    return Finding("double_softmax", "Probabilities fed to a loss that expects logits", 0.92, "critical", evidence, fix,
                   typical.first)


# ---- loss_shape_mismatch ----------------------------------------------------------------------------------------


def loss_shape_mismatch(view: RunView) -> Finding | None:
    """The loss function's input and target had different shapes that broadcast."""
    steps, flags = finite_only(*view.series(LOSS_FN_BROADCAST))
    if not len(flags) or not (flags > 0).any():
        return None
    share = measure(LOSS_FN_BROADCAST, steps, flags, "share_above", 0.0)
    count = measure(LOSS_FN_BROADCAST, steps, flags, "count")
    name, facts = _loss_fn_fact(_loss_fn_event(view))
    evidence: list[str] = [Evidence(f"the input and target of {name} had different shapes that broadcast at {share.value:.0%} of "
                                    f"the {int(count.value)} sampled steps over {share.where}",
                                    Level(share), Level(count), *facts)]
    shapes = view.events(EVENT_LOSS_SHAPES)
    words = ""
    if shapes:
        first = shapes[0]
        words = str(first.data.get("key"))
        fact = Fact("event", EVENT_LOSS_SHAPES, (first.step, (words,)))
        evidence.append(Evidence(f"at step {first.step}: {quoted(words)}", fact))
    fix = fix_text("make the shapes match where the loss is called: loss_fn(output.squeeze(-1), y), or y.view_as(output)"
                   + (f" (now {words}, so every prediction is compared with every target)" if words else ""))
    confidence = 0.92 if share.value >= 0.5 else 0.7
    first_step = int(steps[np.argmax(flags > 0)])
    return Finding("loss_shape_mismatch", "Loss inputs broadcast silently (shape mismatch)", confidence,
                   "critical" if share.value >= 0.5 else "warning", evidence, fix, first_step)


# ---- labels_misaligned ------------------------------------------------------------------------------------------


def _classes(view: RunView) -> tuple[int, Evidence] | None:
    """How many classes the loss chooses among, with the line saying where that comes from."""
    event = _loss_fn_event(view)
    if event is not None:
        if str(event.data.get("key")) not in CLASS_LOSSES:
            return None
        steps, widths = finite_only(*view.series(LOSS_FN_CLASSES))
        if not len(widths):
            return None
        widest = measure(LOSS_FN_CLASSES, steps, widths, "max")
        name, facts = _loss_fn_fact(event)
        c = int(widest.value)
        return c, Evidence(f"{name} chooses among {c} classes (its input's width over {widest.where})", Level(widest), *facts)
    if not len(view.series("target/majority_share")[0]):
        return None  # no integer class labels recorded
    lo_steps, lows = finite_only(*view.series("target/min"))
    hi_steps, highs = finite_only(*view.series("target/max"))
    if not len(lows) or not len(highs):
        return None
    low, high = measure("target/min", lo_steps, lows, "min"), measure("target/max", hi_steps, highs, "max")
    if low.value != 0 or high.value < 1:
        return None
    c = int(high.value) + 1
    where = low.where if low.where == high.where else f"{low.where} and {high.where}"
    return c, Evidence(f"the labels run from {int(low.value)} to {int(high.value)} over {where}: {c} classes",
                       Level(low), Level(high), refs=(c,))


def _overfit_passed(view: RunView) -> bool | None:
    """The newest overfit-one-batch result that counts at the view's step: passed, failed, or ``None`` when there is none
    or it is not informative (the loss started near the target: :func:`overfit_informative`)."""
    result = view.job_result("overfit_batch")
    if result is None or "passed" not in result or not overfit_informative(result):
        return None
    return bool(result.get("passed"))


def _warming_up(view: RunView, first: int) -> bool:
    """The LR rose over the steps judged: a warmup still under way, so the model has not yet trained at its LR
    and a loss at the chance level says nothing about the labels."""
    steps, lr = finite_only(*view.series(LR_GROUP0))
    judged = lr[steps >= first]
    return len(judged) >= 2 and judged[-1] > judged[0]


def _val_not_improving(view: RunView, first: int, last: int) -> Change | None:
    """The validation loss at the last evaluation of steps ``first..last`` against the first, when it is no lower: a training
    loss falling meanwhile is memorising its targets, not learning from the inputs. ``None`` otherwise or with fewer than 2."""
    name = view.val_loss_name
    v_steps, val = steps_between(*finite_only(*view.val_loss), first, last)
    if name is None or len(val) < 2:
        return None
    before, after = at_step(name, v_steps, val, 0), at_step(name, v_steps, val, len(val) - 1)
    return Change(before, after, "up" if after.value > before.value else "flat", 0.0) if after.value >= before.value else None


def _generalises(view: RunView, level: Measure, chance: float) -> bool:
    """The validation loss's median over the window ``level`` (the training loss's median there) is below
    :data:`GENERALISES` of the ``chance`` level and no higher than the training loss: what the model learnt holds on
    held-out data. False without two evaluations in the window."""
    if view.val_loss_name is None:
        return False
    v_steps, val = steps_between(*finite_only(*view.val_loss), level.first, level.last)
    if len(val) < 2:
        return False
    typical = float(np.median(val))
    return typical < GENERALISES * chance and typical <= level.value


def labels_misaligned(view: RunView) -> Finding | None:
    """The loss stays at the chance level although gradients flow and the model moves at a healthy pace."""
    found = _classes(view)
    if found is None or _probabilities(view) is not None:
        return None
    c, classes_line = found
    if c < 2:
        return None
    steps, loss = finite_only(*after_quiet(view, *view.loss))
    if len(loss) < MIN_AT_CHANCE or _warming_up(view, int(steps[0])):
        return None
    chance = math.log(c)
    recent_steps, recent_loss = tail(steps, loss, 0.5, 20)
    level = measure(LOSS, recent_steps, recent_loss, "median")
    overall = measure(LOSS, steps, loss, "median")
    low, high = CHANCE_BAND
    if not all(low * chance <= m.value <= high * chance for m in (level, overall)):
        return None
    if _generalises(view, level, chance):
        return None  # the model predicts data it never trained on better than chance: the labels belong to the inputs
    third = len(recent_loss) // 3  # the trend over the window the level is judged on: is the loss leaving chance now?
    trend = Change(measure(LOSS, recent_steps[:third], recent_loss[:third], "median"),
                   measure(LOSS, recent_steps[-third:], recent_loss[-third:], "median"), "")
    memorising = _val_not_improving(view, int(recent_steps[0]), int(recent_steps[-1]))
    if drop_of(trend) > STILL_FALLING and memorising is None:
        return None  # leaving the chance level, and the validation loss does not say it only memorises
    g_steps, g = steps_between(*finite_only(*view.grad_total), level.first, level.last)
    if not len(g):
        return None
    grad = measure(GRAD_NORM_TOTAL, g_steps, g, "median")
    if not HEALTHY_GRAD[0] <= grad.value <= HEALTHY_GRAD[1]:
        return None
    ratio = update_ratio(view)
    if ratio is not None and ratio.value < MOVING_RATIO:
        return None
    passed = _overfit_passed(view)
    if passed is False:
        return None  # the model cannot fit even one batch: a model or optimizer problem, not the labels
    before, after = trend.before, trend.after
    evidence: list[str] = [
        Evidence(f"loss median {fmt(level.value)} over {level.where} and {fmt(overall.value)} over {overall.where}: the chance "
                 f"level, log({c}) = {fmt(chance)}, as if the targets had nothing to do with the inputs",
                 Level(level), Level(overall), refs=(c, chance)),
        _trend_line(trend, memorising),
        classes_line,
    ]
    moving = [Level(grad)] + ([Level(ratio)] if ratio is not None else [])
    ratio_text = f", update/weight ratio median {fmt(ratio.value)} over {ratio.where}" if ratio is not None else ""
    evidence.append(Evidence(f"gradients flow and the weights move: gradient norm median {fmt(grad.value)} over "
                             f"{grad.where}{ratio_text}", *moving))
    if passed:
        evidence.append(Evidence("the overfit-one-batch test passed: the model can memorise a batch, so it is the labels it "
                                 "cannot fit"))
    fix = fix_text("check that each target belongs to its input: shuffle or offset inputs and targets together, with one index "
                   "(idx = torch.randperm(n); x, y = x[idx], y[idx]), and check that the dataset's __getitem__ returns the "
                   "label of the same sample",
                   "press o in the monitor (or run tuidiag overfit-batch RUN): a model that memorises one batch can learn, "
                   "so it is the labels it cannot fit")
    return Finding("labels_misaligned", "Labels do not match their inputs (loss at chance level)", 0.9 if passed else 0.75,
                   "warning", evidence, fix, int(steps[0]))


def _trend_line(trend: Change, memorising: Change | None) -> Evidence:
    """The loss's trend over the judged window: not leaving the chance level, or falling while validation does not."""
    before, after = trend.before, trend.after
    span = f"median {fmt(before.value)} over {before.where}, {fmt(after.value)} over {after.where}"
    if drop_of(trend) > STILL_FALLING and memorising is not None:
        v0, v1 = memorising.before, memorising.after
        fell = Change(before, after, "down")
        return Evidence(f"it {change_words(fell)} ({span}), but the validation loss {change_words(memorising)} ({fmt(v0.value)} at "
                        f"{v0.where}, {fmt(v1.value)} at {v1.where}): it memorises the targets", fell, memorising)
    claim = Change(before, after, "flat", STILL_FALLING) if abs(trend.relative) <= STILL_FALLING else Change(before, after, "up")
    return Evidence(f"and it is not leaving it: {span} ({signed_percent(trend.relative, 1)}; a model that learns falls faster)",
                    claim, refs=(STILL_FALLING,))


RULES = [grad_not_zeroed, double_softmax, loss_shape_mismatch, labels_misaligned]
