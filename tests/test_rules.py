"""Every diagnosis rule on synthetic series: it fires on its symptom, stays quiet on a healthy run and on a neighbour.

Runs are written in the real format (``ShardWriter`` + manifest) by
``benchmarks.suite.synthetic``; each symptom below edits a healthy run's series
in place. Also: the ``diagnose --json`` contract and the command's exit codes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import silent_plants  # noqa: E402
from synthetic_runs import LAYERS, Series, healthy_series, model_summary, write_run  # noqa: E402
from tuidiag.cli.main import main  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.diagnosis.rules import RULES  # noqa: E402
from tuidiag.diagnosis.rules.ranks import RULES as RANK_RULES  # noqa: E402
from tuidiag.diagnosis.view import RunView  # noqa: E402
from tuidiag.recorder.writer import EventRow  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

N = 600
Plant = Callable[[Series, dict[str, Any]], None]


def _set(s: Series, name: str, values: Any, steps: np.ndarray | None = None) -> None:
    steps = s[name][0] if steps is None and name in s else (np.arange(N) if steps is None else steps)
    s[name] = (steps, np.broadcast_to(np.asarray(values, float), steps.shape).copy())


def _t() -> np.ndarray:
    return np.arange(N, dtype=float)


def nan_loss(s: Series, m: dict) -> None:
    """The loss turns NaN at step 400."""
    loss = s["train/loss"][1]
    loss[400:] = np.nan


def spikes(s: Series, m: dict) -> None:
    """Four isolated loss spikes that recover."""
    s["train/loss"][1][[200, 300, 400, 500]] *= 8


def lr_high(s: Series, m: dict) -> None:
    """Loss climbs and oscillates while updates are 3% of the weights."""
    _set(s, "train/loss", 1.4 + 3.0 * _t() / N + 0.3 * np.sin(_t()))
    for name in LAYERS:
        _set(s, f"update_ratio/{name}", 0.03)


def lr_low(s: Series, m: dict) -> None:
    """Loss barely moves; updates are 1e-6 of the weights."""
    _set(s, "train/loss", 1.39 - 0.02 * _t() / N)
    _set(s, "val/loss", 1.39)
    for name in LAYERS:
        _set(s, f"update_ratio/{name}", 1e-6)


def lr_cycles(s: Series, m: dict) -> None:
    """CosineAnnealingLR(T_max=75) stepped per batch over 600 steps: the LR goes to zero and back every 150 steps."""
    _set(s, "lr/group0", 1e-3 * (1 + np.cos(np.pi * _t() / 75)) / 2)


def warm_restarts(s: Series, m: dict) -> None:
    """The near miss: SGDR (CosineAnnealingWarmRestarts(T_0=150)): each cycle decays, then jumps back in one step."""
    _set(s, "lr/group0", 1e-3 * (1 + np.cos(np.pi * (_t() % 150) / 150)) / 2)


def lr_decayed(s: Series, m: dict) -> None:
    """LR decays 10% per step: progress stops at step ~100 and the weights freeze."""
    lr = 1e-2 * 0.9 ** _t()
    _set(s, "lr/group0", lr)
    _set(s, "train/loss", np.where(_t() < 100, 1.4 - 0.6 * _t() / 100, 0.8))
    _set(s, "val/loss", np.where(s["val/loss"][0] < 100, 1.4 - 0.6 * s["val/loss"][0] / 100, 0.85))
    for name in LAYERS:
        _set(s, f"update_ratio/{name}", np.where(s[f"update_ratio/{name}"][0] < 100, 1e-3, 1e-12))


def exploding(s: Series, m: dict) -> None:
    """Gradient norms in the thousands from the first step."""
    for name in ("total", *LAYERS):
        _set(s, f"grad_norm/{name}", 3e3 * (1 + 0.1 * np.sin(_t())))


def vanishing(s: Series, m: dict) -> None:
    """The first layers get 1e-6 and 1e-4 of the last layer's gradient."""
    _set(s, "grad_norm/layer0.weight", 1e-6)
    _set(s, "grad_norm/layer1.weight", 1e-4)
    _set(s, "train/loss", 1.39)


def dead_layer(s: Series, m: dict) -> None:
    """Two parameters get no gradient (None), with the recorder's event."""
    _set(s, "grad/none_count", 2.0)
    m["events"] = [EventRow(0, 0.0, "no_grad", "warning", "2 parameters got no gradient", {"params": ["extra.weight", "extra.bias"]})]


