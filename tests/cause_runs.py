"""Synthetic runs that plant one diagnosis code's signature from a chosen step, to compose a cause with its symptom.

Each plant writes the signature of one code into the series of a healthy run
(``evidence_runs.base_series``), starting at step ``at``; planting a cause and then its
symptom (a later ``at``) gives a run in which both fire in the order a real fault
would show them. A symptom planted alone is the near-miss: the cause is absent and
nothing may claim the symptom. Multi-rank plants (``rank_nonfinite_first``,
``rank_desync``, ``straggler_rank``) write three ranks. Written in the real format,
deterministic, no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from synthetic_runs import LAYERS, Series, model_summary, write_run
from evidence_runs import base_series, loss_shape
from rank_runs import write_ranks
import silent_plants
from tuidiag.recorder.writer import EventRow

N = 400
"""Steps of every run (long enough for every rule, short enough to write in milliseconds)."""
Extra = dict[str, Any]
Plant = Callable[[Series, Extra, int], None]
RANKS = 3


def _set(s: Series, name: str, values: Any, every: np.ndarray | None = None) -> None:
    steps = every if every is not None else s[name][0] if name in s else s["train/loss"][0]
    s[name] = (steps, np.broadcast_to(np.asarray(values, float), steps.shape).copy())


def _steps(s: Series, name: str) -> np.ndarray:
    return s[name][0] if name in s else s["train/loss"][0]


def _from(s: Series, name: str, at: int, after: Any, before: Any = None) -> None:
    """``name`` holds ``after`` from step ``at`` on (its healthy values, or ``before``, until then)."""
    steps = _steps(s, name)
    old = s[name][1] if name in s and before is None else np.broadcast_to(np.asarray(before if before is not None else 0.0, float),
                                                                          steps.shape)
    new = np.broadcast_to(np.asarray(after, float), steps.shape)
    s[name] = (steps, np.where(steps >= at, new, old).astype(float))


def nonfinite_loss(s: Series, e: Extra, at: int) -> None:
    """The loss is NaN from ``at`` on, out of a calm run (a numerical fault when nothing grew first)."""
    _from(s, "train/loss", at, np.nan)


def diverged_to_nan(s: Series, e: Extra, at: int) -> None:
    """The loss and the gradient norm run away over the 10 steps before ``at`` (10x), and the loss is NaN from ``at`` on."""
    steps = _steps(s, "train/loss")
    runup = np.where((steps >= at - 10) & (steps < at), 10.0 ** ((steps - at + 11) / 10), 1.0)
    for name in ("train/loss", "grad_norm/total"):
        _set(s, name, s[name][1] * runup)
    _from(s, "train/loss", at, np.nan)


def loss_spikes(s: Series, e: Extra, at: int) -> None:
    """Four isolated 9x spikes of the loss from ``at``, each recovering at once."""
    loss = s["train/loss"][1].copy()
    for i in range(at + 3, N - 20, 61)[:4]:
        loss[i] *= 9
    _set(s, "train/loss", loss)


def exploding_gradients(s: Series, e: Extra, at: int) -> None:
    """Every gradient norm grows exponentially from ``at`` (1000x within 80 steps)."""
    for name in ("total", *LAYERS):
        steps, values = s[f"grad_norm/{name}"]
        s[f"grad_norm/{name}"] = (steps, values * np.exp(np.clip(steps - at, 0, None) * np.log(1e3) / 80))


def exploding_from_start(s: Series, e: Extra, at: int) -> None:
    """Gradient norms far above the healthy range from the first step (a bad init)."""
    for name in ("total", *LAYERS):
        _set(s, f"grad_norm/{name}", 3e3 * (1 + 0.1 * np.sin(_steps(s, "train/loss"))))


def grad_jumps(s: Series, e: Extra, at: int) -> None:
    """Single-step gradient jumps at the loss spikes' steps from ``at`` (isolated: the norm is calm in between)."""
    g = s["grad_norm/total"][1].copy()
    for i in range(at + 3, N - 20, 61)[:4]:
        g[i] = 5e3
    _set(s, "grad_norm/total", g)


def lr_too_high(s: Series, e: Extra, at: int) -> None:
    """Update/weight ratios of 3e-2 from ``at`` (30x healthy), and the loss climbing from there (20x by the end)."""
    for name in LAYERS:
        _from(s, f"update_ratio/{name}", at, 3e-2)
    steps, loss = s["train/loss"]
    rise = np.clip((steps - at) / max(N - at, 1), 0, None)
    _set(s, "train/loss", loss * np.exp(3 * rise))


