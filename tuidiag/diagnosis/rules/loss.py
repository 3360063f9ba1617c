"""Rules read mainly from the loss curve: non-finite loss, spikes that recover."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Compare, Evidence, Fact, Level, Occurrences, Periodic, at_step, measure, quoted
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.job_evidence import nan_hunt_counts
from tuidiag.diagnosis.lr_target import plain, scaled
from tuidiag.diagnosis.moves import CLIP_TIGHTER, LR_DOWN, WARMUP_UP, fix_text
from tuidiag.diagnosis.rules.measures import after_quiet
from tuidiag.diagnosis.rules.precursors import before_nonfinite
from tuidiag.diagnosis.stats import local_baseline, robust_sigma
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS

SPIKE_Z = 8.0
SPIKE_WINDOW = 51
SPIKE_HORIZON = 100_000
"""Spikes are looked for in the newest steps only (a monitor cares about the recent ones; it keeps long runs cheap)."""


def _nonfinite_evidence(view: RunView, steps: np.ndarray, values: np.ndarray, i: int) -> list[str]:
    """Where the loss went non-finite, what it was before, and the gradients leading up to it."""
    bad = ~np.isfinite(values)
    everything = measure(LOSS, steps, values, "count")
    first = Occurrences((LOSS,), int(steps[0]), int(steps[-1]), "nonfinite", (int(steps[i]),), int(bad.sum()))
    evidence = [Evidence(f"loss is {values[i]} at step {steps[i]}, its first non-finite value; {int(bad.sum())} of the "
                         f"{len(values)} values over {everything.where} are non-finite",
                         first, Level(at_step(LOSS, steps, values, i)), Level(everything))]
    if i > 0:
        last_good = at_step(LOSS, steps, values, i - 1)
        evidence.append(Evidence(f"last finite loss {fmt(values[i - 1])} at step {steps[i - 1]}", Level(last_good)))
    g_steps, g = view.grad_total
    window = (g_steps < steps[i]) & (g_steps >= steps[i] - 20)
    if window.any() and not np.isnan(g[window]).all():
        peak = measure(GRAD_NORM_TOTAL, g_steps[window], g[window], "max")
        before = g_steps < steps[i]
        typical = measure(GRAD_NORM_TOTAL, g_steps[before], g[before], "median")
        evidence.append(Evidence(f"gradient norm max {fmt(peak.value)} over {peak.where} (the 20 steps before), "
                                 f"median {fmt(typical.value)} over {typical.where}", Level(peak), Level(typical), refs=(20,)))
    for event in view.events("nonfinite")[:1]:
        if event.data.get("params"):
            names = tuple(str(n) for n in event.data["params"][:5])
            evidence.append(Evidence(f"first non-finite gradient norms (step {event.step}) in {', '.join(quoted(n) for n in names)}",
                                     Fact("event", "nonfinite", (event.step, names))))
    return evidence


def nonfinite_loss(view: RunView) -> Finding | None:
    """The loss became NaN or Inf."""
    steps, values = view.loss
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    evidence = _nonfinite_evidence(view, steps, values, i)
    before = before_nonfinite(view, i)
    if before is not None:
        evidence.insert(1, before.evidence)
    if before is not None and not before.grew:
        offer = view.can_run_jobs and not nan_hunt_counts(view.job_result("nan_hunt"))  # not on a foreign log, nor twice
        hunt = ("run the NaN hunt to name the operation",) if offer else ()
        fix = fix_text("guard the operation that made it, in the loss or the model: clamp the inputs of log, division and sqrt "
                       "(e.g. torch.log(x.clamp_min(1e-7)), x / (d + 1e-8))", f"check the batch of step {steps[i]} for non-finite inputs",
                       *hunt)
    elif steps[i] < 100:
        fix = fix_text(scaled(LR_DOWN, "reduce", view.lr_now, 0.1), (WARMUP_UP, "add warmup"),
                       "check weight init (the loss went non-finite within the first 100 steps)")
    else:
        fix = fix_text((CLIP_TIGHTER, "add torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"), plain(LR_DOWN, "reduce"),
                       "if gradients were normal before the NaN, clamp log/div inputs in the loss "
                       "(e.g. torch.log(x.clamp_min(1e-7)))")
    finding = Finding("nonfinite_loss", "Loss became NaN/Inf", 0.9, "critical", evidence, fix, int(steps[i]))
    finding.tags = {"abrupt"} if before is not None and not before.grew else set()
    return finding


def _spikes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Indices of isolated upward spikes of the log loss that recover, their z-scores, and the noise level."""
    logs = np.log(values)
    residual = logs - local_baseline(logs, SPIKE_WINDOW)
    sigma = robust_sigma(residual)
    if sigma == 0:
        return np.empty(0, np.int64), np.empty(0), 0.0
    z = residual / sigma
    spikes = np.flatnonzero((z > SPIKE_Z) & (residual > np.log(2.0)))
    spikes = spikes[spikes + 13 < len(values)]
    if not len(spikes):
        return spikes, z[spikes], sigma
    after = np.lib.stride_tricks.sliding_window_view(residual, 10)[spikes + 3]
    back = np.median(after, axis=1) < 2 * sigma
    # a spike stands above the level just before it, and the loss comes back to that level: a step up
    # that stays is a shift, not a spike (the chunked baseline alone mixes the two levels)
    level_after = np.median(np.lib.stride_tricks.sliding_window_view(logs, 10)[spikes + 3], axis=1)
    level_before = np.array([np.median(logs[max(0, i - 10):i]) if i else logs[0] for i in spikes])
    above = logs[spikes] - level_before > np.log(2.0)
    recovered = spikes[back & above & (level_after - level_before < 2 * sigma)]
    return recovered, z[recovered], sigma


