"""Nothing trains: no parameter can learn, or the optimizer never changes one (the whole model is a dead layer).

Two ways a training runs without error and learns nothing, each read from what the
recorder stores, not from gradients (an all-frozen model has none to watch, so the
``grad/none_count`` a dead layer shows stays 0):

- every parameter is frozen: the model summary counts parameters but no trainable one
  (``requires_grad=False`` everywhere);
- the optimizer steps other tensors: the watched parameters get gradients, yet every
  sampled update/weight ratio is exactly 0 (the optimizer was built over another copy
  of the model, or before the model was re-created), with an LR above 0 and a loss that
  made no progress.

The finding is a ``dead_layer``: every layer is dead. It explains what a model that
does not change shows: a frozen validation metric, a loss at the chance level, updates
too small for the LR, underfitting (``diagnosis/combine.py``).
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Evidence, Fact, Level, at_step, change_words, measure
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.measures import finite_only, first_vs_last
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS, LR_GROUP0, UPDATE_RATIO_PREFIX
from tuidiag.text.numbers import fmt

TAG = "nothing_trains"
"""The tag the combiner reads: this dead layer is the whole model."""
MIN_SAMPLES = 3
"""Update ratios judged from this many samples of every watched parameter."""
NO_PROGRESS = -0.1
"""A loss that fell less than 10% from its first tenth to its last made no progress."""
TITLE = "Nothing trains: no parameter is updated"


def _all_frozen(view: RunView) -> list[Evidence] | None:
    n_params, n_trainable = view.model.get("n_params"), view.model.get("n_trainable")
    if not (isinstance(n_params, int) and n_params > 0 and n_trainable == 0 and view.n_steps):
        return None
    facts = (Fact("manifest", "model.n_trainable", 0), Fact("manifest", "model.n_params", n_params))
    return [Evidence(f"none of the model's {n_params} parameters is trainable (the model summary counts 0 trainable): "
                     "requires_grad is False on every one, so no gradient is computed and no step changes a weight", *facts)]


def _never_updated(view: RunView) -> list[Evidence] | None:
    names = [UPDATE_RATIO_PREFIX + n for n in view.param_order]
    series = [view.series(name) for name in names]
    if not names or any(len(values) < MIN_SAMPLES for _, values in series):
        return None
    steps = np.concatenate([s for s, _ in series])
    values = np.concatenate([v for _, v in series])
    order = np.argsort(steps, kind="stable")
    largest = measure(tuple(names), steps[order], values[order], "max")
    if largest.value != 0.0:
        return None
    g_steps, g = finite_only(*view.grad_total)
    lr_steps, lr = finite_only(*view.series(LR_GROUP0))
    loss = first_vs_last(LOSS, *finite_only(*view.loss))
    if not len(g) or loss is None or not len(lr) or not lr[-1] > 0 or not loss.relative > NO_PROGRESS:
        return None
    grad = measure(GRAD_NORM_TOTAL, g_steps, g, "median")
    if not grad.value > 0:
        return None
    rate = at_step(LR_GROUP0, lr_steps, lr, len(lr) - 1)
    before, after = loss.before, loss.after
    return [
        Evidence(f"the update/weight ratio is exactly 0 on all {len(names)} watched parameters at every sample over "
                 f"{largest.where}: the optimizer's steps leave the model's weights unchanged",
                 Level(largest, equal=0.0), refs=(len(names),)),
        Evidence(f"yet gradients are there (total norm median {fmt(grad.value)} over {grad.where}) and the LR is "
                 f"{fmt(rate.value)} at step {rate.first}: the optimizer holds other tensors than this model's",
                 Level(grad, above=0.0), Level(rate, above=0.0)),
        Evidence(f"loss {change_words(loss)}: median {fmt(before.value)} over {before.where}, {fmt(after.value)} over "
                 f"{after.where} (no progress)", loss),
    ]


def nothing_trains(view: RunView) -> Finding | None:
    """Every parameter frozen, or none ever updated: the whole model is a dead layer."""
    frozen = _all_frozen(view)
    evidence = frozen or _never_updated(view)
    if evidence is None:
        return None
    fix = ("set requires_grad=True on the layers to train (model.requires_grad_(True), or unfreeze the head after freezing "
           "the backbone)" if frozen else
           "build the optimizer over this model's parameters, after the model is created and moved "
           "(torch.optim.X(model.parameters(), ...)); check that optimizer.param_groups holds model.parameters()")
    first = int(view.loss[0][0]) if view.n_steps else None
    finding = Finding("dead_layer", TITLE, 0.95, "critical", evidence, fix, first)
    finding.tags.add(TAG)
    return finding