def dead_relu(s: Series, m: dict) -> None:
    """A ReLU layer 97% dead; the layer before it gets zero gradient."""
    _set(s, "act/dead_frac/relu", 0.97)
    _set(s, "grad_norm/layer0.weight", 0.0)


def over_clipping(s: Series, m: dict) -> None:
    """Clipping on every step at a tiny max_norm."""
    _set(s, "grad/clipped", 1.0, np.arange(N))
    m["max_grad_norm"] = 1e-3


def overfitting(s: Series, m: dict) -> None:
    """Training loss to ~0 while validation turns up."""
    v = s["val/loss"][0].astype(float)
    _set(s, "train/loss", 1.2 * np.exp(-_t() / 60) + 0.001)
    _set(s, "val/loss", 0.6 + 1e-6 * (v - 150) ** 2 * 20)


def underfitting(s: Series, m: dict) -> None:
    """Both losses flat at 80% of their start, close together."""
    _set(s, "train/loss", np.where(_t() < 100, 1.39 - 0.3 * _t() / 100, 1.09))
    _set(s, "val/loss", 1.1)


def frozen_val(s: Series, m: dict) -> None:
    """Validation metrics identical at every evaluation."""
    _set(s, "val/loss", 1.39)
    _set(s, "val/acc", 0.25)


def saturation(s: Series, m: dict) -> None:
    """60% of tanh units saturated."""
    _set(s, "act/saturated_frac/tanh", 0.6, np.arange(0, N, 50))


def bad_input(s: Series, m: dict) -> None:
    """Inputs with std 1000."""
    _set(s, "input/std", 1000.0)
    _set(s, "input/abs_max", 5000.0)


def imbalance(s: Series, m: dict) -> None:
    """One class is 96% of each batch."""
    _set(s, "target/majority_share", 0.96)


def eval_mode(s: Series, m: dict) -> None:
    """model.training False from step 1, with dropout in the model."""
    _set(s, "model/training", np.where(_t() == 0, 1.0, 0.0))
    m["model"] = model_summary(has_dropout=True)


def slow_loader(s: Series, m: dict) -> None:
    """80% of each step waits for data."""
    _set(s, "time/data_wait", 0.008)


def low_gpu(s: Series, m: dict) -> None:
    """GPU utilisation at 12%."""
    _set(s, "sys/gpu_util", 12.0, np.arange(0, N, 20))


def big_model(s: Series, m: dict) -> None:
    """50M parameters for the samples seen."""
    m["model"] = model_summary(n_trainable=50_000_000)


def deep(s: Series, m: dict) -> None:
    """14 weight layers, no normalization."""
    m["model"] = model_summary(weight_layers=14)


def acc_stalls(s: Series, m: dict) -> None:
    """Training loss keeps falling while validation accuracy is flat."""
    _set(s, "val/acc", 0.4)
    _set(s, "train/loss", 2.0 * np.exp(-_t() / 200) + 0.01)


def recorder_lost(s: Series, m: dict) -> None:
    """The recorder rejected 3 values by step 100 and lost 9 rows by step 300."""
    _set(s, "recorder/rejected_values", 3.0, np.array([100]))
    _set(s, "recorder/lost_rows", 9.0, np.array([300]))


def imported_log(s: Series, m: dict) -> None:
    """A TensorBoard log read as a run: loss and validation only, no per-layer or input metrics."""
    for name in [n for n in s if not n.startswith(("train/loss", "val/", "lr/"))]:
        del s[name]
    m["source"] = {"format": "tensorboard"}
    m["model"] = None


def _silent(plant: Callable[[Series, int, dict], None]) -> Plant:
    """A plant of ``tests/silent_plants.py`` (written for any length) on a run of N steps."""

    def adapted(s: Series, m: dict) -> None:
        plant(s, N, m)

    adapted.__name__ = plant.__name__
    return adapted


