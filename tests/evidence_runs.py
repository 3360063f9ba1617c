"""A seeded matrix of synthetic runs for the evidence checks: every length, every loss shape, every planted fault.

Each run has a loss of one shape (flat, falling, rising, spike, NaN at the end,
oscillating, noisy) and one of the planted conditions below on the other series (LR,
gradient norms, update ratios, activations, validation, inputs, timings, the manifest).
Lengths 1 to 1000 steps; the long runs cycle through every condition, so each rule
gets its chance to fire. A few multi-rank runs cover the rank rules. Written in the
real format (``ShardWriter`` and the manifest helpers), deterministic, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from synthetic_runs import LAYERS, Series, model_summary, write_run
from rank_runs import write_ranks
from silent_plants import broadcast_mse, chance_loss, not_zeroed, probabilities_to_ce, sorted_by_class
from tuidiag.recorder.writer import EventRow

LENGTHS = (1, 2, 3, 5, 10, 11, 20, 100, 1000)
SHAPES = ("flat", "falling", "rising", "spike", "nan_end", "oscillating", "noisy")
Extra = dict[str, Any]


def loss_shape(kind: str, n: int, rng: np.random.Generator, level: float = 1.4) -> np.ndarray:
    """A loss of ``n`` steps with the given shape."""
    t = np.arange(n) / max(n - 1, 1)
    falling = level * (0.15 + 0.85 * np.exp(-4 * t))
    if kind == "flat":
        return np.full(n, level)
    if kind == "falling":
        return falling
    if kind == "rising":
        return level * (1 + 3 * t)
    if kind == "spike":
        out = falling * (1 + 0.01 * rng.standard_normal(n))
        out[[i for i in (n // 2, (3 * n) // 4) if i < n]] *= 9
        return out
    if kind == "nan_end":
        out = falling.copy()
        out[max(0, n - max(1, n // 10)) :] = np.nan
        return out
    if kind == "oscillating":
        return level * (1 + 0.5 * np.sin(np.arange(n) * 1.3))
    return np.abs(level * (1 + 0.3 * rng.standard_normal(n))) + 0.01


def base_series(n: int, loss: np.ndarray, rng: np.random.Generator) -> Series:
    """Every series the rules read, healthy apart from the given loss."""
    t, every = np.arange(n), np.arange(0, n, max(1, n // 20))
    norms = [np.abs(0.4 + 0.05 * rng.standard_normal(n)) for _ in LAYERS]
    val = np.interp(every, t, np.nan_to_num(loss, nan=float(np.nanmax(loss)) if np.isfinite(loss).any() else 1.0)) + 0.05
    out: Series = {
        "train/loss": (t, loss), "lr/group0": (t, np.full(n, 1e-3)), "model/training": (t, np.ones(n)),
        "val/loss": (every, val), "val/acc": (every, 0.5 + 0.4 * every / max(n, 1)),
        "grad/none_count": (t, np.zeros(n)), "time/step": (t, np.full(n, 0.01)), "time/data_wait": (t, np.full(n, 3e-4)),
        "input/mean": (t, 0.01 * rng.standard_normal(n)), "input/std": (t, np.ones(n)), "input/abs_max": (t, np.full(n, 4.0)),
        "input/nonfinite": (t, np.zeros(n)), "target/majority_share": (t, np.full(n, 0.3)),
        "act/dead_frac/relu": (every, np.full(len(every), 0.05)), "grad_norm/total": (t, np.sqrt(sum(v**2 for v in norms))),
    }
    out.update({f"grad_norm/{name}": (t, v) for name, v in zip(LAYERS, norms)})
    out.update({f"update_ratio/{name}": (every, np.full(len(every), 1e-3)) for name in LAYERS})
    return out


def _set(s: Series, name: str, values: Any) -> None:
    steps = s[name][0] if name in s else s["train/loss"][0]
    s[name] = (steps, np.broadcast_to(np.asarray(values, float), steps.shape).copy())


def _frac(s: Series, name: str) -> np.ndarray:
    steps = s[name][0] if name in s else s["train/loss"][0]
    return steps / max(int(s["train/loss"][0][-1]), 1)


def lr_high(s: Series, n: int, e: Extra) -> None:
    for name in LAYERS:
        _set(s, f"update_ratio/{name}", 3e-2)
    _set(s, "train/loss", s["train/loss"][1] * (1 + 2 * _frac(s, "train/loss") ** 2))


def lr_low(s: Series, n: int, e: Extra) -> None:
    for name in LAYERS:
        _set(s, f"update_ratio/{name}", 1e-7)
    _set(s, "train/loss", 1.386 + 0.0015 * _frac(s, "train/loss"))


def lr_decay(s: Series, n: int, e: Extra) -> None:
    t = s["train/loss"][0]
    _set(s, "lr/group0", 1e-2 * 0.9 ** t)
    _set(s, "train/loss", np.where(t < n // 5, 1.4 - 0.6 * t / max(n // 5, 1), 0.8))
    v = s["val/loss"][0]
    _set(s, "val/loss", np.where(v < n // 5, 1.4 - 0.6 * v / max(n // 5, 1), 0.85))
    for name in LAYERS:
        _set(s, f"update_ratio/{name}", np.where(s[f"update_ratio/{name}"][0] < n // 5, 1e-3, 1e-12))


def lr_cycles(s: Series, n: int, e: Extra) -> None:
    """A cosine schedule whose period is an eighth of the run: to zero and back four times."""
    t = s["train/loss"][0]
    _set(s, "lr/group0", 1e-3 * (1 + np.cos(np.pi * t / max(n / 8, 1))) / 2)


def explode(s: Series, n: int, e: Extra) -> None:
    growth = np.exp(30 * np.clip(_frac(s, "grad_norm/total") - 0.5, 0, None))
    for name in ("total", *LAYERS):
        _set(s, f"grad_norm/{name}", s[f"grad_norm/{name}"][1] * growth)


def explode_start(s: Series, n: int, e: Extra) -> None:
    for name in ("total", *LAYERS):
        _set(s, f"grad_norm/{name}", 3e3 * (1 + 0.1 * np.sin(s["train/loss"][0])))


def grad_jumps(s: Series, n: int, e: Extra) -> None:
    g = s["grad_norm/total"][1].copy()
    g[[i for i in (n // 3, (2 * n) // 3) if i < n]] = 5e3
    if n > 4:
        g[n // 2] = np.inf
    _set(s, "grad_norm/total", g)


def vanish(s: Series, n: int, e: Extra) -> None:
    _set(s, "grad_norm/layer0.weight", 1e-7)
    _set(s, "grad_norm/layer1.weight", 1e-4)


def dead_layer(s: Series, n: int, e: Extra) -> None:
    _set(s, "grad/none_count", 2.0)
    _set(s, "grad_norm/layer2.weight", 0.0)
    data = {"params": ["extra.weight", "extra.bias"]}
    e["events"] = [EventRow(0, 0.0, "no_grad", "warning", "2 parameters got no gradient", data)]


def dead_relu(s: Series, n: int, e: Extra) -> None:
    _set(s, "act/dead_frac/relu", 0.97)
    _set(s, "grad_norm/layer0.weight", 0.0)


def clipping(s: Series, n: int, e: Extra) -> None:
    _set(s, "grad/clipped", np.ones(n))
    if n % 2:
        e["max_grad_norm"] = 1e-3
    else:
        _set(s, "grad/max_norm", 0.05)


def overfit(s: Series, n: int, e: Extra) -> None:
    t, v = s["train/loss"][0], s["val/loss"][0].astype(float)
    _set(s, "train/loss", 1.2 * np.exp(-t / max(n / 10, 1)) + 0.001)
    _set(s, "val/loss", 0.6 + 8 * (v / max(n, 1) - 0.25) ** 2)


def underfit(s: Series, n: int, e: Extra) -> None:
    t = s["train/loss"][0]
    _set(s, "train/loss", np.where(t < n // 6, 1.39 - 0.3 * t / max(n // 6, 1), 1.09))
    _set(s, "val/loss", 1.1)


def lr_conflict(s: Series, n: int, e: Extra) -> None:
    """Every ReLU dead at LR 5 (100x too high), both losses flat and high: one finding would lower the LR, another raise it."""
    underfit(s, n, e)
    _set(s, "act/dead_frac/relu", 1.0)
    _set(s, "lr/group0", 5.0)
    e["config"] = {"lr": 5.0, "batch_size": 64}


def frozen_val(s: Series, n: int, e: Extra) -> None:
    _set(s, "val/loss", 1.39)
    _set(s, "val/acc", 0.25)


def saturation(s: Series, n: int, e: Extra) -> None:
    _set(s, "act/saturated_frac/tanh", 0.6)


def bad_input(s: Series, n: int, e: Extra) -> None:
    _set(s, "input/std", 1000.0)
    _set(s, "input/abs_max", 5000.0)
    bad = np.zeros(n)
    bad[[i for i in (n // 4, n // 2) if i < n]] = 3
    _set(s, "input/nonfinite", bad)


def imbalance(s: Series, n: int, e: Extra) -> None:
    _set(s, "target/majority_share", 0.96)


def eval_mode(s: Series, n: int, e: Extra) -> None:
    _set(s, "model/training", np.where(s["train/loss"][0] == 0, 1.0, 0.0))
    e["model"] = model_summary(has_dropout=bool(n % 2))


def slow_loader(s: Series, n: int, e: Extra) -> None:
    _set(s, "time/data_wait", 0.008)
    _set(s, "sys/gpu_util", 30.0)


def low_gpu(s: Series, n: int, e: Extra) -> None:
    _set(s, "sys/gpu_util", 12.0)


def review(s: Series, n: int, e: Extra) -> None:
    e["model"] = model_summary(n_trainable=50_000_000, weight_layers=14, activations=["Sigmoid"])
    _set(s, "val/acc", 0.4)
    _set(s, "train/loss", 2.0 * np.exp(-s["train/loss"][0] / max(n / 5, 1)) + 0.01)


def rejected(s: Series, n: int, e: Extra) -> None:
    """The recorder refused a value at the middle step: counted in recorder/rejected_values from there on."""
    _set(s, "recorder/rejected_values", np.where(np.arange(n) >= n // 2, 1.0, 0.0))
    data = {"where": "log", "key": "emb's norms", "reason": "complex values cannot be stored (2 dims)"}
    e["events"] = [EventRow(n // 2, 0.0, "rejected_value", "error", "emb's norms rejected", data)]


def healthy(s: Series, n: int, e: Extra) -> None:
    pass


PLANTS: dict[str, Callable[[Series, int, Extra], None]] = {
    f.__name__: f for f in (healthy, lr_high, lr_low, lr_decay, lr_cycles, explode, explode_start, grad_jumps, vanish, dead_layer, dead_relu,
                            clipping, overfit, underfit, lr_conflict, broadcast_mse, not_zeroed, probabilities_to_ce, chance_loss,
                            sorted_by_class, frozen_val, saturation, bad_input, imbalance, eval_mode, slow_loader, low_gpu,
                            review, rejected)
}


@dataclass(frozen=True)
class Case:
    """One generated run: its length, loss shape and planted condition."""

    n: int
    shape: str
    plant: str

    @property
    def name(self) -> str:
        return f"{self.plant}-{self.shape}-{self.n}"


ADDED_PLANTS = ("lr_cycles",)
"""Plants added after the matrix was laid out, left out of its cycle: one more plant there would move every other plant to
other lengths and shapes. They run in :data:`ADDED_CASES`."""
ADDED_CASES = (Case(1000, "falling", "lr_cycles"), Case(100, "noisy", "lr_cycles"), Case(20, "flat", "lr_cycles"),
               Case(3, "nan_end", "grad_jumps"))
"""Cases at chosen lengths: the added plants, and cases a reshuffle of the cycle found untrue (a gradient norm of 5,000 at
the start of a 3-step run was called 'not out of range')."""


def cases() -> list[Case]:
    """The matrix: every length x every shape, two planted conditions each, cycling so each length sees them all in turn,
    and :data:`ADDED_CASES`."""
    plants = [plant for plant in PLANTS if plant not in ADDED_PLANTS]
    out = []
    for i, n in enumerate(LENGTHS):
        for j, shape in enumerate(SHAPES):
            for k in range(2):
                out.append(Case(n, shape, plants[(i * 14 + j * 2 + k) % len(plants)]))
    return out + list(ADDED_CASES)


def write_case(root: Path, case: Case) -> Path:
    """Write ``case`` as a finished run under ``root``."""
    rng = np.random.default_rng([case.n, SHAPES.index(case.shape), list(PLANTS).index(case.plant)])
    series = base_series(case.n, loss_shape(case.shape, case.n, rng), rng)
    extra: Extra = {"model": model_summary()}
    PLANTS[case.plant](series, case.n, extra)
    return write_run(root / case.name, series, model=extra.pop("model"), events=extra.pop("events", None),
                     config=extra.pop("config", None), **extra)


RANK_CASES = ("nonfinite", "desync", "straggler_step", "straggler_data")
RANK_LENGTHS = (3, 20, 100)


def write_rank_case(root: Path, kind: str, n: int) -> Path:
    """A 3-rank run of ``n`` steps with one rank fault."""
    t = np.arange(n)
    ranks = {}
    for r in range(3):
        loss = 1.4 * np.exp(-t / max(n / 3, 1)) + 0.1
        grad = np.full(n, 0.5)
        weight = np.full(n, 10.0) + 0.001 * t
        step, wait = np.full(n, 0.010 + 0.0001 * r), np.full(n, 0.001)
        inputs = np.zeros(n)
        lr = np.full(n, 1e-3)
        if kind == "nonfinite" and r == 1:
            loss[n // 2 :] = np.nan
            inputs[n // 2] = 5
        if kind == "nonfinite" and r == 2:
            grad[(3 * n) // 4 :] = np.inf
        if kind == "desync" and r == 2:
            weight = weight * (1 + 0.01 * t / max(n, 1))
            lr = np.full(n, 5e-3)
        if kind == "straggler_step" and r == 0:
            step = np.full(n, 0.045)
        if kind == "straggler_data" and r == 1:
            wait = np.full(n, 0.030)
            step = np.full(n, 0.035)
        ranks[r] = {"train/loss": (t, loss), "grad_norm/total": (t, grad), "weight_norm/fc.weight": (t, weight),
                    "time/step": (t, step), "time/data_wait": (t, wait), "input/nonfinite": (t, inputs), "lr/group0": (t, lr)}
    return write_ranks(root / f"ranks-{kind}-{n}", ranks)