def _chunk(n: int, i: int) -> slice:
    """The chunk of :func:`local_baseline` that holds index ``i`` of a series of ``n`` values."""
    size = max(1, min(SPIKE_WINDOW, n))
    whole = (n // size) * size
    start = (i // size) * size if i < whole else whole
    return slice(start, min(start + size, n) if i < whole else n)


def loss_spikes(view: RunView) -> Finding | None:
    """Isolated loss spikes that recover: atypical batches."""
    steps, values = after_quiet(view, *view.loss)
    steps, values = steps[-SPIKE_HORIZON:], values[-SPIKE_HORIZON:]
    if len(values) < 60 or not np.isfinite(values).all() or (values <= 0).any():
        return None
    found, _, _ = _spikes(values)
    if not len(found):
        return None
    claims, shown = [], []
    for i in found.tolist():
        chunk = _chunk(len(values), i)
        spike, around = at_step(LOSS, steps, values, i), measure(LOSS, steps[chunk], values[chunk], "median")
        claims.append(Compare(spike, around, "above"))
        if len(shown) < 5:
            shown.append(f"step {steps[i]} ({fmt(spike.value)}, {fmt(spike.value / around.value)}x the median of {around.where})")
    noise = measure(LOSS, steps, values, "typical_change")
    evidence = [Evidence(f"{len(found)} spike(s) that recovered: {', '.join(shown)}", *claims),
                Evidence(f"typical step-to-step change {noise.value:.1%} over {noise.where}", Level(noise))]
    gaps = np.diff(steps[found])
    if len(gaps) >= 2 and np.ptp(gaps) <= 0.1 * np.median(gaps):
        every = int(np.median(gaps))
        evidence.append(Evidence(f"spikes recur every {every} steps: a periodic bad batch or shard",
                                 Periodic(tuple(int(s) for s in steps[found]), every)))
    conf = min(0.9, 0.7 + 0.05 * len(found))
    fix = fix_text("inspect the batches at those steps (corrupt or mislabeled samples)", (CLIP_TIGHTER, "clip gradients"),
                   "consider a robust loss (Huber)")
    return Finding("loss_spikes", "Loss spikes that recover (atypical batches)", conf, "warning", evidence, fix, int(steps[found[0]]))


def loss_spikes_explained(spikes: Finding, cause: Finding) -> Finding:
    """``spikes`` anew as a symptom of ``cause`` (an LR too high throws the weights, and the loss, for a step or
    two): its title no longer blames atypical batches, and its fix sends to the cause first, the batches only if
    spikes remain once it is fixed. The cause is named by the heading above, not in the words: a title such as
    "gradient clipping on most steps" would read as advice."""
    fix = fix_text("they follow from the cause they are listed under: fix that first", (CLIP_TIGHTER, "clip gradients"),
                   "if spikes remain after that, inspect the batches at those steps (corrupt or mislabeled samples)")
    return spikes.changed(title="Loss spikes that recover", fix=fix, moves=fix.moves)


RULES = [nonfinite_loss, loss_spikes]
