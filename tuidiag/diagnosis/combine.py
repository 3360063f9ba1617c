"""Ranking findings where symptoms overlap: name the cause once, list its symptoms under it.

Exploding gradients, a NaN loss, heavy clipping and dead ReLUs often share one
cause, an LR that is too high. When a cause and its symptoms fire together the
cause is ranked first, with more confidence, and the symptoms follow as
alternatives with less; the user sees one story instead of unrelated alarms.
Causes are visited strongest first, so where two findings could explain each
other (exploding gradients and a too-high LR) the better-supported one leads.
Causes precede their symptoms: a finding never claims a symptom that was already
showing before its own signature could have begun (:func:`may_precede`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tuidiag.diagnosis.evidence import Change, Evidence, Level, at_step, change_words, direction, measure
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.fix_edit import drop_move
from tuidiag.diagnosis.moves import Move
from tuidiag.text.numbers import confidence, fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS
from tuidiag.diagnosis.rules.generalization import underfitting_explained
from tuidiag.diagnosis.rules.loss import loss_spikes_explained
from tuidiag.diagnosis.rules.nothing_trains import TAG as NOTHING_TRAINS
from tuidiag.diagnosis.rules.recording import counts_line
from tuidiag.store.recorder_losses import run_losses

EXPLAINS: dict[str, tuple[str, ...]] = {
    "bad_input_data": ("nonfinite_loss", "loss_spikes", "exploding_gradients", "lr_too_high", "dead_relu", "activation_saturation",
                       "vanishing_gradients", "lr_too_low", "underfitting", "dead_layer"),
    "exploding_gradients": ("nonfinite_loss", "lr_too_high", "over_clipping", "loss_spikes", "dead_relu"),
    "lr_too_high": ("exploding_gradients", "nonfinite_loss", "over_clipping", "dead_relu", "loss_spikes", "underfitting",
                    "vanishing_gradients", "activation_saturation"),
    "dead_relu": ("dead_layer", "lr_too_low", "underfitting", "vanishing_gradients"),
    "activation_saturation": ("vanishing_gradients", "lr_too_low", "underfitting"),
    "vanishing_gradients": ("underfitting",),  # never lr_too_low: that rule stays silent while a layer is starved
    "over_clipping": ("lr_too_low", "underfitting"),
    "lr_decayed_too_early": ("underfitting",),
    "lr_too_low": ("underfitting",),
    "dead_layer": ("underfitting", "frozen_val_metric", "lr_too_low"),
    "train_mode_bug": ("underfitting",),
    "loss_spikes": ("exploding_gradients",),
    "rank_nonfinite_first": ("nonfinite_loss", "lr_too_high", "bad_input_data", "exploding_gradients", "loss_spikes", "rank_desync"),
    "rank_desync": ("loss_spikes", "lr_too_high", "exploding_gradients"),
    "straggler_rank": ("data_loading_bottleneck",),
    # the silent bugs: a wrong training loop explains the symptoms it produces
    "grad_not_zeroed": ("exploding_gradients", "lr_too_high", "loss_spikes", "over_clipping", "nonfinite_loss", "underfitting"),
    "double_softmax": ("underfitting", "lr_too_low", "vanishing_gradients", "activation_saturation"),
    "loss_shape_mismatch": ("underfitting", "lr_too_low"),
    "labels_misaligned": ("underfitting", "overfitting"),
    "unshuffled_data": ("loss_spikes", "lr_too_high", "class_imbalance"),
}
"""cause -> symptoms it explains when both fire."""

Condition = Callable[[Finding, Finding], bool]
CONDITIONS: dict[tuple[str, str], Condition] = {
    ("bad_input_data", "lr_too_high"): lambda cause, _: "severe" in cause.tags,
    ("bad_input_data", "exploding_gradients"): lambda cause, _: "severe" in cause.tags,
    ("exploding_gradients", "lr_too_high"): lambda cause, _: "from_start" in cause.tags,
    ("lr_too_high", "exploding_gradients"): lambda _, symptom: "from_start" not in symptom.tags,
    ("loss_spikes", "exploding_gradients"): lambda _, symptom: "isolated" in symptom.tags,
    ("rank_nonfinite_first", "lr_too_high"): lambda cause, _: "bad_input" in cause.tags,
    ("lr_too_high", "nonfinite_loss"): lambda _, symptom: "abrupt" not in symptom.tags,
    ("exploding_gradients", "nonfinite_loss"): lambda _, symptom: "abrupt" not in symptom.tags,
    ("dead_layer", "frozen_val_metric"): lambda cause, _: NOTHING_TRAINS in cause.tags,
    ("dead_layer", "lr_too_low"): lambda cause, _: NOTHING_TRAINS in cause.tags,
}
"""Pairs that hold only under a condition on the cause or the symptom."""
SPEED_CODES = frozenset({"data_loading_bottleneck", "low_gpu_utilization", "straggler_rank"})
"""Findings about how fast the steps run, not whether the training learns: none of them explains a failing training."""
AFTER_FAILURE = "after_failure"
"""The tag of a speed finding ranked below a failing training's cause (calibration keeps it there)."""
SYMPTOM_DISCOUNT = 0.6
CAUSE_BOOST = 0.05
CAP = 0.97


