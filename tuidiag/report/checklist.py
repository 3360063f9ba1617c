"""A pre-training checklist answered from what the run recorded.

Its ten points (model outputs the right shape, the loss falls over the first steps,
one batch can be overfit, no NaN in the inputs, inputs normalized, train and validation
splits disjoint, no augmentation on validation, ``model.train()`` on while training,
scheduler state in checkpoints, the LR logged every step) are the checks worth passing
before a long training; the gradients, the clipping and the validation are checked too.

Each check is marked ``pass``, ``fail`` or ``unknown`` (the data to answer it was
not recorded) and carries the number behind the verdict. Checklist items the
recorded data cannot answer are listed in :data:`NOT_ANSWERABLE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tuidiag.diagnosis.stats import median
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import VAL_LOSS_NAMES, RunView
from tuidiag.format import LOSS, LR_GROUP0, UPDATE_RATIO_PREFIX
from tuidiag.report.series import layer_grad_medians, orders_apart, start_count

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"

NOT_ANSWERABLE = (
    "model outputs the correct shape",
    "overfit-one-batch succeeds",
    "train/val splits are disjoint",
    "augmentation is off for validation",
    "scheduler state is saved in checkpoints",
)
"""Items of the 10-point checklist that no recorded metric can answer: check them in code."""


@dataclass(frozen=True)
class Check:
    """One checklist item: what is checked, the verdict and the number behind it."""

    check: str
    status: str
    detail: str


def _check(name: str, ok: bool | None, detail: str) -> Check:
    return Check(name, UNKNOWN if ok is None else PASS if ok else FAIL, detail)


def loss_decreases_at_start(view: RunView) -> Check:
    """Loss at the very start against a little later (point 2)."""
    name = "Loss decreases at the start"
    steps, loss = view.loss
    good = np.isfinite(loss)
    if good.sum() < 10:
        return _check(name, None, f"only {int(good.sum())} finite loss values recorded")
    steps, loss = steps[good], loss[good]
    k = max(3, min(10, len(loss) // 20))
    later = min(max(k, len(loss) // 10), 200)
    start, then = median(loss[:k]), median(loss[later : later + k])
    change = (then - start) / abs(start) if start else 0.0
    detail = f"loss {fmt(start)} over steps {steps[0]}-{steps[k - 1]}, {fmt(then)} around step {steps[later]} ({change:+.1%})"
    return _check(name, change < -0.005, detail)


def no_nonfinite(view: RunView) -> Check:
    """No NaN or Inf in the loss or the total gradient norm."""
    name = "No NaN/Inf in loss or gradients"
    parts, ok = [], True
    for label, (steps, values) in (("loss", view.loss), ("gradient norm", view.grad_total)):
        bad = ~np.isfinite(values)
        if bad.any():
            ok = False
            parts.append(f"{label} non-finite on {int(bad.sum())} of {len(values)} steps, first at step {steps[np.argmax(bad)]}")
        elif len(values):
            parts.append(f"{label}: 0 of {len(values)} steps non-finite")
    return _check(name, ok if parts else None, "; ".join(parts) or "no loss or gradient norm recorded")


def inputs_finite(view: RunView) -> Check:
    """No NaN in the inputs given to ``rec.batch`` (point 4)."""
    name = "No NaN in inputs"
    steps, counts = view.series("input/nonfinite")
    if not len(counts):
        return _check(name, None, "no input/nonfinite recorded (call rec.batch(x, y) with float inputs)")
    bad = np.flatnonzero(counts > 0)
    if len(bad):
        return _check(name, False, f"{len(bad)} of {len(counts)} batches hold non-finite inputs, first at step {steps[bad[0]]}")
    return _check(name, True, f"0 of {len(counts)} batches hold non-finite inputs")


def inputs_normalized(view: RunView) -> Check:
    """Inputs have mean near 0 and standard deviation near 1 (point 5)."""
    name = "Inputs normalized"
    mean, std = median(view.series("input/mean")[1]), median(view.series("input/std")[1])
    if not np.isfinite(std):
        integer = len(view.series("input/max")[1]) > 0
        return _check(name, None, "integer inputs (e.g. token ids): does not apply" if integer else "no input/std recorded (call rec.batch(x, y))")
    ok = abs(mean) <= 0.5 and 0.5 <= std <= 2.0
    return _check(name, ok, f"median batch mean {fmt(mean)}, std {fmt(std)} (expect about 0 and 1)")


def train_mode(view: RunView) -> Check:
    """``model.train()`` was on during training steps (point 8)."""
    name = "model.train() on during training"
    steps, training = view.series("model/training")
    if not len(training):
        return _check(name, None, "no model/training recorded (call rec.watch(model, ...))")
    off = np.flatnonzero(training == 0)
    if len(off):
        return _check(name, False, f"eval mode on {len(off)} of {len(training)} training steps, first at step {steps[off[0]]}")
    return _check(name, True, f"train mode on all {len(training)} recorded steps")


def lr_logged(view: RunView) -> Check:
    """The learning rate is logged every step (point 10)."""
    name = "LR logged every step"
    user_named = [n for n in view.run.metric_names if n.rsplit("/", 1)[-1].lower() in ("lr", "learning_rate")]
    metric = LR_GROUP0 if view.run.has(LR_GROUP0) else (user_named or [None])[0]
    if metric is None:
        return _check(name, False, "no lr/group0 recorded (pass the optimizer to rec.watch(model, optimizer))")
    n_lr, n_loss = len(view.series(metric)[1]), len(view.series(LOSS)[1])
    return _check(name, n_lr >= n_loss, f"{metric} recorded on {n_lr} steps, loss on {n_loss}")


def grad_norm_in_range(view: RunView) -> Check:
    """Total gradient norm is of a healthy size at the start and does not blow up later."""
    name = "Gradient norms in range"
    steps, values = view.grad_total
    if not np.isfinite(values).any():
        return _check(name, None, "no finite grad_norm/total recorded")
    k = start_count(len(values))
    start, later = median(values[:k]), values[k:][np.isfinite(values[k:])]
    growth = float(later.max()) / start if len(later) and start > 0 else 1.0
    ok = 0.1 <= start <= 10 and growth <= 100
    detail = f"median {fmt(start)} over the first {k} steps (healthy 0.1-10)"
    if len(later):
        detail += f"; later peak {fmt(float(later.max()))} ({fmt(growth)}x the start, blow-up above 100x)"
    return _check(name, ok, detail)


def gradient_flow(view: RunView) -> Check:
    """Every weight layer gets gradients of a similar size (no vanishing)."""
    name = "Gradient reaches every layer"
    medians = layer_grad_medians(view)
    spread = orders_apart(medians)
    if spread is None:
        return _check(name, None, "fewer than 2 weight layers with a recorded gradient norm")
    names = list(medians)
    detail = (f"median norm {fmt(medians[names[0]])} at the first layer, {fmt(medians[names[-1]])} at the last; "
              f"{spread:.1f} orders of magnitude between layers (healthy: within 2, flagged from 3)")
    return _check(name, spread < 3, detail)


def lr_sane(view: RunView) -> Check:
    """The LR moves the weights at a healthy rate at the start: update/weight ratio near 1e-3."""
    name = "LR sane (update/weight ratio)"
    samples = []
    for param in view.weight_params or view.param_order:
        values = view.series(UPDATE_RATIO_PREFIX + param)[1]
        samples.append(values[: max(3, len(values) // 5)])
    pooled = np.concatenate(samples) if samples else np.empty(0)
    ratio = median(pooled)
    if not np.isfinite(ratio):
        return _check(name, None, "no update_ratio/* recorded (needs an optimizer in rec.watch and weights_every > 0)")
    detail = f"median update/weight ratio {fmt(ratio)} over the first fifth of the run (healthy about 1e-3, range 1e-4 to 1e-2)"
    return _check(name, 1e-4 <= ratio <= 1e-2, detail)


def clipping_not_constant(view: RunView) -> Check:
    """Gradient clipping is not active on most steps (over-clipping)."""
    name = "Clipping not on most steps"
    clipped = view.series("grad/clipped")[1]
    if not len(clipped):
        return _check(name, None, "no grad/clipped recorded (pass max_grad_norm to rec.watch)")
    share = float(np.mean(clipped != 0))
    return _check(name, share <= 0.8, f"clipped on {share:.0%} of {len(clipped)} steps (over-clipping above 80%)")


def validation_evaluated(view: RunView) -> Check:
    """A validation loss was logged."""
    name = "Validation evaluated"
    metric = view.first_present(VAL_LOSS_NAMES)
    if metric is None:
        return _check(name, False, "no validation loss logged (log one of: " + ", ".join(VAL_LOSS_NAMES) + ")")
    steps = view.series(metric)[0]
    every = f", about every {int(np.median(np.diff(steps)))} steps" if len(steps) > 1 else ""
    return _check(name, True, f"{metric} logged {len(steps)} times{every}")


CHECKS: list[Callable[[RunView], Check]] = [
    loss_decreases_at_start,
    no_nonfinite,
    inputs_finite,
    inputs_normalized,
    train_mode,
    lr_logged,
    lr_sane,
    grad_norm_in_range,
    gradient_flow,
    clipping_not_constant,
    validation_evaluated,
]


def run_checklist(view: RunView) -> list[Check]:
    """Every answerable checklist item, in order; a check that fails on odd data reads as unknown."""
    results = []
    for check in CHECKS:
        try:
            results.append(check(view))
        except Exception as exc:  # odd data must not take the report down
            results.append(Check(check.__name__.replace("_", " "), UNKNOWN, f"could not be computed: {type(exc).__name__}"))
    return results
