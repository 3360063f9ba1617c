"""Every (cause, symptom) pair of the combiner's ``EXPLAINS`` table, on a run where both fire, and on near-misses.

For each pair (``tests/cause_runs.py`` plants each code's signature from a chosen step):

- both: the cause planted first, the symptom later: both fire, the cause ranks above the
  symptom and lists it as explained (``related``);
- alone: the symptom planted without the cause: it fires, the cause does not, and no
  finding claims it (it keeps its own confidence);
- too late (where both onsets can move): the cause planted after the symptom was already
  showing: the cause fires but must not claim it, since causes precede their symptoms.

Every evidence line of every diagnosis is checked against the run as well.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import cause_runs  # noqa: E402
from evidence_checker import check_diagnosis  # noqa: E402
from tuidiag.diagnosis import Diagnosis, Finding, diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.diagnosis.combine import CONDITIONS, EXPLAINS  # noqa: E402

Plants = list[tuple[str, int]]


@dataclass(frozen=True)
class Pair:
    """How to plant one pair: the cause's plants, the symptom's (after them), and the symptom alone (the near-miss)."""

    cause: Plants
    symptom: Plants
    alone: Plants | None = None
    """The near-miss (default: ``symptom``)."""
    ranks: Plants = field(default_factory=list)
    """Plants across three ranks (the cause, for the rank codes)."""
    late: tuple[Plants, Plants] | None = None
    """(cause planted late, symptom planted early) where the onsets can move, for the too-late check."""
    loss: str = "falling"


B, LATE = 60, 250
"""The default onsets: the cause at ``B``, its symptom at 150; too late: the cause at ``LATE``, the symptom at 60."""


def _pair(cause: str, symptom: str, cause_at: int = B, symptom_at: int = 150, late: bool | tuple[Plants, Plants] = False,
          **kw) -> Pair:
    moved = late if isinstance(late, tuple) else ([(cause, LATE)], [(symptom, 60)]) if late else None
    return Pair([(cause, cause_at)], [(symptom, symptom_at)] if symptom else [], late=moved, **kw)


PAIRS: dict[tuple[str, str], Pair] = {
    ("bad_input_data", "nonfinite_loss"): _pair("bad_input_data", "nonfinite_loss", 0, 40),
    ("bad_input_data", "loss_spikes"): _pair("bad_input_data", "loss_spikes", 0),
    ("bad_input_data", "exploding_gradients"): _pair("bad_input_data", "exploding_gradients", 0),
    ("bad_input_data", "lr_too_high"): _pair("bad_input_data", "lr_too_high", 0),
    ("bad_input_data", "dead_relu"): _pair("bad_input_data", "dead_relu", 0),
    ("bad_input_data", "activation_saturation"): _pair("bad_input_data", "activation_saturation", 0),
    ("bad_input_data", "vanishing_gradients"): _pair("bad_input_data", "vanishing_gradients", 0),
    ("bad_input_data", "lr_too_low"): _pair("bad_input_data", "lr_too_low", 0, 0),
    ("bad_input_data", "underfitting"): _pair("bad_input_data", "underfitting", 0, 100),
    ("bad_input_data", "dead_layer"): _pair("bad_input_data", "dead_layer", 0),
    ("exploding_gradients", "nonfinite_loss"): _pair("exploding_gradients", "nonfinite_loss", B, 200),
    ("exploding_gradients", "lr_too_high"): _pair("exploding_from_start", "lr_too_high", 0, 100),
    ("exploding_gradients", "over_clipping"): _pair("exploding_from_start", "over_clipping", 0, 100,
                                                    late=([("exploding_gradients", LATE)], [("over_clipping", 60)])),
    ("exploding_gradients", "loss_spikes"): _pair("exploding_gradients", "loss_spikes", late=True),
    ("exploding_gradients", "dead_relu"): _pair("exploding_from_start", "dead_relu", 0, 150,
                                                late=([("exploding_gradients", LATE)], [("dead_relu", 60)])),
    ("lr_too_high", "exploding_gradients"): _pair("lr_too_high", "exploding_gradients", late=True),
    ("lr_too_high", "nonfinite_loss"): Pair([("lr_too_high", B)], [("diverged_to_nan", 300)], alone=[("nonfinite_loss", 300)]),
    ("lr_too_high", "over_clipping"): _pair("lr_too_high", "over_clipping", late=True),
    ("lr_too_high", "dead_relu"): _pair("lr_too_high", "dead_relu", late=True),
    ("lr_too_high", "loss_spikes"): _pair("lr_too_high", "loss_spikes", late=True),
    ("lr_too_high", "underfitting"): _pair("lr_too_high_flat", "underfitting", 30, 150),
    ("lr_too_high", "vanishing_gradients"): _pair("lr_too_high_flat", "vanishing_gradients", 30, 150, loss="flat"),
    ("lr_too_high", "activation_saturation"): _pair("lr_too_high", "activation_saturation", late=True),
    ("dead_relu", "dead_layer"): _pair("dead_relu_most", "dead_layer", 0, 150),
    ("dead_relu", "lr_too_low"): _pair("dead_relu", "lr_too_low", 0, 0),
    ("dead_relu", "underfitting"): _pair("dead_relu", "underfitting", 0, 100),
    ("dead_relu", "vanishing_gradients"): _pair("dead_relu", "vanishing_gradients", 0, 150, late=True),
    ("activation_saturation", "vanishing_gradients"): _pair("activation_saturation", "vanishing_gradients", 0, 150, late=True),
    ("activation_saturation", "lr_too_low"): _pair("activation_saturation", "lr_too_low", 0, 0),
    ("activation_saturation", "underfitting"): _pair("activation_saturation", "underfitting", 0, 100),
    ("vanishing_gradients", "underfitting"): _pair("vanishing_gradients", "underfitting", 0, 100),
    ("over_clipping", "lr_too_low"): _pair("over_clipping", "lr_too_low", 0, 0),
    ("over_clipping", "underfitting"): _pair("over_clipping", "underfitting", 0, 100),
    ("lr_decayed_too_early", "underfitting"): Pair([("lr_decayed_too_early", 20)], [], alone=[("underfitting", 100)]),
    ("lr_too_low", "underfitting"): Pair([("lr_too_low", 0)], [], alone=[("underfitting", 100)]),
    ("dead_layer", "underfitting"): _pair("dead_layer", "underfitting", 0, 100),
    ("dead_layer", "frozen_val_metric"): _pair("all_frozen", "frozen_val_metric", 0, 150),
    ("dead_layer", "lr_too_low"): Pair([("never_updated", 0)], [], alone=[("lr_too_low", 0)], loss="flat"),
    ("train_mode_bug", "underfitting"): _pair("train_mode_bug", "underfitting", 0, 100),
    ("loss_spikes", "exploding_gradients"): Pair([("loss_spikes", 100)], [("grad_jumps", 100)]),
    ("rank_nonfinite_first", "nonfinite_loss"): Pair([], [("nonfinite_loss", 152)], ranks=[("rank_nonfinite_first", 150)]),
    ("rank_nonfinite_first", "lr_too_high"): Pair([], [("lr_too_high", 160)], ranks=[("rank_nonfinite_first", 150)]),
    ("rank_nonfinite_first", "bad_input_data"): Pair([], [("bad_input_data", 150)], ranks=[("rank_nonfinite_first", 150)]),
    ("rank_nonfinite_first", "exploding_gradients"): Pair([], [], alone=[("exploding_gradients", 150)],
                                                          ranks=[("rank_nonfinite_first", 150)]),
    ("rank_nonfinite_first", "loss_spikes"): Pair([], [("loss_spikes", 160)], ranks=[("rank_nonfinite_first", 150)]),
    ("rank_nonfinite_first", "rank_desync"): Pair([], [], ranks=[("rank_nonfinite_first", 150), ("rank_desync", 160)]),
    ("rank_desync", "loss_spikes"): Pair([], [("loss_spikes", 150)], ranks=[("rank_desync", B)]),
    ("rank_desync", "lr_too_high"): Pair([], [("lr_too_high", 150)], ranks=[("rank_desync", B)]),
    ("rank_desync", "exploding_gradients"): Pair([], [("exploding_gradients", 150)], ranks=[("rank_desync", B)]),
    ("straggler_rank", "data_loading_bottleneck"): Pair([], [], alone=[("data_loading_bottleneck", 0)], ranks=[("straggler_rank", 0)]),
    ("grad_not_zeroed", "exploding_gradients"): _pair("grad_not_zeroed", "exploding_gradients", 0, late=True),
    ("grad_not_zeroed", "lr_too_high"): _pair("grad_not_zeroed", "lr_too_high", 0, late=True),
    ("grad_not_zeroed", "loss_spikes"): _pair("grad_not_zeroed", "loss_spikes", 0, late=True),
    ("grad_not_zeroed", "over_clipping"): _pair("grad_not_zeroed", "over_clipping", 0, late=True),
    ("grad_not_zeroed", "nonfinite_loss"): _pair("grad_not_zeroed", "nonfinite_loss", 0, 200),
    ("grad_not_zeroed", "underfitting"): _pair("grad_not_zeroed", "underfitting", 0, 100),
    ("double_softmax", "underfitting"): _pair("double_softmax", "underfitting", 0, 100),
    ("double_softmax", "lr_too_low"): _pair("double_softmax", "lr_too_low", 0, 0),
    ("double_softmax", "vanishing_gradients"): _pair("double_softmax", "vanishing_gradients", 0),
    ("double_softmax", "activation_saturation"): _pair("double_softmax", "activation_saturation", 0),
    ("loss_shape_mismatch", "underfitting"): _pair("loss_shape_mismatch", "underfitting", 0, 100),
    ("loss_shape_mismatch", "lr_too_low"): _pair("loss_shape_mismatch", "lr_too_low", 0, 0),
    ("labels_misaligned", "underfitting"): Pair([("labels_misaligned", 0)], [], alone=[("underfitting", 100)]),
    ("labels_misaligned", "overfitting"): _pair("labels_misaligned", "overfitting", 0),
    ("unshuffled_data", "loss_spikes"): _pair("unshuffled_data", "loss_spikes", 0),
    ("unshuffled_data", "lr_too_high"): _pair("unshuffled_data", "lr_too_high", 0),
    ("unshuffled_data", "class_imbalance"): _pair("unshuffled_data", "class_imbalance", 0, 100),
}
TABLE = [(cause, symptom) for cause, symptoms in EXPLAINS.items() for symptom in symptoms]
RANK_ALONE = {"rank_desync": [("rank_desync", B)]}
"""Near-misses that need three ranks (the symptom is a rank code)."""


def _write(root: Path, name: str, plants: Plants, ranks: Plants, loss: str) -> Path:
    multi = ranks or any(p in cause_runs.RANK_PLANTS for p, _ in plants)
    if multi:
        return cause_runs.write_three(root, name, [p for p in ranks + plants if p[0] in cause_runs.RANK_PLANTS],
                                      [p for p in plants if p[0] not in cause_runs.RANK_PLANTS])
    return cause_runs.write(root, name, plants, loss)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("explains")


def _diagnosed(root: Path, name: str, plants: Plants, ranks: Plants = (), loss: str = "falling") -> tuple[Path, Diagnosis]:
    run = _write(root, name, list(plants), list(ranks), loss)
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    return run, diagnosis


def _by_code(diagnosis: Diagnosis) -> dict[str, Finding]:
    return {f.code: f for f in diagnosis.findings}


def test_every_pair_of_the_table_has_a_scenario() -> None:
    assert set(PAIRS) == set(TABLE), (sorted(set(TABLE) - set(PAIRS)), sorted(set(PAIRS) - set(TABLE)))


@pytest.mark.parametrize("pair", TABLE, ids=[f"{c}-{s}" for c, s in TABLE])
def test_the_cause_ranks_above_the_symptom_it_explains(pair: tuple[str, str], root: Path) -> None:
    cause, symptom = pair
    spec = PAIRS[pair]
    _, diagnosis = _diagnosed(root, f"both-{cause}-{symptom}", spec.cause + spec.symptom, spec.ranks, spec.loss)
    found = _by_code(diagnosis)
    assert {cause, symptom} <= set(found), sorted(found)
    codes = [f.code for f in diagnosis.findings]
    assert codes.index(cause) < codes.index(symptom), codes
    assert symptom in found[cause].related and found[symptom].confidence < found[cause].confidence


@pytest.mark.parametrize("pair", TABLE, ids=[f"{c}-{s}" for c, s in TABLE])
def test_a_symptom_alone_is_not_attributed(pair: tuple[str, str], root: Path) -> None:
    cause, symptom = pair
    spec = PAIRS[pair]
    alone = spec.alone if spec.alone is not None else spec.symptom
    ranks = RANK_ALONE.get(symptom, [])
    _, diagnosis = _diagnosed(root, f"alone-{cause}-{symptom}", alone, ranks, spec.loss)
    found = _by_code(diagnosis)
    assert symptom in found and cause not in found, sorted(found)
    assert not any(symptom in f.related for f in diagnosis.findings), [(f.code, f.related) for f in diagnosis.findings]


LATE_PAIRS = [pair for pair in TABLE if PAIRS[pair].late is not None]


@pytest.mark.parametrize("pair", LATE_PAIRS, ids=[f"{c}-{s}" for c, s in LATE_PAIRS])
def test_a_cause_that_began_after_the_symptom_does_not_claim_it(pair: tuple[str, str], root: Path) -> None:
    cause, symptom = pair
    late = PAIRS[pair].late
    assert late is not None
    _, diagnosis = _diagnosed(root, f"late-{cause}-{symptom}", late[1] + late[0])
    found = _by_code(diagnosis)
    assert {cause, symptom} <= set(found), sorted(found)
    assert symptom not in found[cause].related, [(f.code, f.first_step, f.related) for f in diagnosis.findings]


def test_conditions_name_pairs_of_the_table() -> None:
    assert set(CONDITIONS) <= set(TABLE)