# rule name -> (its symptom, a neighbouring symptom it must not fire on)
CASES: dict[str, tuple[Plant, Plant]] = {
    "nonfinite_loss": (nan_loss, spikes),
    "loss_spikes": (spikes, lr_high),
    "lr_too_high": (lr_high, lr_low),
    "lr_too_low": (lr_low, lr_decayed),
    "lr_decayed_too_early": (lr_decayed, lr_low),
    "lr_schedule_cycles": (lr_cycles, warm_restarts),
    "exploding_gradients": (exploding, vanishing),
    "vanishing_gradients": (vanishing, exploding),
    "dead_layer": (dead_layer, dead_relu),
    "over_clipping": (over_clipping, exploding),
    "overfitting": (overfitting, underfitting),
    "underfitting": (underfitting, overfitting),
    "frozen_val_metric": (frozen_val, lr_decayed),
    "dead_relu": (dead_relu, saturation),
    "activation_saturation": (saturation, dead_relu),
    "bad_input_data": (bad_input, imbalance),
    "class_imbalance": (imbalance, bad_input),
    "train_mode_bug": (eval_mode, slow_loader),
    "data_loading_bottleneck": (slow_loader, eval_mode),
    "low_gpu_utilization": (low_gpu, slow_loader),
    "capacity_vs_data": (big_model, deep),
    "deep_without_normalization": (deep, big_model),
    "loss_accuracy_mismatch": (acc_stalls, underfitting),
    "recorder_losses": (recorder_lost, slow_loader),
    "metrics_missing": (imported_log, recorder_lost),
    "grad_not_zeroed": (_silent(silent_plants.not_zeroed), _silent(silent_plants.zeroed)),
    "double_softmax": (_silent(silent_plants.probabilities_to_ce), _silent(silent_plants.logits_to_ce)),
    "loss_shape_mismatch": (_silent(silent_plants.broadcast_mse), _silent(silent_plants.matching_mse)),
    "labels_misaligned": (_silent(silent_plants.chance_loss), _silent(silent_plants.chance_loss_frozen)),
    "unshuffled_data": (_silent(silent_plants.sorted_by_class), _silent(silent_plants.imbalanced_shuffled)),
}
RULE_BY_NAME = {rule.__name__: rule for rule in RULES if rule not in RANK_RULES}  # multi-rank: tests/test_ranks_rules.py


def build(tmp_path: Path, plant: Plant | None = None, name: str = "run") -> Path:
    """A synthetic run: healthy, or with ``plant``'s symptom."""
    series, extra = healthy_series(N), {"model": model_summary()}
    if plant is not None:
        plant(series, extra)
    return write_run(tmp_path / name, series, model=extra.pop("model"), events=extra.pop("events", None), **extra)


@pytest.fixture(scope="module")
def healthy_view(tmp_path_factory: pytest.TempPathFactory) -> RunView:
    """One healthy synthetic run shared by the quiet-on-healthy checks."""
    return RunView(open_run(build(tmp_path_factory.mktemp("healthy"))))


def test_every_rule_has_a_case() -> None:
    assert set(RULE_BY_NAME) == set(CASES)


@pytest.mark.parametrize("rule_name", sorted(CASES))
def test_rule_fires_on_its_symptom_only(rule_name: str, tmp_path: Path, healthy_view: RunView) -> None:
    rule = RULE_BY_NAME[rule_name]
    symptom, neighbour = CASES[rule_name]
    found = rule(RunView(open_run(build(tmp_path, symptom, "symptom"))))
    assert found is not None, f"{rule_name} missed its symptom"
    assert 0 < found.confidence <= 1 and found.evidence and found.fix
    assert rule(healthy_view) is None, f"{rule_name} fired on a healthy run"
    assert rule(RunView(open_run(build(tmp_path, neighbour, "neighbour")))) is None, f"{rule_name} fired on {neighbour.__name__}"


@pytest.mark.parametrize("plant, code", [(lr_high, "lr_too_high"), (bad_input, "bad_input_data"), (dead_relu, "dead_relu"),
                                         (lr_decayed, "lr_decayed_too_early"), (exploding, "exploding_gradients")])
def test_the_cause_ranks_above_its_symptoms(plant: Plant, code: str, tmp_path: Path) -> None:
    assert diagnose(open_run(build(tmp_path, plant))).top.code == code


