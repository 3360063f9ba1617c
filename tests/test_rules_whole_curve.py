"""Causes before symptoms, judged on the whole curve, and named as soon as the data shows them.

Generated runs (``synthetic_runs``), each class as a small matrix with its near-miss:

- a gradient norm healthy at step 0 and huge after the first update is the steps' doing, not
  the init's (``exploding_gradients`` is not ``from_start``); huge at step 0 is the init's;
- updates far past the overshoot line over a loss that stopped improving are ``lr_too_high``,
  though the loss fell early on; a loss still falling under them, or updates nearer the
  line, are not;
- a train set memorised to ~0 loss with validation 14-23% above its best is an overfitting
  alarm; the same rise over a train loss that is not near 0 stays a note;
- a validation loss repeated exactly over two evaluations, while the weights move, is
  frozen; an accuracy repeated twice is not yet;
- a loss at the chance level that is leaving it is not misaligned labels; one that stays is;
- dead units counted on the first activation sample are named from that sample;
- a loss that doubled over the first updates (before any other sign) is `lr_too_high`; 1.6x is not alone;
- update ratios far below healthy name a low LR as soon as three are measured, before 100 steps;
- a confidence that rounds to 0% reads "<1%".

Every evidence line of each diagnosis is checked against the run (``tests/evidence_checker.py``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from evidence_checker import check_diagnosis  # noqa: E402
from synthetic_runs import LAYERS, healthy_series, write_run  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.diagnosis.rules.generalization import frozen_val_metric, overfitting  # noqa: E402
from tuidiag.diagnosis.rules.gradients import exploding_gradients  # noqa: E402
from tuidiag.diagnosis.rules.lr import STALL_RATIO, lr_too_high  # noqa: E402
from tuidiag.diagnosis.rules.silent_bugs import labels_misaligned  # noqa: E402
from tuidiag.diagnosis.view import RunView  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.text.numbers import confidence  # noqa: E402

N = 300


def _view(path: Path, at: int | None = None) -> RunView:
    return RunView(open_run(path), at)


def _checked(path: Path, at: int | None = None):
    diagnosis = diagnose(open_run(path), at=at)
    check_diagnosis(path, diagnosis, at)
    return diagnosis


@pytest.mark.parametrize("factor", [300.0, 3000.0])
@pytest.mark.parametrize("at_init", [False, True])
def test_huge_gradients_blame_the_init_only_when_huge_before_any_update(tmp_path: Path, factor: float, at_init: bool) -> None:
    series = healthy_series(N)
    t, g = series["grad_norm/total"]
    g = g.copy()
    g[0 if at_init else 1 :] *= factor  # at the init: from step 0; after it: from the first update on
    series["grad_norm/total"] = (t, g)
    run = write_run(tmp_path / "run", series)
    found = exploding_gradients(_view(run))
    assert found is not None
    assert ("from_start" in found.tags) is at_init, found.evidence
    _checked(run)


def _stalled(ratio: float, stall_from: int, still_falling: bool) -> dict:
    """A run whose loss fell to 0.7 by ``stall_from`` and then stayed there (or kept falling), with update ratios ``ratio``."""
    series = healthy_series(N)
    t = np.arange(N)
    rng = np.random.default_rng(1)
    early = 0.7 + 0.7 * np.exp(-t / (stall_from / 4))
    loss = np.where(t < stall_from, early, 0.7) if not still_falling else 1.4 * np.exp(-t / 60) + 0.02
    series["train/loss"] = (t, loss * np.exp(0.05 * rng.standard_normal(N)))
    every25 = np.arange(0, N, 25)
    series.update({f"update_ratio/{name}": (every25, np.full(len(every25), ratio)) for name in LAYERS})
    return series


@pytest.mark.parametrize("ratio", [1.6e-2, 2.5e-2])
@pytest.mark.parametrize("stall_from", [60, 120])
def test_large_updates_over_a_stalled_loss_name_the_lr(tmp_path: Path, ratio: float, stall_from: int) -> None:
    run = write_run(tmp_path / "run", _stalled(ratio, stall_from, still_falling=False))
    diagnosis = _checked(run)
    assert diagnosis.top.code == "lr_too_high", [(f.code, f.evidence) for f in diagnosis.findings]
    assert any("no longer make progress" in line for line in diagnosis.top.evidence)


@pytest.mark.parametrize("ratio, still_falling", [(1.2e-2, False), (2.5e-2, True)])
def test_updates_near_the_line_or_a_loss_still_falling_are_not_overshoot(tmp_path: Path, ratio: float, still_falling: bool) -> None:
    assert ratio < STALL_RATIO or still_falling
    run = write_run(tmp_path / "run", _stalled(ratio, 60, still_falling))
    found = lr_too_high(_view(run))
    assert found is None or not any("no longer make progress" in line for line in found.evidence)
    _checked(run)


@pytest.mark.parametrize("rise", [0.18, 0.28])
@pytest.mark.parametrize("train_end", [1e-3, 0.1])
def test_a_memorised_train_set_makes_a_smaller_validation_rise_an_alarm(tmp_path: Path, rise: float, train_end: float) -> None:
    series = healthy_series(N)
    t = np.arange(N)
    series["train/loss"] = (t, 1.4 * (train_end / 1.4) ** (t / (N - 1)))  # falls geometrically to train_end
    v_steps = np.arange(0, N, 25)
    best = 0.8
    val = np.where(v_steps <= 75, 1.4 - (1.4 - best) * v_steps / 75, best * (1 + rise * (v_steps - 75) / (N - 1 - 75)))
    series["val/loss"] = (v_steps, val)
    run = write_run(tmp_path / "run", series)
    found = overfitting(_view(run))
    assert found is not None
    memorised = train_end / 1.4 < 0.01
    assert found.severity == ("warning" if memorised else "info"), (found.severity, found.evidence)
    assert any("memorised" in line for line in found.evidence) is memorised
    _checked(run)


@pytest.mark.parametrize("name, frozen_after_two", [("val/loss", True), ("val/acc", False)])
def test_a_validation_loss_repeated_twice_is_frozen_an_accuracy_not_yet(tmp_path: Path, name: str, frozen_after_two: bool) -> None:
    series = healthy_series(N)
    every25 = np.arange(0, N, 25)
    for metric in ("val/loss", "val/acc"):
        if metric != name:
            series.pop(metric)
    steps, values = series[name]
    cut = len(steps) - 2
    series[name] = (steps, np.concatenate([values[:cut], np.full(2, values[cut])]))
    series.update({f"update_ratio/{layer}": (every25, np.full(len(every25), 1e-3)) for layer in LAYERS})
    run = write_run(tmp_path / "run", series)
    assert (frozen_val_metric(_view(run)) is not None) is frozen_after_two
    _checked(run)


@pytest.mark.parametrize("fall", [0.0, 0.15])
def test_a_loss_leaving_the_chance_level_is_not_misaligned_labels(tmp_path: Path, fall: float) -> None:
    series = healthy_series(N)
    t = np.arange(N)
    rng = np.random.default_rng(2)
    chance = math.log(4)
    recent = np.clip((t - (N - 80)) / 80, 0, 1)  # flat at chance, then (with ``fall``) falling over the newest 80 steps
    series["train/loss"] = (t, chance * (1 - fall * recent) * np.exp(0.01 * rng.standard_normal(N)))
    every25 = series["val/loss"][0]  # validation follows training: at chance while it is, falling with it (learning)
    series["val/loss"] = (every25, chance * 1.01 * (1 - fall * recent[every25]))
    series["target/min"] = (t, np.zeros(N))
    series["target/max"] = (t, np.full(N, 3.0))
    run = write_run(tmp_path / "run", series)
    found = labels_misaligned(_view(run))
    assert (found is not None) is (fall == 0.0)
    if found is not None:
        assert any("not leaving it" in line for line in found.evidence)
    _checked(run)


@pytest.mark.parametrize("dead", [0.9, 0.05])
def test_dead_units_at_the_first_sample_are_named_from_it(tmp_path: Path, dead: float) -> None:
    series = healthy_series(N)
    series["act/dead_frac/relu"] = (np.arange(0, N, 50), np.full(N // 50, dead))
    run = write_run(tmp_path / "run", series)
    diagnosis = _checked(run, at=10)  # one activation sample so far, the one at step 0
    codes = [f.code for f in diagnosis.findings]
    assert ("dead_relu" in codes) is (dead > 0.5), codes


@pytest.mark.parametrize("share, text", [(0.0, "<1%"), (0.0045, "<1%"), (0.0051, "1%"), (0.42, "42%"), (0.994, "99%"),
                                         (0.996, ">99%"), (1.0, ">99%")])
def test_a_confidence_never_reads_0_or_100_percent(share: float, text: str) -> None:
    assert confidence(share) == text


@pytest.mark.parametrize("rise, named", [(2.5, True), (6.0, True), (1.6, False)])
def test_a_loss_doubled_by_the_first_updates_names_the_lr_alone(tmp_path: Path, rise: float, named: bool) -> None:
    series = healthy_series(18)
    t = np.arange(18)
    series["train/loss"] = (t, np.where(t == 0, 1.4, 1.4 * rise))  # worse from the first update on, nothing else yet
    run = write_run(tmp_path / "run", series)
    found = lr_too_high(_view(run))
    assert (found is not None) is named, None if found is None else found.evidence
    _checked(run)


@pytest.mark.parametrize("ratio, named", [(1e-6, True), (3e-5, True), (1e-3, False)])
def test_tiny_updates_name_a_low_lr_once_measured(tmp_path: Path, ratio: float, named: bool) -> None:
    series = healthy_series(N)
    t = np.arange(N)
    series["train/loss"] = (t, 1.38 - 0.0002 * t + 0.01 * np.random.default_rng(3).standard_normal(N))  # barely moves
    every25 = np.arange(0, N, 25)
    series.update({f"update_ratio/{name}": (every25, np.full(len(every25), ratio)) for name in LAYERS})
    run = write_run(tmp_path / "run", series)
    diagnosis = _checked(run, at=80)  # three ratio samples after the quiet steps, fewer than 100 steps
    assert ("lr_too_low" in [f.code for f in diagnosis.findings]) is named, [f.code for f in diagnosis.findings]


def _schedule(kind: str, n: int) -> np.ndarray:
    """The LR of ``kind`` over ``n`` steps, as torch's schedulers compute it stepped once per step (peak 1e-3)."""
    t = np.arange(n, dtype=float)
    cosine = lambda period: 1e-3 * (1 + np.cos(np.pi * t / period)) / 2  # noqa: E731  (CosineAnnealingLR past T_max)
    warm = np.minimum(1.0, t / (n // 10))
    return {"cosine-T/8": cosine(n / 8), "cosine-T/4": cosine(n / 4), "cosine-T/3": cosine(n / 3), "cosine-T/2": cosine(n / 2),
            "warmup-cosine-T/3": warm * cosine(n / 3),
            "cosine-T": cosine(n), "warmup-cosine-T": warm * 1e-3 * (1 + np.cos(np.pi * np.clip(t - n // 10, 0, None) / (n - n // 10))) / 2,
            "sgdr": 1e-3 * (1 + np.cos(np.pi * (t % (n // 4)) / (n // 4))) / 2, "step": 1e-3 * 0.1 ** (t // (n // 3)),
            "constant": np.full(n, 1e-3),
            "one-cycle": np.where(t < n * 0.3, 4e-5 + (1e-3 - 4e-5) * t / (n * 0.3), 1e-3 * (1 + np.cos(np.pi * (t - n * 0.3) / (n * 0.7))) / 2 + 1e-9)}[kind]


CYCLING = {"cosine-T/8", "cosine-T/4", "cosine-T/3", "cosine-T/2", "warmup-cosine-T/3"}


@pytest.mark.parametrize("n", [200, 600, 3000])
@pytest.mark.parametrize("kind", ["cosine-T/8", "cosine-T/4", "cosine-T/3", "cosine-T/2", "warmup-cosine-T/3", "cosine-T",
                                  "warmup-cosine-T", "sgdr", "step", "constant", "one-cycle"])
def test_a_schedule_is_said_to_cycle_exactly_when_it_rises_again_gradually(tmp_path: Path, kind: str, n: int) -> None:
    """A cosine schedule whose period is shorter than the run (with or without warmup) cycles; one decay over the run, a
    warmup's climb from zero, warm restarts (a jump back), steps down, a constant LR and one-cycle do not."""
    series = healthy_series(n)
    series["lr/group0"] = (np.arange(n), _schedule(kind, n))
    run = write_run(tmp_path / "run", series)
    diagnosis = _checked(run)
    assert ("lr_schedule_cycles" in [f.code for f in diagnosis.findings]) == (kind in CYCLING), (kind, n)