def lr_too_high_flat(s: Series, e: Extra, at: int) -> None:
    """Update/weight ratios of 3e-2 from ``at`` while the loss makes no real progress (it oscillates around a plateau)."""
    for name in LAYERS:
        _from(s, f"update_ratio/{name}", at, 3e-2)


def dead_relu(s: Series, e: Extra, at: int) -> None:
    """97% of the ReLU units dead from the first activation sample at or after ``at``."""
    _from(s, "act/dead_frac/relu", at, 0.97)


def dead_relu_most(s: Series, e: Extra, at: int) -> None:
    """70% of the ReLU units dead from ``at`` (most, not all: some layers still pass gradient)."""
    _from(s, "act/dead_frac/relu", at, 0.7)


def activation_saturation(s: Series, e: Extra, at: int) -> None:
    """60% of the tanh units saturated from ``at``."""
    _set(s, "act/saturated_frac/tanh", 0.05, _steps(s, "act/dead_frac/relu"))
    _from(s, "act/saturated_frac/tanh", at, 0.6)


def vanishing_gradients(s: Series, e: Extra, at: int) -> None:
    """The first layers' gradient norms fall 3-6 orders below the last layer's from ``at``."""
    _from(s, "grad_norm/layer0.weight", at, 1e-7)
    _from(s, "grad_norm/layer1.weight", at, 1e-4)


def dead_layer(s: Series, e: Extra, at: int) -> None:
    """Two parameters get no gradient (None) from ``at``, and a third exactly zero."""
    _from(s, "grad/none_count", at, 2.0)
    _from(s, "grad_norm/layer2.weight", at, 0.0)
    e.setdefault("events", []).append(EventRow(at, 0.0, "no_grad", "warning", "2 parameters got no gradient",
                                               {"params": ["extra.weight", "extra.bias"]}))


def over_clipping(s: Series, e: Extra, at: int) -> None:
    """Clipping active on every step from ``at``, at a max_norm of 1e-3."""
    _from(s, "grad/clipped", at, 1.0, 0.0)
    e["max_grad_norm"] = 1e-3


def underfitting(s: Series, e: Extra, at: int) -> None:
    """Both losses plateau at 78% of the start from ``at`` (the training loss fell 22% until then)."""
    steps = _steps(s, "train/loss")
    _set(s, "train/loss", np.where(steps < at, 1.39 - 0.3 * steps / max(at, 1), 1.09))
    v = _steps(s, "val/loss")
    _set(s, "val/loss", np.where(v < at, 1.4 - 0.3 * v / max(at, 1), 1.1))


def lr_too_low(s: Series, e: Extra, at: int) -> None:
    """Update/weight ratios of 1e-7 from the start, the loss barely moving."""
    for name in LAYERS:
        _set(s, f"update_ratio/{name}", 1e-7)
    _set(s, "train/loss", 1.386 + 0.0015 * _steps(s, "train/loss") / N)
    _set(s, "val/loss", 1.39)


