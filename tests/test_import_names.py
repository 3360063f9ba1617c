"""The name mapping of imported runs: other tools' names onto tuidiag's conventions."""

from __future__ import annotations

import pytest

from tuidiag.diagnosis.view import TRAIN_ACC_NAMES, VAL_ACC_NAMES, VAL_LOSS_NAMES
from tuidiag.importers.names import TRAIN_ACC, VAL_ACC, VAL_LOSS, map_names, normal_form


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("train_loss", "train/loss"), ("loss", "train/loss"), ("Loss/train", "train/loss"),
        ("train/loss_step", "train/loss"),
        ("val_loss", "val/loss"), ("Loss/val", "val/loss"), ("validation/loss", "val/loss"), ("eval_loss", "val/loss"),
        ("lr", "lr/group0"), ("lr-Adam", "lr/group0"), ("learning_rate", "lr/group0"),
        ("train/learning_rate", "lr/group0"),
        ("lr-SGD/pg2", "lr/group1"), ("lr/group3", "lr/group3"),
        ("grad_norm", "grad_norm/total"), ("grad_2.0_norm_total", "grad_norm/total"),
        ("accuracy", "train/acc"), ("val_accuracy", "val/acc"), ("validation/epoch_accuracy", "val/acc"),
        ("epoch_loss", "train/loss"), ("validation/epoch_loss", "val/loss"),
    ],
)
def test_known_names_map_onto_tuidiag_names(source: str, target: str) -> None:
    names = map_names([source])
    assert names.mapped == {source: target}
    assert names.kept == {}


def test_other_names_are_kept_and_made_safe() -> None:
    names = map_names(["epoch", "top5/acc", "lr-Adam-momentum", "bad\x1b]0;title\x07name", "  "])
    assert names.mapped == {}
    assert names.kept["epoch"] == "epoch" and names.kept["top5/acc"] == "top5/acc"
    assert names.kept["lr-Adam-momentum"] == "lr-Adam-momentum"
    hostile = names.kept["bad\x1b]0;title\x07name"]
    assert "\x1b" not in hostile and "\x07" not in hostile and hostile.startswith("bad")
    assert names.kept["  "] == "unnamed"


def test_the_preferred_alias_wins_and_the_others_are_kept() -> None:
    names = map_names(["loss", "train_loss_epoch", "train_loss_step", "val_loss_step", "val_loss"])
    assert names.mapped == {"train_loss_step": "train/loss", "val_loss": "val/loss"}
    assert set(names.kept) == {"loss", "train_loss_epoch", "val_loss_step"}


def test_tuidiag_own_names_win_over_their_aliases() -> None:
    names = map_names(["train_loss", "train/loss"])
    assert names.mapped == {"train/loss": "train/loss"}
    assert names.kept == {"train_loss": "train_loss"}


def test_no_two_series_share_a_name() -> None:
    names = map_names(["a\x00b", "a\x01b"])  # both become 'a?b' once made safe
    targets = [names.target(s) for s in ("a\x00b", "a\x01b")]
    assert len(set(targets)) == 2


def test_mapped_names_are_the_ones_the_diagnosis_reads() -> None:
    assert VAL_LOSS in VAL_LOSS_NAMES and VAL_ACC in VAL_ACC_NAMES and TRAIN_ACC in TRAIN_ACC_NAMES


def test_normal_form_ignores_case_and_separators() -> None:
    assert normal_form("Loss/Train") == normal_form("loss-train") == normal_form("loss.train") == "loss_train"


def test_docs_list_every_alias() -> None:
    from tests.conftest import ROOT
    from tuidiag.importers.names import ALIASES

    docs = (ROOT / "docs" / "import.md").read_text()
    for target, aliases in ALIASES.items():
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{target}` |"))
        assert all(f"`{alias}`" in row for alias in aliases), target
