"""Architecture and setup review (the seeds' Phase 2): informational notes, never alarms."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import loss_drop
from tuidiag.diagnosis.stats import fmt
from tuidiag.diagnosis.view import RunView, VAL_ACC_NAMES


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
    evidence = [f"{n_params:,} trainable parameters against {seen:,} samples seen ({fmt(ratio)} per sample)"]
    fix = "expect memorization: watch validation closely, add regularization or data, or use a smaller model"
    return Finding("overparameterized", "Many parameters per sample seen", 0.5, "info", evidence, fix, None)


def deep_without_normalization(view: RunView) -> Finding | None:
    """Depth without normalization layers."""
    depth = view.model.get("weight_layers")
    if not isinstance(depth, int) or depth <= 10 or view.model.get("has_norm"):
        return None
    acts = ", ".join(view.model.get("activations") or []) or "unknown activations"
    evidence = [f"{depth} weight layers, no normalization layers ({acts})"]
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
    train_gain = loss_drop(view.loss[1][len(view.loss[1]) // 2 :])
    acc_gain = float(acc[-1] - acc[len(acc) // 2])
    if train_gain < 0.2 or acc_gain > 0.005:
        return None
    evidence = [f"training loss fell {train_gain:.0%} over the second half while {name} moved {acc_gain:+.3f}"]
    fix = "the model is getting more confident, not more correct: check for overfitting and label noise"
    return Finding("loss_accuracy_mismatch", "Loss falls, accuracy stalls", 0.5, "info", evidence, fix, int(steps[len(acc) // 2]))


RULES = [capacity_vs_data, deep_without_normalization, loss_accuracy_mismatch]