def lr_decayed_too_early(s: Series, e: Extra, at: int) -> None:
    """The LR falls 10x every 30 steps from ``at`` (a schedule stepped per batch); updates and the loss stop with it."""
    steps = _steps(s, "train/loss")
    _set(s, "lr/group0", 1e-2 * 0.1 ** (np.clip(steps - at, 0, None) // 30))
    loss = s["train/loss"][1]
    stop = int(np.searchsorted(steps, at + 60))
    _set(s, "train/loss", np.where(steps < at + 60, loss, loss[stop]))
    v = _steps(s, "val/loss")
    _set(s, "val/loss", np.where(v < at + 60, s["val/loss"][1], loss[stop] + 0.05))
    for name in LAYERS:
        u = _steps(s, f"update_ratio/{name}")
        _set(s, f"update_ratio/{name}", np.where(u < at + 60, 1e-3, 1e-3 * 0.1 ** (np.clip(u - at, 0, None) // 30)))


def frozen_val_metric(s: Series, e: Extra, at: int) -> None:
    """The validation metrics repeat exactly from ``at`` while training goes on."""
    _from(s, "val/loss", at, 0.9)
    _from(s, "val/acc", at, 0.61)


def bad_input_data(s: Series, e: Extra, at: int) -> None:
    """Inputs 1000x off their scale from the start (severe), and NaN values in two batches from ``at``."""
    _set(s, "input/std", 1000.0)
    _set(s, "input/abs_max", 5000.0)
    _from(s, "input/nonfinite", at, 0.0)
    bad = s["input/nonfinite"][1]
    bad[[at, at + 40]] = 3
    _set(s, "input/nonfinite", bad)


def train_mode_bug(s: Series, e: Extra, at: int) -> None:
    """The model is in eval mode from the second step on; it has dropout."""
    _set(s, "model/training", np.where(_steps(s, "model/training") == 0, 1.0, 0.0))
    e["model"] = model_summary(has_dropout=True)


def data_loading_bottleneck(s: Series, e: Extra, at: int) -> None:
    """Each step waits 8 of its 10 ms for data from ``at``."""
    _from(s, "time/data_wait", at, 0.008)


# ---- the silent bugs (a wrong training loop), from the whole-run plants of ``silent_plants`` ------------------------


def _spliced(silent: Callable[[Series, int, Extra], None], s: Series, e: Extra, at: int) -> None:
    """``silent``'s whole-run plant, kept from step ``at`` on: the healthy values before it, a probe's new series from it."""
    planted = {name: (steps, values.copy()) for name, (steps, values) in s.items()}
    silent(planted, N, e)
    for name, (steps, values) in planted.items():
        if name in s and np.array_equal(s[name][0], steps):
            s[name] = (steps, np.where(steps >= at, values, s[name][1]))
        else:
            keep = steps >= at
            s[name] = (steps[keep], values[keep])


def grad_not_zeroed(s: Series, e: Extra, at: int) -> None:
    """zero_grad missing from ``at``: the gradient norms climb (21x over the run) and the probe finds left-over gradients."""
    _spliced(silent_plants.not_zeroed, s, e, at)


def double_softmax(s: Series, e: Extra, at: int) -> None:
    """A final softmax before CrossEntropyLoss from ``at``: the loss's input rows are distributions, the loss stuck above its floor."""
    _spliced(silent_plants.probabilities_to_ce, s, e, at)


def loss_shape_mismatch(s: Series, e: Extra, at: int) -> None:
    """MSELoss of a (64, 1) output against (64,) targets from ``at``."""
    _spliced(silent_plants.broadcast_mse, s, e, at)


def labels_misaligned(s: Series, e: Extra, at: int) -> None:
    """Targets shuffled apart from their inputs from ``at``: the training loss at log(4), the validation loss just above it."""
    _spliced(silent_plants.chance_loss, s, e, at)
    v = _steps(s, "val/loss")
    _from(s, "val/loss", at, np.log(silent_plants.CLASSES) * (1.03 - 0.02 * v / N))


def unshuffled_data(s: Series, e: Extra, at: int) -> None:
    """Batches in class order from ``at``: one class per batch, changing every 33 steps, the loss jumping at each change."""
    _spliced(silent_plants.sorted_by_class, s, e, at)


def class_imbalance(s: Series, e: Extra, at: int) -> None:
    """Class 0 leads every batch (96% of it) from ``at``."""
    _spliced(silent_plants.imbalanced_shuffled, s, e, at)


def overfitting(s: Series, e: Extra, at: int) -> None:
    """From ``at`` the training loss keeps falling (15% lower by the end) while the validation loss climbs 60% from its level at ``at``."""
    steps, loss = s["train/loss"]
    _set(s, "train/loss", loss * (1 - 0.15 * np.clip((steps - at) / max(N - at, 1), 0, None)))
    v, val = s["val/loss"]
    level = val[max(int(np.searchsorted(v, at, side="right")) - 1, 0)]
    _set(s, "val/loss", np.where(v < at, val, level * (1 + 0.6 * (v - at) / max(N - at, 1))))


def all_frozen(s: Series, e: Extra, at: int) -> None:
    """Every parameter frozen from the start (``at`` is ignored): no trainable parameter, so no gradient or update is watched."""
    params = [{**p, "trainable": False} for p in model_summary()["params"]]
    e["model"] = model_summary(params=params, n_trainable=0)
    for name in [n for n in s if n.startswith(("grad_norm/", "update_ratio/"))]:
        del s[name]


def never_updated(s: Series, e: Extra, at: int) -> None:
    """The optimizer holds other tensors from the start (``at`` is ignored): every update/weight ratio is exactly 0."""
    for name in [n for n in s if n.startswith("update_ratio/")]:
        _set(s, name, 0.0)


def healthy(s: Series, e: Extra, at: int) -> None:
    """Nothing planted."""


PLANTS: dict[str, Plant] = {f.__name__: f for f in (
    nonfinite_loss, diverged_to_nan, loss_spikes, exploding_gradients, exploding_from_start, grad_jumps, lr_too_high, lr_too_high_flat, dead_relu,
    dead_relu_most, activation_saturation, vanishing_gradients, dead_layer, over_clipping, underfitting, lr_too_low,
    lr_decayed_too_early, frozen_val_metric, bad_input_data, train_mode_bug, data_loading_bottleneck, grad_not_zeroed, double_softmax,
    loss_shape_mismatch, labels_misaligned, unshuffled_data, class_imbalance, overfitting, all_frozen, never_updated, healthy)}


def write(root: Path, name: str, plants: list[tuple[str, int]], loss: str = "falling") -> Path:
    """A single-rank run of ``N`` steps with ``plants`` ((plant, step) pairs) applied in order; ``all_frozen``
    last whatever its step (a frozen model has no gradient to plant anything in)."""
    rng = np.random.default_rng(len(name))
    series = base_series(N, loss_shape(loss, N, rng), rng)
    series["grad/clipped"] = (series["train/loss"][0], np.zeros(N))
    extra: Extra = {"model": model_summary()}
    for plant, at in sorted(plants, key=lambda p: p[0] == "all_frozen"):
        PLANTS[plant](series, extra, at)
    return write_run(root / name, series, model=extra.pop("model"), events=extra.pop("events", None), **extra)


# ---- three ranks ----------------------------------------------------------------------------------------------


RankSeries = dict[int, Series]


def _rank_base(rng: np.random.Generator) -> RankSeries:
    out = {}
    for r in range(RANKS):
        s = base_series(N, loss_shape("falling", N, rng), rng)
        t = s["train/loss"][0]
        s["weight_norm/layer0.weight"] = (t, np.full(N, 10.0) + 0.001 * t)
        s["time/step"] = (t, np.full(N, 0.010 + 0.0001 * r))
        s["time/data_wait"] = (t, np.full(N, 0.001))
        out[r] = s
    return out


def rank_nonfinite_first(ranks: RankSeries, at: int) -> None:
    """Rank 1's batch holds NaN inputs at ``at``: its loss is NaN from there; the others' gradient norms a step later."""
    s = ranks[1]
    _from(s, "train/loss", at, np.nan)
    bad = s["input/nonfinite"][1].copy()
    bad[at] = 5
    _set(s, "input/nonfinite", bad)
    for r in (0, 2):
        _from(ranks[r], "grad_norm/total", at + 1, np.inf)


def rank_desync(ranks: RankSeries, at: int) -> None:
    """Rank 2's weights drift away from the others' from ``at`` (its LR differs)."""
    s = ranks[2]
    steps, w = s["weight_norm/layer0.weight"]
    s["weight_norm/layer0.weight"] = (steps, w * (1 + 0.05 * np.clip(steps - at, 0, None) / N))
    _set(s, "lr/group0", 5e-3)


def straggler_rank(ranks: RankSeries, at: int) -> None:
    """Rank 0 waits 30 ms per step for data from ``at``; every rank's step takes 35 ms (the all-reduce waits for it)."""
    for r, s in ranks.items():
        _from(s, "time/step", at, 0.035)
    _from(ranks[0], "time/data_wait", at, 0.030)


RANK_PLANTS: dict[str, Callable[[RankSeries, int], None]] = {f.__name__: f for f in (rank_nonfinite_first, rank_desync, straggler_rank)}


def write_three(root: Path, name: str, rank_plants: list[tuple[str, int]], plants: list[tuple[str, int]]) -> Path:
    """A three-rank run: ``rank_plants`` across the ranks, then ``plants`` on rank 0 (the rank the single-rank rules read)."""
    rng = np.random.default_rng(len(name))
    ranks = _rank_base(rng)
    extra: Extra = {}
    for plant, at in plants:
        PLANTS[plant](ranks[0], extra, at)
    for plant, at in rank_plants:
        RANK_PLANTS[plant](ranks, at)
    return write_ranks(root / name, ranks)