def test_json_contract(tmp_path: Path) -> None:
    healthy = diagnose(open_run(build(tmp_path, None, "healthy"))).to_json()
    assert {"run", "step", "findings"} <= set(healthy) and healthy["step"] == N - 1
    assert [f["code"] for f in healthy["findings"]] == ["healthy"]
    faulty = diagnose(open_run(build(tmp_path, nan_loss, "nan"))).to_json()
    for finding in healthy["findings"] + faulty["findings"]:
        assert {"code", "title", "confidence", "severity", "evidence", "fix", "first_step"} <= set(finding)
        assert 0 <= finding["confidence"] <= 1 and finding["severity"] in ("info", "warning", "critical")
        assert isinstance(finding["evidence"], list) and isinstance(finding["fix"], str)
    assert faulty["findings"][0]["severity"] == "critical" and faulty["findings"][0]["first_step"] is not None
    confidences = [f["confidence"] for f in faulty["findings"]]
    assert confidences == sorted(confidences, reverse=True)
    json.dumps(faulty)


def test_diagnose_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = build(tmp_path, spikes)
    assert main(["diagnose", str(run), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["findings"][0]["code"] == "loss_spikes"
    assert main(["diagnose", str(run), "--json", "--at", "100"]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 100
    assert main(["diagnose", str(tmp_path / "missing"), "--json"]) == 2


@pytest.mark.parametrize("peak_at_middle", [True, False])
@pytest.mark.parametrize("trend", [-0.02, 0.0, 0.08])
def test_accuracy_stalls_is_judged_on_medians_not_two_noisy_evaluations(tmp_path: Path, peak_at_middle: bool,
                                                                        trend: float) -> None:
    """A validation accuracy that swings +-0.01 between evaluations, with a local peak in the middle or not: the note
    compares the median of a few evaluations in the middle with the median at the end, so a peak alone never reads as
    a drop, and an accuracy that really rose (+0.04 over the second half) is not called stalled."""
    from tuidiag.diagnosis.rules.review import loss_accuracy_mismatch

    def plant(s: Series, m: dict) -> None:
        steps = np.arange(0, N, 25)
        acc = 0.95 + 0.01 * np.where(np.arange(len(steps)) % 2, 1.0, -1.0) + trend * np.arange(len(steps)) / len(steps)
        if peak_at_middle:
            acc[len(acc) // 2] = 0.99
        _set(s, "val/acc", acc, steps)
        _set(s, "train/loss", 2.0 * np.exp(-_t() / 200) + 0.01)

    view = RunView(open_run(build(tmp_path, plant)))
    found = loss_accuracy_mismatch(view)
    steps, acc = view.series("val/acc")
    width = max(2, len(acc) // 5)
    mid = len(acc) // 2 - width // 2
    gain = float(np.median(acc[-width:]) - np.median(acc[mid:mid + width]))
    assert (found is not None) == (gain <= 0.005), gain
    if found is not None:
        assert "median" in str(found.evidence[0]) and f"moved {gain:+.3f}" in str(found.evidence[0])
        assert trend <= 0.0


@pytest.mark.parametrize(("weights_stall", "tail_rise"), [(True, 0.2), (True, -0.2), (False, 0.2), (True, 0.0)])
def test_a_loss_rise_after_the_lr_collapsed_says_whether_the_weights_moved(tmp_path: Path, weights_stall: bool,
                                                                          tail_rise: float) -> None:
    """After the LR collapsed, a rise between two windows of the loss while the update/weight ratio fell 10x or more
    is said with the reason it is not the model getting worse (the windows hold different batches); a fall, a flat
    tail, or a rise with the weights still moving is said as it is."""
    from tuidiag.diagnosis.rules.lr_schedule import lr_decayed_too_early

    def plant(s: Series, m: dict) -> None:
        lr_decayed(s, m)
        t = _t()
        tail = 0.8 * (1 + tail_rise * np.clip((t - 300) / 299, 0, 1))
        _set(s, "train/loss", np.where(t < 100, 1.4 - 0.6 * t / 100, tail))
        if not weights_stall:
            for name in LAYERS:
                _set(s, f"update_ratio/{name}", 1e-3)

    found = lr_decayed_too_early(RunView(open_run(build(tmp_path, plant))))
    if found is None:
        assert not weights_stall  # with moving weights the rule may stay quiet; with stalled ones it names the collapse
        return
    lines = [str(e) for e in found.evidence]
    said = any("while the weights barely moved: the two windows hold different batches" in line for line in lines)
    assert said == (weights_stall and tail_rise > 0), lines
