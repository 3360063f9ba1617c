"""Two misses found on the grown suite, fixed in the reasoning, each on real CPU trainings and on generated runs.

- **A far too high LR whose first updates killed the units.** SGD at LR 5 on a ReLU MLP for
  1000 steps: the first updates throw the weights (a norm 40,000x in 25 steps), every ReLU
  dies within the quiet first steps, and every later signature of the LR goes quiet. It read
  as ``dead_relu``. A weight matrix whose norm grows 10x or more between two samples is now an
  overshoot signature of ``lr_too_high`` at any step, so the LR ranks first with the dead
  units under it. Generated runs: any jump factor at any step, above and below the line.
- **Nothing trains.** Every parameter frozen (a loop that calls ``backward`` only when the loss
  requires a gradient), or an optimizer built over another copy of the model: no gradient is
  watched, or every update is exactly 0, and it read as a frozen validation metric or a
  too-low LR (whose fix, "raise the LR", cannot help). It is now a critical ``dead_layer``
  ("Nothing trains") read from the model summary and the update ratios, explaining those.
  Near-miss: a backbone frozen on purpose under a trainable head is not flagged.
- **A warmup read as misaligned labels.** A healthy run judged while its LR still warms up
  has its loss at the chance level; ``labels_misaligned`` fired there. It now waits until
  the LR stops rising over the steps it judges.
- **An underfitting model near the chance level read as misaligned labels** (the suite's held-out
  ``underfit-resmlp``: a width-2 residual MLP on XOR, its losses at 0.92 of log(4)). A validation
  loss clearly below the chance level and no higher than the training loss means the model
  predicts data it never trained on: the labels belong to their inputs. Generated runs: training
  and validation levels over the band, on both sides of the line and of each other.
- **A climbing loss read as an LR too low.** A CNN without ``zero_grad`` whose weights had blown
  up (updates tiny against them) read "LR too low: raise it 18x" with its loss up 3172%. Small
  steps make progress slow, never negative: a loss that rose over 25% rules the finding out.
  Generated runs: tiny updates under a loss flat, falling a little, or rising by any factor.

Every evidence line is checked against the run (``tests/evidence_checker.py``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

torch = pytest.importorskip("torch")

from benchmarks.suite import scenarios, train  # noqa: E402
from tests.conftest import examples  # noqa: E402
from benchmarks.suite.train import Spec, record as record_spec  # noqa: E402
from evidence_checker import check_diagnosis  # noqa: E402
from rootcause_runs import Training, record  # noqa: E402
from silent_plants import chance_loss  # noqa: E402
from synthetic_runs import LAYERS, healthy_series, model_summary, write_run  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.diagnosis.rules.nothing_trains import TITLE  # noqa: E402
from tuidiag.diagnosis.rules.lr import ROSE_NOT_LOW  # noqa: E402
from tuidiag.diagnosis.rules.overshoot import WEIGHT_BLOWUP  # noqa: E402
from tuidiag.diagnosis.rules.silent_bugs import CHANCE_BAND, GENERALISES, MOVING_RATIO  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_sgd_lr5_relu_mlp_names_the_lr_not_the_dead_units(tmp_path: Path) -> None:
    run = record(Training("lr_high", "mlp", "sgd", 5.0, momentum=0.0, steps=1000), tmp_path / "sgd5")
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    codes = [f.code for f in diagnosis.findings]
    assert codes[0] == "lr_too_high", codes
    assert "dead_relu" not in codes or "dead_relu" in diagnosis.top.related, codes
    assert any("the updates throw the weights" in line for line in diagnosis.top.evidence), diagnosis.top.evidence


def _with_weights(factor: float, at: int, dead_from: int | None) -> dict:
    """A healthy run whose first weight matrix's norm is multiplied by ``factor`` from step ``at`` (sampled every 25 steps),
    and whose ReLU layer is all dead from ``dead_from``."""
    series = healthy_series(600)
    every25 = np.arange(0, 600, 25)
    for i, name in enumerate(LAYERS):
        norm = np.full(len(every25), 5.0 + i) * (1 + 0.01 * np.arange(len(every25)))
        if i == 0:
            norm = np.where(every25 >= at, norm * factor, norm)
        series[f"weight_norm/{name}"] = (every25, norm)
    if dead_from is not None:
        steps, dead = series["act/dead_frac/relu"]
        series["act/dead_frac/relu"] = (steps, np.where(steps >= dead_from, 1.0, dead))
    return series


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(factor=st.floats(1.5, 1e5), jump=st.integers(1, 15))
@example(factor=WEIGHT_BLOWUP, jump=1).via("the line itself")
@example(factor=WEIGHT_BLOWUP * 0.99, jump=8).via("just below it")
def test_a_weight_blowup_before_the_units_died_points_at_the_lr(tmp_path_factory: pytest.TempPathFactory, factor: float,
                                                                 jump: int) -> None:
    at = 25 * jump
    run = write_run(tmp_path_factory.mktemp("blowup") / "run", _with_weights(factor, at, at + 25))
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    codes = [f.code for f in diagnosis.findings]
    if factor >= WEIGHT_BLOWUP:
        assert codes[0] == "lr_too_high" and "dead_relu" in diagnosis.top.related, codes
        assert diagnosis.top.first_step == at
    else:
        assert "lr_too_high" not in codes, codes


def _spec(name: str, **kw) -> Spec:
    return Spec(name, "dead_layer", "tune", ("dead_layer",), (), steps=80, val_every=10, **kw)


@pytest.mark.parametrize("arch", ["mlp", "cnn", "rnn"])
@pytest.mark.parametrize("fault", ["frozen", "orphan_optimizer"])
def test_nothing_trains_is_named(tmp_path: Path, arch: str, fault: str) -> None:
    run = record_spec(_spec(f"{fault}-{arch}", arch=arch, fault={fault: True}), tmp_path / "run")
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    top = diagnosis.top
    assert (top.code, top.title, top.severity) == ("dead_layer", TITLE, "critical"), [(f.code, f.title) for f in diagnosis.findings]
    assert ("requires_grad" in top.fix) == (fault == "frozen"), top.fix
    for symptom in ("frozen_val_metric", "lr_too_low"):
        assert symptom not in [f.code for f in diagnosis.findings] or symptom in top.related


def test_a_backbone_frozen_on_purpose_is_not_nothing_trains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = train.build_parts

    def head_only(spec: Spec) -> train.Parts:
        parts = original(spec)
        for name, param in parts.model.named_parameters():
            param.requires_grad_(name.startswith("head"))
        return parts

    monkeypatch.setattr(train, "build_parts", head_only)
    run = record_spec(_spec("finetune-head", lr=3e-3), tmp_path / "run")
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    assert all(f.title != TITLE for f in diagnosis.findings), [(f.code, f.title) for f in diagnosis.findings]


@pytest.mark.parametrize("at", [60, 120])
def test_a_loss_at_chance_during_warmup_is_not_misaligned_labels(tmp_path: Path, at: int) -> None:
    spec = Spec("warmup", "healthy", "tune", ("healthy",), (), lr=1e-3, steps=at + 1, schedule="warmup_slow", val_every=20)
    run = record_spec(spec, tmp_path / "run")
    diagnosis = diagnose(open_run(run), at=at)
    check_diagnosis(run, diagnosis, at)
    assert "labels_misaligned" not in [f.code for f in diagnosis.findings], [(f.code, f.title) for f in diagnosis.findings]


@pytest.mark.parametrize("name", ["underfit-resmlp", "labels-misaligned-resmlp"])
def test_a_loss_near_chance_is_misaligned_labels_only_when_validation_does_no_better(tmp_path: Path, name: str) -> None:
    """The held-out miss and its own architecture with the labels shuffled: the first is underfitting, the second is
    still named."""
    spec = scenarios.by_name(name)
    run = record_spec(spec, tmp_path / "run")
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    codes = [f.code for f in diagnosis.findings]
    assert codes[0] in spec.acceptable, codes
    assert ("labels_misaligned" in codes) == (name == "labels-misaligned-resmlp"), codes


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(train_level=st.floats(CHANCE_BAND[0] + 0.02, CHANCE_BAND[1] - 0.02), val_level=st.floats(0.8, 1.15))
@example(train_level=0.926, val_level=0.916).via("underfit-resmlp: validation below chance and below training")
@example(train_level=0.945, val_level=0.935).via("just under the line, below training")
@example(train_level=0.93, val_level=0.935).via("under the line, but above training: memorising")
@example(train_level=0.97, val_level=0.965).via("labels-misaligned-transformer's levels")
def test_misaligned_labels_are_named_unless_validation_beats_chance(tmp_path_factory: pytest.TempPathFactory,
                                                                    train_level: float, val_level: float) -> None:
    """Losses flat at ``train_level`` (training) and ``val_level`` (validation, every 25 steps) times log(4), with healthy
    gradients and moving weights: misaligned labels unless validation is below :data:`GENERALISES` of the chance level and
    no higher than training."""
    assume(abs(val_level - GENERALISES) > 0.003 and abs(val_level - train_level) > 0.003)  # not on a line: medians wiggle
    series, extra = healthy_series(600), {}
    chance_loss(series, 600, extra)
    steps, loss = series["train/loss"]
    series["train/loss"] = (steps, loss * train_level)
    every25 = series["val/loss"][0]
    series["val/loss"] = (every25, np.full(len(every25), val_level * math.log(4)))
    run = write_run(tmp_path_factory.mktemp("chance") / "run", series, model=model_summary(), events=extra.get("events"))
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    generalises = val_level < GENERALISES and val_level < train_level
    assert ("labels_misaligned" in [f.code for f in diagnosis.findings]) != generalises, (
        train_level, val_level, [(f.code, f.title) for f in diagnosis.findings])


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rise=st.floats(-0.15, 100.0))
@example(rise=31.72).via("the CNN without zero_grad: loss up 3172%")
@example(rise=ROSE_NOT_LOW * 1.05).via("just above the line")
@example(rise=ROSE_NOT_LOW * 0.9).via("just below it: noise on a flat loss")
@example(rise=0.0).via("flat")
def test_tiny_updates_are_an_lr_too_low_only_under_a_loss_that_did_not_climb(tmp_path_factory: pytest.TempPathFactory,
                                                                            rise: float) -> None:
    """Update/weight ratios of 1e-6 and healthy gradients, under a loss that goes from 1.39 to ``1.39 * (1 + rise)``
    (log-linearly; a fall of up to 15%): ``lr_too_low`` is named exactly when the loss did not rise by more than
    :data:`ROSE_NOT_LOW`."""
    assume(abs(rise - ROSE_NOT_LOW) > 0.02)  # the medians of the first and last tenths are not the curve's ends
    series = healthy_series(600)
    t = series["train/loss"][0]
    series["train/loss"] = (t, 1.39 * (1 + rise) ** (t / t[-1]))
    every25 = series["val/loss"][0]
    series["val/loss"] = (every25, 1.39 * (1 + rise) ** (every25 / t[-1]))
    for name in LAYERS:
        series[f"update_ratio/{name}"] = (every25, np.full(len(every25), 1e-6))
    run = write_run(tmp_path_factory.mktemp("low") / "run", series, model=model_summary())
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    codes = [f.code for f in diagnosis.findings]
    first, last = np.median(series["train/loss"][1][:60]), np.median(series["train/loss"][1][-60:])
    assert ("lr_too_low" in codes) == (last / first - 1 <= ROSE_NOT_LOW), (rise, codes)


@pytest.mark.parametrize("growth", [1.0, 1.18, 1.9, 2.2, 20.0])
def test_the_gradient_climb_is_evidence_of_missing_zero_grad_only_when_it_climbed(tmp_path: Path, growth: float) -> None:
    """A run without zero_grad whose total gradient norm grew ``growth``x from start to end (the review's CNN: 1.18x, its
    weights already blown up): the 'each step adds to the gradients' line is offered only for a climb of 2x or more."""
    series, extra = healthy_series(600), {}
    t = series["train/loss"][0]
    grow = 1 + (growth - 1) * t / t[-1]
    for name in [k for k in series if k.startswith("grad_norm/")]:
        series[name] = (series[name][0], series[name][1] * grow[: len(series[name][1])])
    every = np.arange(10, 600, 10)
    series["grad/stale_norm"] = (every, 0.95 * series["grad_norm/total"][1][every])
    run = write_run(tmp_path / "run", series, model=model_summary(), events=extra.get("events"))
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    found = next(f for f in diagnosis.findings if f.code == "grad_not_zeroed")
    climbs = any("each step adds to the gradients" in line for line in found.evidence)
    first, last = np.median(series["grad_norm/total"][1][:60]), np.median(series["grad_norm/total"][1][-60:])
    assert climbs == (last >= 2 * first), (growth, found.evidence)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log_ratio=st.floats(-6.5, -2.0))
@example(log_ratio=math.log10(6.29e-5)).via("Adam at 1e-5 on correct labels: 6.29e-05")
@example(log_ratio=math.log10(2e-3)).via("the suite's misaligned labels: about 2e-3")
def test_a_loss_at_chance_under_tiny_updates_is_the_lr_not_the_labels(tmp_path_factory: pytest.TempPathFactory,
                                                                      log_ratio: float) -> None:
    """Losses at chance (training and validation) with update/weight ratios of ``10**log_ratio``: misaligned labels only
    at a healthy pace (:data:`MOVING_RATIO` or more); below it the small steps explain the loss and ``lr_too_low`` says so."""
    ratio = 10.0**log_ratio
    assume(abs(math.log10(ratio / MOVING_RATIO)) > 0.05)
    series, extra = healthy_series(600), {}
    chance_loss(series, 600, extra)
    every25 = series["val/loss"][0]
    for name in LAYERS:
        series[f"update_ratio/{name}"] = (every25, np.full(len(every25), ratio))
    run = write_run(tmp_path_factory.mktemp("pace") / "run", series, model=model_summary(), events=extra.get("events"))
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    codes = [f.code for f in diagnosis.findings]
    assert ("labels_misaligned" in codes) == (ratio >= MOVING_RATIO), (ratio, codes)
    assert ratio >= MOVING_RATIO or codes[0] == "lr_too_low", (ratio, codes)
