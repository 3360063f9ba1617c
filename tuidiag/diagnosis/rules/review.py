"""Architecture and setup review: informational notes for the root-cause analysis, never alarms.

Model capacity against the data seen, depth without normalization layers, a training
loss that falls while the validation accuracy stalls.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Change, Compare, Evidence, Fact, Product, change_words, measure, quoted
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.moves import CAPACITY_DOWN, REG_UP, fix_text
from tuidiag.diagnosis.rules.measures import drop_of, first_vs_last
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import VAL_ACC_NAMES, RunView
from tuidiag.format import LOSS


def capacity_vs_data(view: RunView) -> Finding | None:
    """Parameter count against the number of samples seen so far."""
    n_params = view.model.get("n_trainable")
    config = view.manifest.get("config") if isinstance(view.manifest.get("config"), dict) else {}
    batch = config.get("batch_size")
    if not isinstance(n_params, int) or not isinstance(batch, int) or not view.n_steps:
        return None
    seen = batch * view.n_steps
    ratio = n_params / seen
    if ratio < 10:
        return None
    steps = measure(LOSS, *view.loss, "count")
    samples = Product((Fact("manifest", "config.batch_size", batch), steps))
    evidence: list[str] = [Evidence(f"{n_params:,} trainable parameters against {seen:,} samples seen (batch size {batch} x "
                                    f"{view.n_steps} steps over {steps.where}): {fmt(ratio)} per sample",
                                    Compare(Fact("manifest", "model.n_trainable", n_params), samples))]
    fix = fix_text("expect memorization: watch validation closely", (REG_UP, "add regularization or data"),
                   (CAPACITY_DOWN, "or use a smaller model"))
    return Finding("overparameterized", "Many parameters per sample seen", 0.5, "info", evidence, fix, None)


def deep_without_normalization(view: RunView) -> Finding | None:
    """Depth without normalization layers."""
    depth = view.model.get("weight_layers")
    if not isinstance(depth, int) or depth <= 10 or view.model.get("has_norm"):
        return None
    acts = ", ".join(view.model.get("activations") or []) or "unknown activations"
    facts = (Fact("manifest", "model.weight_layers", depth), Fact("manifest", "model.has_norm", view.model.get("has_norm")),
             Fact("manifest", "model.activations", tuple(view.model.get("activations") or ())))
    evidence: list[str] = [Evidence(f"{depth} weight layers, no normalization layers ({acts})", *facts)]
    fix = "add BatchNorm/LayerNorm between layers or residual connections; deep plain stacks train poorly"
    return Finding("deep_unnormalized", "Deep network without normalization", 0.5, "info", evidence, fix, None)


def loss_accuracy_mismatch(view: RunView) -> Finding | None:
    """Training loss falls while validation accuracy stalls."""
    name = view.first_present(VAL_ACC_NAMES)
    if name is None:
        return None
    steps, acc = view.series(name)
    if len(acc) < 5 or not np.isfinite(acc).all():
        return None
    l_steps, loss = view.loss
    half = len(loss) // 2
    fell = first_vs_last(LOSS, l_steps[half:], loss[half:])
    train_gain = drop_of(fell)
    # medians of a few evaluations each, in the middle and at the end: two single evaluations of a noisy accuracy
    # (one at a local peak) read as a drop where there was none
    width = max(2, len(acc) // 5)
    mid = max(0, len(acc) // 2 - width // 2)
    early = measure(name, steps[mid:mid + width], acc[mid:mid + width], "median")
    late = measure(name, steps[-width:], acc[-width:], "median")
    acc_gain = late.value - early.value
    if fell is None or train_gain < 0.2 or acc_gain > 0.005:
        return None
    moved = Change(early, late, "")
    loss_span = f"{fmt(fell.before.value)} over {fell.before.where} -> {fmt(fell.after.value)} over {fell.after.where}"
    acc_span = f"median {fmt(early.value)} over {early.where} -> {fmt(late.value)} over {late.where}"
    evidence: list[str] = [Evidence(f"training loss {change_words(fell)} over the second half ({loss_span}) while {quoted(name)} "
                                    f"moved {acc_gain:+.3f} ({acc_span})", fell, moved)]
    fix = "the model is getting more confident, not more correct: check for overfitting and label noise"
    return Finding("loss_accuracy_mismatch", "Loss falls, accuracy stalls", 0.5, "info", evidence, fix, int(steps[mid]))


RULES = [capacity_vs_data, deep_without_normalization, loss_accuracy_mismatch]
