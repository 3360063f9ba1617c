"""The silent bugs planted in synthetic series, as the recorder's probes would record them (and their near misses).

Each plant edits a run's series in place (``Series`` of ``benchmarks.suite.synthetic``) for
a run of ``n`` steps and may add manifest entries or events to ``extra``
(``model``, ``events``). Used by ``tests/test_rules.py`` (600-step runs) and by the
evidence matrix (``tests/evidence_runs.py``, 1 to 1000 steps).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from synthetic_runs import Series, model_summary
from tuidiag.recorder.writer import EventRow

EVERY = 10
"""The probes sample every 10th step."""
CLASSES = 4
SHAPES_WORDS = "input (64, 1) and target (64,) broadcast to (64, 64)"
MIN_RUN_STEPS = 5
"""Batches of one class in a row, at least (the rule wants 4)."""


def _steps(s: Series) -> np.ndarray:
    return s["train/loss"][0]


def _loss_fn_event(name: str, expects: str) -> EventRow:
    return EventRow(0, 0.0, "loss_fn", "info", f"loss function {name} (expects {expects})", {"key": name, "expects": expects})


def _sampled(s: Series, name: str, values: Any, start: int = 0) -> None:
    steps = _steps(s)[start::EVERY]
    s[name] = (steps, np.broadcast_to(np.asarray(values, float), steps.shape).copy())


def _events(extra: dict[str, Any], *rows: EventRow) -> None:
    extra["events"] = [*extra.get("events", []), *rows]


def not_zeroed(s: Series, n: int, extra: dict[str, Any]) -> None:
    """zero_grad missing: gradients add up, so their norm climbs, and the probe finds the previous gradient every time."""
    t = _steps(s)
    grow = 1 + 20 * t / max(n - 1, 1)
    for name in [k for k in s if k.startswith("grad_norm/")]:
        s[name] = (s[name][0], s[name][1] * grow[: len(s[name][1])])
    total = s["grad_norm/total"][1]
    _sampled(s, "grad/stale_norm", 0.95 * total[EVERY::EVERY], start=EVERY)


def zeroed(s: Series, n: int, extra: dict[str, Any]) -> None:
    """The near miss: gradients zeroed every step (the probe reads exact zeros), the norm climbing for another reason."""
    not_zeroed(s, n, extra)
    _sampled(s, "grad/stale_norm", 0.0, start=EVERY)


def probabilities_to_ce(s: Series, n: int, extra: dict[str, Any]) -> None:
    """A final softmax before CrossEntropyLoss: every input row a distribution, the loss stuck above its floor."""
    _sampled(s, "loss_fn/prob_rows", 1.0)
    _sampled(s, "loss_fn/classes", CLASSES)
    _sampled(s, "loss_fn/broadcast", 0.0)
    t = _steps(s)
    s["train/loss"] = (t, 0.76 + 0.6 * np.exp(-4 * t / max(n - 1, 1)))
    extra["model"] = model_summary(module_kinds={"Linear": 3, "ReLU": 2, "Softmax": 1})
    _events(extra, _loss_fn_event("CrossEntropyLoss", "class logits"))


def logits_to_ce(s: Series, n: int, extra: dict[str, Any]) -> None:
    """The near miss: CrossEntropyLoss on logits (no input row is a distribution)."""
    _sampled(s, "loss_fn/prob_rows", 0.0)
    _sampled(s, "loss_fn/classes", CLASSES)
    _sampled(s, "loss_fn/broadcast", 0.0)
    _events(extra, _loss_fn_event("CrossEntropyLoss", "class logits"))


def broadcast_mse(s: Series, n: int, extra: dict[str, Any]) -> None:
    """MSELoss of a (64, 1) output against (64,) targets at every sampled step."""
    _sampled(s, "loss_fn/broadcast", 1.0)
    shapes = {"key": SHAPES_WORDS, "input_shape": [64, 1], "target_shape": [64], "broadcast_shape": [64, 64]}
    _events(extra, _loss_fn_event("MSELoss", "input and target of one shape"),
            EventRow(0, 0.0, "loss_shapes", "warning", f"MSELoss: {SHAPES_WORDS}", shapes))


def matching_mse(s: Series, n: int, extra: dict[str, Any]) -> None:
    """The near miss: MSELoss with matching shapes."""
    _sampled(s, "loss_fn/broadcast", 0.0)
    _events(extra, _loss_fn_event("MSELoss", "input and target of one shape"))


def chance_loss(s: Series, n: int, extra: dict[str, Any]) -> None:
    """Targets shuffled apart from their inputs: the loss sits at log(4) while the weights keep moving, and the validation
    loss and accuracy at chance too (nothing learnt holds on held-out data)."""
    t = _steps(s)
    wiggle = 0.01 * np.sin(t * 0.7)
    s["train/loss"] = (t, math.log(CLASSES) * (1 + wiggle))
    for name, chance in (("val/loss", math.log(CLASSES) * 1.01), ("val/acc", 1 / CLASSES)):
        if name in s:  # wobbling a little, as an evaluation on held-out batches does (a constant reads as a frozen metric)
            every = s[name][0]
            s[name] = (every, chance * (1 + 0.005 * np.sin(every * 0.37)))
    _sampled(s, "loss_fn/classes", CLASSES)
    _sampled(s, "loss_fn/prob_rows", 0.0)
    _events(extra, _loss_fn_event("CrossEntropyLoss", "class logits"))


def chance_loss_frozen(s: Series, n: int, extra: dict[str, Any]) -> None:
    """The near miss: the loss at chance because the weights barely move (an LR far too low), not the labels."""
    chance_loss(s, n, extra)
    for name in [k for k in s if k.startswith("update_ratio/")]:
        s[name] = (s[name][0], np.full(len(s[name][0]), 1e-7))


def sorted_by_class(s: Series, n: int, extra: dict[str, Any]) -> None:
    """Batches in class order: one class per batch, the class changing every n/12 steps, the loss jumping at each change."""
    t = _steps(s)
    run = max(MIN_RUN_STEPS, n // 12)
    s["target/majority_share"] = (t, np.ones(len(t)))
    s["target/majority_class"] = (t, ((t // run) % CLASSES).astype(float))
    loss = s["train/loss"][1]
    s["train/loss"] = (t, np.where(t % run < 2, 1.6 * loss, loss))


def imbalanced_shuffled(s: Series, n: int, extra: dict[str, Any]) -> None:
    """The near miss: class 0 leads every batch (96% of it): an imbalance, shuffled."""
    t = _steps(s)
    s["target/majority_share"] = (t, np.full(len(t), 0.96))
    s["target/majority_class"] = (t, np.zeros(len(t)))