AS_SYMPTOM: dict[str, Callable[[Finding, Finding], Finding]] = {"loss_spikes": loss_spikes_explained,
                                                             "underfitting": underfitting_explained}
"""Symptoms whose own title or fix points at a cause of their own (loss spikes: atypical batches; underfitting: too
little capacity): how each reads once a cause explains it (``(symptom, cause) -> symptom``)."""


def _absorb(cause: Finding, symptom: Finding) -> tuple[Finding, Finding]:
    """``(cause, symptom)`` anew after ``cause`` absorbed ``symptom``: the cause names it and gains confidence, the symptom loses
    some, and one that named a cause of its own (:data:`AS_SYMPTOM`) names this one instead."""
    symptom = AS_SYMPTOM[symptom.code](symptom, cause) if symptom.code in AS_SYMPTOM else symptom
    cause = cause.changed(related=[*cause.related, symptom.code], confidence=min(CAP, cause.confidence + CAUSE_BOOST),
                          evidence=[*cause.evidence, f"also seen: {symptom.title} (listed below)"])
    return cause, symptom.changed(confidence=min(symptom.confidence, cause.confidence) * SYMPTOM_DISCOUNT)


def onset(finding: Finding) -> int | None:
    """The earliest step at which ``finding``'s signature may have begun (``None``: not tied to a step)."""
    return finding.onset_from if finding.onset_from is not None else finding.first_step


def may_precede(cause: Finding, symptom: Finding) -> bool:
    """Whether ``cause`` could have begun by the time ``symptom`` was first seen: a cause never comes after its symptom.

    Each finding's ``first_step`` is the first step at which its signature held; a cause's
    signature may have begun before it was first seen (between two samples of a sampled
    series, or in the quiet first steps no rule judges), so its earliest possible onset is
    compared. Findings not tied to a step are never ruled out by time.
    """
    start, seen = onset(cause), symptom.first_step
    return start is None or seen is None or start <= seen


def combine(findings: list[Finding]) -> list[Finding]:
    """New findings, ranked by confidence after letting causes absorb the symptoms they explain (``findings`` are left as they were)."""
    current = list(findings)
    by_code = {f.code: i for i, f in enumerate(current)}
    absorbed: set[str] = set()
    for i in sorted(range(len(current)), key=lambda i: -current[i].confidence):
        if current[i].severity == "info":
            continue
        for code in EXPLAINS.get(current[i].code, ()):
            j = by_code.get(code)
            if j is None:
                continue
            cause, symptom = current[i], current[j]
            if code in absorbed or cause.code in symptom.related or code in cause.related:
                continue
            if not CONDITIONS.get((cause.code, code), lambda *_: True)(cause, symptom) or not may_precede(cause, symptom):
                continue
            current[i], current[j] = _absorb(cause, symptom)
            absorbed.add(code)
    return sorted(_speed_after_failure(current), key=lambda f: -f.confidence)


def _speed_after_failure(findings: list[Finding]) -> list[Finding]:
    """``findings`` anew, each speed finding (:data:`SPEED_CODES`) ranked below the strongest critical finding about
    the training, if one fired: a slow loop does not make the loss NaN nor the gradients pile up, so the speed
    finding is not the cause of that failure; it keeps its evidence and fix, says why it is listed after, and
    takes a symptom's discount of the failure's confidence at most."""
    failures = [f for f in findings if f.severity == "critical" and f.code not in SPEED_CODES]
    if not failures:
        return findings
    failure = max(failures, key=lambda f: f.confidence)
    out = []
    for f in findings:
        if f.code in SPEED_CODES and f.severity != "info":
            note = "listed after the critical finding above it: how fast the steps run does not explain a failing training"
            f = f.changed(confidence=min(f.confidence, failure.confidence) * SYMPTOM_DISCOUNT, evidence=[*f.evidence, note],
                          tags={*f.tags, AFTER_FAILURE})
        out.append(f)
    return out


