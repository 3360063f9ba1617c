"""A note on runs tuidiag's recorder did not write (a TensorBoard, W&B or CSV log, live or imported):
which rules had nothing to judge because the log lacks the metrics they read.

One note (an extension code, ``metrics_missing``, severity ``info``), never an alarm:
the other rules judge whatever metrics the log has, and "No problem detected" must not
be read as "every rule looked". Each line names a kind of metric the recorder writes
and the rules that read it; a kind the log has (under any name that maps onto it) is
not listed.
"""

from __future__ import annotations

from typing import Callable

from tuidiag.diagnosis.evidence import Evidence, Fact, quoted
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.view import RunView
from tuidiag.format import (
    ACT_DEAD_PREFIX, ACT_SATURATED_PREFIX, GRAD_NORM_PREFIX, GRAD_NORM_TOTAL, GRAD_STALE_NORM, INPUT_PREFIX, MODEL_TRAINING,
    TIME_DATA_WAIT, TIME_STEP,
)

LOSS_FN_PREFIX = "loss_fn/"
KIND_NAMES = {"tensorboard": "a TensorBoard log", "wandb": "a W&B run", "csv": "a CSV log"}


def _has_prefix(prefix: str, but: tuple[str, ...] = ()) -> Callable[[RunView], bool]:
    return lambda view: any(n.startswith(prefix) and n not in but for n in view.run.metric_names)


def _has(*names: str) -> Callable[[RunView], bool]:
    return lambda view: all(view.run.has(n) for n in names)


NEEDS: tuple[tuple[str, Callable[[RunView], bool], tuple[str, ...]], ...] = (
    ("total gradient norm", _has(GRAD_NORM_TOTAL), ("exploding_gradients",)),
    ("per-layer gradient norms", _has_prefix(GRAD_NORM_PREFIX, (GRAD_NORM_TOTAL,)), ("vanishing_gradients",)),
    ("activation statistics", lambda view: _has_prefix(ACT_DEAD_PREFIX)(view) or _has_prefix(ACT_SATURATED_PREFIX)(view),
     ("dead_relu", "activation_saturation")),
    ("input statistics", _has_prefix(INPUT_PREFIX), ("bad_input_data",)),
    ("step timing", _has(TIME_STEP, TIME_DATA_WAIT), ("data_loading_bottleneck",)),
    ("model train/eval mode", _has(MODEL_TRAINING), ("train_mode_bug",)),
    ("loss-function inputs", _has_prefix(LOSS_FN_PREFIX), ("double_softmax",)),
    ("gradients left from the step before", _has(GRAD_STALE_NORM), ("grad_not_zeroed",)),
)
"""(what the recorder records, whether the run has it, the rules that judge nothing without it)."""


def _origin(view: RunView) -> tuple[str, Fact] | None:
    """How the run was written, when not by the recorder: (words, the manifest fact that says so)."""
    source = view.run.manifest.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("live") and isinstance(source.get("kind"), str):
        kind = source["kind"]
        return f"read live from {KIND_NAMES.get(kind, quoted(kind))}", Fact("manifest", "source.kind", kind)
    if isinstance(source.get("format"), str):
        return f"imported from {quoted(source['format'])}", Fact("manifest", "source.format", source["format"])
    return None


def metrics_missing(view: RunView) -> Finding | None:
    """A run not written by the recorder lacks metrics some rules read: name them and the rules (one note)."""
    origin = _origin(view)
    if origin is None:
        return None
    lacking = [(what, rules) for what, present, rules in NEEDS if not present(view)]
    if not lacking:
        return None
    words, fact = origin
    evidence: list[str] = [
        Evidence(f"this run was {words}, not recorded by tuidiag's recorder", fact),
        f"the log has no {_listed([what for what, _ in lacking])}",
        f"so these rules did not judge it: {', '.join(rule for _, rules in lacking for rule in rules)}",
    ]
    fix = "the other rules judged the metrics the log has; record with tuidiag.Recorder (rec.watch(model)) to have these judged too"
    return Finding("metrics_missing", "Some rules need metrics this log lacks", 1.0, "info", evidence, fix, None)


def _listed(items: list[str]) -> str:
    """``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


RULES = [metrics_missing]
