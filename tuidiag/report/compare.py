"""Before/after comparison of two runs: headline metrics, their change, findings gone or new.

``compare_runs(a, b)`` treats ``a`` as *before* and ``b`` as *after* a fix: a fix is
validated by retraining with it and comparing the two runs. A change counts in the
verdict only above :data:`THRESHOLD_PCT` (10%): a smaller one is within run-to-run noise.
A run whose training loss ends NaN/Inf, or ends more than :data:`BLOWUP` times above the lowest it
reached, *diverged*: the verdict leads with that, since no best value reached before diverging
makes it the better run at the end. A diverged run's best values are taken from the steps before
it diverged, so "before diverging" is true of them. A finding absent from B is "not present in
B", not "resolved": the runs need not be one training and its fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuidiag.diagnosis import Diagnosis, diagnose
from tuidiag.diagnosis.codes import badge
from tuidiag.diagnosis.view import VAL_ACC_NAMES, VAL_LOSS_NAMES, RunView
from tuidiag.store import Run
from tuidiag.store.job_results import job_records

THRESHOLD_PCT = 10.0
BLOWUP = 100.0
"""A training loss that ends (median of its last steps) this many times above its lowest (smoothed) diverged,
though finite: no ordinary training, overfitting included, ends 100x above its best training loss."""
TAIL = 10
"""Steps over which "final" train loss and gradient norm are a median, and "best" train loss a moving average."""


@dataclass(frozen=True)
class Metric:
    """One headline number of both runs; ``better`` is ``lower``, ``higher`` or ``None`` (neutral)."""

    key: str
    label: str
    a: float | None
    b: float | None
    better: str | None

    @property
    def change_pct(self) -> float | None:
        """(b - a) / |a| in percent, when both are finite and a is not 0."""
        if not _finite(self.a) or not _finite(self.b) or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a) * 100

    @property
    def change_text(self) -> str:
        """The change as the table and the verdict both print it: ``+327.5%`` (B relative to A, signed as the
        value moved), ``A NaN/Inf`` / ``B NaN/Inf`` where one side is not finite, else empty."""
        change = self.change_pct
        if change is None:
            if _finite(self.a) != _finite(self.b) and self.a is not None and self.b is not None:
                return "B NaN/Inf" if _finite(self.a) else "A NaN/Inf"
            return ""
        return f"{change:+.1f}%" if abs(change) < 10_000 else f"{change:+.2g}%"  # -5.5e+09%, not cut to -5545285250.…

    @property
    def improvement_pct(self) -> float | None:
        """The change with its sign turned so that positive means B is better."""
        change = self.change_pct
        if change is None or self.better is None:
            return None
        return change if self.better == "higher" else -change

    @property
    def outcome(self) -> str:
        """``better``, ``worse``, ``same`` (B against A), or ``n/a``."""
        if self.better is None or self.a is None or self.b is None:
            return "n/a"
        if _finite(self.a) != _finite(self.b):
            return "better" if _finite(self.b) else "worse"
        gain = self.improvement_pct
        return "n/a" if gain is None else "better" if gain > 0 else "worse" if gain < 0 else "same"


@dataclass
class Comparison:
    """Two runs side by side: metrics, findings by code and a one-line verdict."""

    a: dict[str, Any]
    b: dict[str, Any]
    metrics: list[Metric]
    disappeared: list[dict[str, str]] = field(default_factory=list)
    appeared: list[dict[str, str]] = field(default_factory=list)
    persisted: list[dict[str, str]] = field(default_factory=list)
    verdict: str = ""

    def outcome_text(self, metric: Metric) -> str:
        """``metric``'s outcome as the table says it: ``better`` / ``worse`` qualified when the run it favours
        diverged, since no value makes that run the better one at the end (the verdict says which is): a best value,
        taken from the steps before it diverged (:func:`summarize`), ``, before B diverged``; a final one (logged
        whenever), ``, but B diverged``. The final train loss is the divergence itself: its row needs no qualifier."""
        outcome = metric.outcome
        if metric.key == "final_train_loss" or outcome not in ("better", "worse"):
            return outcome
        da, db = self.a.get("diverged_step"), self.b.get("diverged_step")
        link = "before" if metric.key.startswith("best_") else "but"
        if da is not None and db is not None:
            return f"{outcome}, {link} both diverged"
        favoured, favoured_diverged = ("B", db) if outcome == "better" else ("A", da)
        return f"{outcome}, {link} {favoured} diverged" if favoured_diverged is not None else outcome

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (non-finite numbers as the strings ``nan``, ``inf``, ``-inf``)."""
        metrics = [{"key": m.key, "label": m.label, "a": _json_num(m.a), "b": _json_num(m.b), "better": m.better,
                    "change_pct": _json_num(m.change_pct), "improvement_pct": _json_num(m.improvement_pct),
                    "outcome": m.outcome, "outcome_text": self.outcome_text(m)} for m in self.metrics]
        return {"a": _json_safe(self.a), "b": _json_safe(self.b), "metrics": metrics,
                "findings": {"disappeared": self.disappeared, "appeared": self.appeared, "persisted": self.persisted},
                "threshold_pct": THRESHOLD_PCT, "verdict": self.verdict}


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _json_safe(data: dict[str, Any]) -> dict[str, Any]:
    """A summary with its non-finite numbers written as strings."""
    return {k: _json_num(v) if isinstance(v, float) else v for k, v in data.items()}