def _loss_line(view: RunView) -> Evidence:
    """The loss's start against its end: the first and last tenth (at most 10, at least 1 value each), never overlapping."""
    steps, loss = view.loss
    ok = np.isfinite(loss)
    steps, good = steps[ok], loss[ok]
    if len(good) < 2:
        if not len(good):
            return Evidence("no finite loss value yet")
        count = measure(LOSS, *view.loss, "count")
        return Evidence(f"too few finite loss values to compare a start and an end: {len(good)} over {count.where}", Level(count))
    k = max(1, min(10, len(good) // 10 if len(good) >= 20 else len(good) // 2))
    change = Change(measure(LOSS, steps[:k], good[:k], "median"), measure(LOSS, steps[-k:], good[-k:], "median"), "")
    change = Change(change.before, change.after, direction(change.before.value, change.after.value))
    return Evidence(f"loss {change_words(change)}: median {fmt(change.before.value)} over {change.before.where}, "
                    f"{fmt(change.after.value)} over {change.after.where}", change)


def healthy(view: RunView) -> Finding:
    """The single finding of a run with nothing wrong, with its key health figures."""
    evidence: list[str] = [_loss_line(view)] if view.n_steps else []
    g_steps, g = view.grad_total
    if len(g) and np.isfinite(g).any():
        grad = measure(GRAD_NORM_TOTAL, g_steps, g, "median")
        text = f"gradient norm median {fmt(grad.value)} over {grad.where} (healthy range 0.1-10)"
        evidence.append(Evidence(text, Level(grad), refs=(0.1, 10)))
    v_steps, val = view.val_loss
    if len(val) and view.val_loss_name is not None:
        last = at_step(view.val_loss_name, v_steps, val, len(val) - 1)
        evidence.append(Evidence(f"validation loss {fmt(last.value)} at step {last.first}, the last evaluation", Level(last)))
    if not evidence:
        evidence.append(Evidence("not enough data yet to judge"))
    if losses := run_losses(view.run, view.at):
        evidence.append(counts_line(view, f"judged on what was recorded; the recorder reports: {losses.text()} (see the notes)"))
    return Finding("healthy", "No problem detected", 0.8 if view.n_steps >= 100 else 0.5, "info", evidence, fix="none", first_step=None)


def unreadable(view: RunView, reasons: list[str]) -> Finding:
    """The single finding of a run whose log could not be read at all (never ``healthy``): what to do, and why."""
    what = view.run.unreadable or "cannot be read"
    evidence = [Evidence(reason) for reason in reasons] or [Evidence(f"no data could be read: {what}")]
    return Finding("unreadable", f"Unreadable: {what}", 1.0, "warning", evidence,
                   fix=f"{what}, then read the log again", first_step=None)


def _support(finding: Finding) -> tuple[int, float]:
    """How well a finding is supported, for ranking conflicts: alarms above notes, then confidence."""
    return (0 if finding.severity == "info" else 1, finding.confidence)


def _drop_move(finding: Finding, move: Move, winner: Finding) -> Finding:
    """``finding`` anew without ``move``'s clause in its fix, saying which finding it conflicts with."""
    return drop_move(finding, move, f"not {move.doing}: conflicts with {winner.title} ({confidence(winner.confidence)})")


def resolve_fix_conflicts(findings: list[Finding]) -> list[Finding]:
    """``findings`` anew, in the same order, so that no two advise opposite moves on one setting (LR up and
    down, clipping tighter and looser, ...); the findings given are left as they were.

    For each setting, the best-supported finding that moves it decides the direction:
    alarms over notes, then the higher confidence, except that a cause beats a symptom it
    explains (it is causally earlier). Every finding advising the opposite move loses
    that clause of its fix and says why instead ("not raising the LR: conflicts with
    Learning rate too high (87%)").
    """
    current = list(findings)
    settings = sorted({move.setting for finding in current for move in finding.moves})
    for setting in settings:
        holders = [(i, m) for i, f in enumerate(current) for m in f.moves if m.setting == setting]
        holders.sort(key=lambda h: _support(current[h[0]]), reverse=True)
        if len({m.direction for _, m in holders}) < 2:
            continue
        win, direction_ = holders[0]
        for i, move in holders[1:]:
            if move.opposes(direction_) and current[win].code in current[i].related:
                win, direction_ = i, move
        winner = current[win]
        for i, move in holders:
            if move.opposes(direction_) and move in current[i].moves:
                current[i] = _drop_move(current[i], move, winner)
    return current
