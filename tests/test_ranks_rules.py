"""Multi-rank rules on synthetic series: the pure comparisons, then the rules on written 2-3 rank runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.rank_runs import write_ranks
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.diagnosis.rank_stats import aligned, first_nonfinite, norm_disagreement, replicated, straggler

N = 200
T = np.arange(N)


def _flat(value: float, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(n), np.full(n, value)


def _with_nan(at: int | None) -> tuple[np.ndarray, np.ndarray]:
    values = np.linspace(2.0, 0.5, N)
    if at is not None:
        values[at:] = np.nan
    return T, values


def test_first_nonfinite_names_the_rank_whose_loss_broke_first() -> None:
    loss = {0: _with_nan(51), 1: _with_nan(50), 2: _with_nan(51)}
    grads = {r: _with_nan(50) for r in range(3)}  # all-reduced: every rank's gradient breaks at once
    assert first_nonfinite(loss, grads) == (1, 50, {0: 50, 2: 50})


def test_first_nonfinite_is_none_when_ranks_break_together_or_never() -> None:
    assert first_nonfinite({0: _with_nan(50), 1: _with_nan(50)}, {}) is None
    assert first_nonfinite({0: _with_nan(None), 1: _with_nan(None)}, {}) is None
    assert first_nonfinite({0: _with_nan(50)}, {}) is None  # one rank: nothing to compare
    assert first_nonfinite({0: _with_nan(None), 1: _with_nan(80)}, {}) == (1, 80, {0: None})


def test_aligned_keeps_common_steps_only() -> None:
    ranks, steps, values = aligned(
        {0: (np.array([0, 1, 2, 3]), np.arange(4.0)), 1: (np.array([1, 3, 5]), np.array([10.0, 30, 50]))}
    )
    assert ranks == [0, 1] and steps.tolist() == [1, 3]
    assert values.tolist() == [[1.0, 3.0], [10.0, 30.0]]


def test_norm_disagreement_needs_a_persistent_gap() -> None:
    same = {0: _flat(3.0), 1: (T, np.full(N, 3.0) * (1 + 1e-7))}
    assert norm_disagreement(same) is None
    drift = np.full(N, 3.0)
    drift[100:] *= 1.2
    first, gap, by_rank = norm_disagreement({0: _flat(3.0), 1: (T, drift)})
    assert first == 100 and abs(gap - 0.6 / 3.3) < 1e-9 and by_rank == pytest.approx({0: 3.0, 1: 3.6})
    blip = np.full(N, 3.0)
    blip[50] = 9.0
    assert norm_disagreement({0: _flat(3.0), 1: (T, blip)}) is None


def test_replicated_rejects_sharded_names() -> None:
    assert replicated({"weight_norm/fc.weight": {0, 1}, "weight_norm/fc.bias": {0, 1}})
    assert not replicated({"weight_norm/fc.weight": {0, 1}, "weight_norm/head.weight": {1}})
    assert not replicated({"weight_norm/_fsdp_wrapped_module._flat_param": {0, 1}})
    assert not replicated({})


def test_straggler_by_step_time_and_by_data_wait() -> None:
    steps = {0: _flat(0.010), 1: _flat(0.030), 2: _flat(0.011)}
    assert straggler(steps, {}) == pytest.approx((1, "step", 0.030, 0.0105, 0.030))
    synced = {r: _flat(0.050) for r in range(2)}
    waits = {0: _flat(0.0003), 1: _flat(0.040)}
    rank, kind, own, others, step_s = straggler(synced, waits)
    assert (rank, kind, own, step_s) == (1, "data", 0.040, 0.050)
    assert straggler(synced, {0: _flat(0.0003), 1: _flat(0.0004)}) is None
    assert (
        straggler({r: _flat(0.0010 + r * 0.0005) for r in range(2)}, {}) is None
    )  # tiny steps: jitter, not straggling


def _healthy_rank(rank: int, lr: float = 1e-3) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(rank)
    every10 = np.arange(0, N, 10)
    return {
        "train/loss": (T, 1.2 * np.exp(-T / 60) + 0.2 + 0.02 * rng.standard_normal(N)),
        "grad_norm/total": (T, np.abs(0.5 + 0.05 * np.random.default_rng(9).standard_normal(N))),
        "lr/group0": _flat(lr),
        "weight_norm/fc.weight": (every10, 4.0 + every10 * 1e-3),
        "update_ratio/fc.weight": (every10, np.full(len(every10), 1e-3)),
        "time/step": (T[1:], np.full(N - 1, 0.02)),
        "time/data_wait": (T[1:], np.full(N - 1, 3e-4)),
        "input/nonfinite": (T, np.zeros(N)),
    }


def _codes(run_dir: Path) -> set[str]:
    return {f.code for f in diagnose(open_run(run_dir)).findings}


def test_rules_stay_quiet_on_healthy_ranks_and_single_rank(tmp_path: Path) -> None:
    assert not {"rank_nonfinite_first", "rank_desync", "straggler_rank"} & _codes(
        write_ranks(tmp_path / "ok", {r: _healthy_rank(r) for r in range(3)})
    )
    one = _healthy_rank(0)
    one["time/step"] = (T[1:], np.full(N - 1, 0.05))
    one["time/data_wait"] = (T[1:], np.full(N - 1, 0.04))
    assert "straggler_rank" not in _codes(write_ranks(tmp_path / "single", {0: one}))


def test_rules_fire_on_planted_rank_faults(tmp_path: Path) -> None:
    ranks = {r: _healthy_rank(r) for r in range(3)}
    ranks[2]["train/loss"][1][120:] = np.nan
    ranks[2]["input/nonfinite"][1][120] = 5
    for r in (0, 1):
        ranks[r]["train/loss"][1][121:] = np.nan
    diagnosis = diagnose(open_run(write_ranks(tmp_path / "nan", ranks)))
    assert diagnosis.top.code == "rank_nonfinite_first" and diagnosis.top.first_step == 120
    assert "rank 2" in diagnosis.top.evidence[0] and any("5 non-finite input" in e for e in diagnosis.top.evidence)

    ranks = {0: _healthy_rank(0), 1: _healthy_rank(1, lr=1e-2)}
    steps, norms = ranks[1]["weight_norm/fc.weight"]
    ranks[1]["weight_norm/fc.weight"] = (steps, norms + steps * 5e-3)
    finding = next(f for f in diagnose(open_run(write_ranks(tmp_path / "desync", ranks))).findings if f.code == "rank_desync")
    assert finding.first_step == 10 and any("rank 1 0.01" in e for e in finding.evidence)

    ranks = {r: _healthy_rank(r) for r in range(2)}
    ranks[0]["time/step"] = ranks[1]["time/step"] = (T[1:], np.full(N - 1, 0.06))
    ranks[1]["time/data_wait"] = (T[1:], np.full(N - 1, 0.045))
    finding = next(f for f in diagnose(open_run(write_ranks(tmp_path / "slow", ranks))).findings if f.code == "straggler_rank")
    assert finding.title == "Rank 1 is a straggler" and "45 ms" in finding.evidence[0]