def _json_num(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return None if value is None else round(float(value), 6)
    return str(value)


def _final(values: np.ndarray) -> float | None:
    """The last value if it is non-finite (the run ended diverged), else the median of the last steps."""
    if not len(values):
        return None
    if not math.isfinite(values[-1]):
        return float(values[-1])
    tail = values[-TAIL:]
    return float(np.median(tail[np.isfinite(tail)]))


def _best_smoothed(values: np.ndarray) -> float | None:
    """Lowest mean of :data:`TAIL` consecutive finite values (of all of them, when fewer): whole windows only, so one
    lucky batch, the first step's included, does not count."""
    good = values[np.isfinite(values)]
    if not len(good):
        return None
    window = min(TAIL, len(good))
    return float(np.min(np.convolve(good, np.ones(window) / window, mode="valid")))


def _extreme(view: RunView, names: tuple[str, ...], lowest: bool, until: int | None = None) -> tuple[float | None, float | None]:
    """(last, best) of the first recorded metric among ``names``; the best over steps before ``until`` only (a run
    that diverged there: ``None`` when nothing was logged before it)."""
    name = view.first_present(names)
    if name is None:
        return None, None
    steps, values = view.series(name)
    judged = values if until is None else values[steps < until]
    good = judged[np.isfinite(judged)]
    if not len(good):
        return float(values[-1]), float("nan") if until is None else None
    return float(values[-1]), float(good.min()) if lowest else float(good.max())


def _diverged_at(steps: np.ndarray, values: np.ndarray) -> tuple[int, str] | None:
    """The step from which the training loss stayed diverged to the end, and how: ``nonfinite`` (NaN/Inf from
    there on) or ``blowup`` (finite, but above :data:`BLOWUP` x its lowest smoothed value from there on, and
    its final value too); ``None`` when it did not diverge."""
    if not len(values):
        return None
    if not math.isfinite(values[-1]):
        finite = np.flatnonzero(np.isfinite(values))
        return int(steps[finite[-1] + 1 if len(finite) else 0]), "nonfinite"
    best, final = _best_smoothed(values), _final(values)
    if best is None or final is None or not best > 0 or not final > BLOWUP * best:
        return None
    calm = np.flatnonzero(np.isfinite(values) & (values <= BLOWUP * best))
    return int(steps[calm[-1] + 1 if len(calm) else 0]), "blowup"


def summarize(run: Run, diagnosis: Diagnosis) -> dict[str, Any]:
    """The facts of one run that a comparison shows. A run that diverged has its best values taken from the steps
    before it did (none: ``None``); its final values are its last, whenever logged."""
    view = RunView(run)
    loss_steps, loss = view.loss
    diverged = _diverged_at(loss_steps, loss)
    until = diverged[0] if diverged is not None else None
    final_val, best_val = _extreme(view, VAL_LOSS_NAMES, lowest=True, until=until)
    final_acc, best_acc = _extreme(view, VAL_ACC_NAMES, lowest=False, until=until)
    return {
        "name": run.name, "path": str(run.path), "status": run.status, "steps": view.n_steps, "last_step": view.last_step,
        "val_loss_metric": view.first_present(VAL_LOSS_NAMES), "val_acc_metric": view.first_present(VAL_ACC_NAMES),
        "final_train_loss": _final(loss), "best_train_loss": _best_smoothed(loss if until is None else loss[loss_steps < until]),
        "final_val_loss": final_val, "best_val_loss": best_val, "final_val_acc": final_acc, "best_val_acc": best_acc,
        "final_grad_norm": _final(view.grad_total[1]), "diverged_step": until,
        "diverged_how": diverged[1] if diverged is not None else None,
        "findings": [{"code": f.code, "title": f.title, "severity": f.severity}
                     for f in diagnosis.findings + diagnosis.notes if f.code != "healthy"],
    }


METRICS: list[tuple[str, str, str | None]] = [
    ("steps", "steps logged", None),
    ("final_train_loss", "final train loss", "lower"),
    ("best_train_loss", "best train loss", "lower"),
    ("final_val_loss", "final val loss", "lower"),
    ("best_val_loss", "best val loss", "lower"),
    ("final_val_acc", "final val accuracy", "higher"),
    ("best_val_acc", "best val accuracy", "higher"),
    ("final_grad_norm", "final gradient norm", None),
]
METHOD = (f"final train loss and gradient norm: median of the last {TAIL} steps (the last value when it is NaN/Inf); "
          f"best train loss: lowest {TAIL}-step moving average; validation: as logged")
"""How the numbers are taken, for a caption."""
HEADLINES = ("best_val_loss", "best_val_acc", "final_val_loss", "final_train_loss")
"""The metric the verdict leads with: the first that both runs have."""


def compare_runs(a: Run, b: Run) -> Comparison:
    """Compare run ``a`` (before) with run ``b`` (after): metrics, findings by code, verdict."""
    return compare_summaries(summarize(a, diagnose(a, jobs=job_records(a))), summarize(b, diagnose(b, jobs=job_records(b))))


def compare_summaries(sa: dict[str, Any], sb: dict[str, Any]) -> Comparison:
    """Compare two :func:`summarize` results, ``sa`` before and ``sb`` after (no run is read here)."""
    metrics = [Metric(key, label, _num(sa[key]), _num(sb[key]), better) for key, label, better in METRICS]
    codes_a = {f["code"]: f for f in sa["findings"]}
    codes_b = {f["code"]: f for f in sb["findings"]}
    result = Comparison(sa, sb, metrics,
                        disappeared=[f for c, f in codes_a.items() if c not in codes_b],
                        appeared=[f for c, f in codes_b.items() if c not in codes_a],
                        persisted=[codes_b[c] for c in codes_a if c in codes_b])
    result.verdict = verdict(result)
    return result


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


FINAL_OF = {"best_val_loss": "final_val_loss", "best_val_acc": "final_val_acc"}
"""The end-of-run counterpart of a best-value headline: the verdict says so when the two disagree."""


def _direction(metric: Metric) -> str:
    """``better`` or ``worse`` (B against A) beyond :data:`THRESHOLD_PCT`, ``same`` within it, ``n/a`` without both."""
    if metric.outcome not in ("better", "worse"):
        return metric.outcome
    gain = metric.improvement_pct
    return metric.outcome if gain is None or abs(gain) >= THRESHOLD_PCT else "same"


def _change(metric: Metric) -> str:
    """``best val loss +327.5%``, or ``best val loss nan -> 0.5`` where no percentage exists."""
    if metric.change_pct is None:
        return f"{metric.label} {metric.a:.4g} -> {metric.b:.4g}"
    return f"{metric.label} {metric.change_text}"


def _headline(head: Metric) -> str:
    """``B improves on A: ...``, ``B is worse than A: ...`` or ``No clear difference: ...`` on one metric."""
    direction = _direction(head)
    if direction == "better":
        return f"B improves on A: {_change(head)}"
    if direction == "worse":
        return f"B is worse than A: {_change(head)}"
    return f"No clear difference: {_change(head)} (under the {THRESHOLD_PCT:.0f}% threshold)"


def _at_the_end(head: Metric, final: Metric | None) -> str:
    """``; but at the end B is worse: final val loss +40.0%`` when the end disagrees with the best values, else empty."""
    if final is None or _direction(final) not in ("better", "worse") or _direction(final) == _direction(head):
        return ""
    link = "; but at the end" if _direction(head) in ("better", "worse") else "; at the end"
    return f"{link} B is {_direction(final)}: {_change(final)}"


def _how(step: int, how: str | None) -> str:
    """``NaN/Inf from step 150``, or ``loss over 100x its best from step 150`` for a finite blow-up."""
    return f"loss over {BLOWUP:g}x its best from step {step}" if how == "blowup" else f"NaN/Inf from step {step}"


def _diverged(da: int | None, db: int | None, head: Metric | None, how_a: str | None = None, how_b: str | None = None) -> str:
    """The verdict when one run or both diverged (``da``/``db``: the step it diverged from; ``how_*``: ``nonfinite`` or
    ``blowup``). Only best values, taken before each run diverged (:func:`summarize`), are compared "before diverging"."""
    if da is not None and db is not None:
        before = (f"; before diverging, {_headline(head).replace('No clear', 'no clear', 1)}"
                  if head is not None and head.key in FINAL_OF else "")
        second = f"from step {db}" if how_a == how_b != "blowup" else _how(db, how_b)
        return f"Both runs diverged (A: {_how(da, how_a)}, B: {second}){before}"
    name, other, step, how = ("A", "B", da, how_a) if da is not None else ("B", "A", db, how_b)
    text = f"{name} diverged ({_how(step, how)}); {other} did not: B is {'better' if name == 'A' else 'worse'} at the end"
    if head is None or head.key not in FINAL_OF or not (_finite(head.a) and _finite(head.b)):
        return text
    lower = head.b < head.a if head.better == "lower" else head.b > head.a
    best_side = "B" if lower else "A"
    word = "lower" if head.better == "lower" else "higher"
    if _direction(head) == "same":
        return text + f"; about the same {head.label} ({name}'s before it diverged: A {head.a:.4g}, B {head.b:.4g})"
    joint = "though" if best_side == name else "and"
    return text + f", {joint} {best_side} had the {word} {head.label} (A {head.a:.4g}, B {head.b:.4g})" + (
        " before diverging" if best_side == name else "")


def verdict(result: Comparison) -> str:
    """One line: does B improve on A, by how much on the headline metric, whether either diverged, and which
    alarms are not present in B or new in it."""
    by_key = {m.key: m for m in result.metrics}
    head = next((by_key[k] for k in HEADLINES if by_key[k].outcome != "n/a"), None)
    da, db = result.a.get("diverged_step"), result.b.get("diverged_step")
    if da is not None or db is not None:
        text = _diverged(da, db, head, result.a.get("diverged_how"), result.b.get("diverged_how"))
    elif head is None:
        text = "Cannot compare: no loss or validation metric recorded in both runs"
    else:
        text = _headline(head) + _at_the_end(head, by_key.get(FINAL_OF.get(head.key, "")))
    gone = [badge(f["code"]) for f in result.disappeared if f["severity"] != "info"]  # named as the monitor names them
    new = [badge(f["code"]) for f in result.appeared if f["severity"] != "info"]
    if gone:
        text += f"; not present in B: {', '.join(gone)}"
    if new:
        text += f"; new in B: {', '.join(new)}"
    return text
