"""Importing Keras history JSON and CSV logs (Keras CSVLogger by hand, Lightning CSVLogger from a real Trainer)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tuidiag
from tuidiag.cli.main import main


def _history(epochs: int = 60) -> dict[str, list[float]]:
    """The seeds' training_history.json: train loss keeps falling, validation loss turns up after epoch 15."""
    e = np.arange(epochs, dtype=np.float64)
    loss = 1.5 * np.exp(-e / 12) + 0.02
    val_loss = 0.9 * np.exp(-e / 8) + 0.35 + 0.002 * np.maximum(e - 15, 0) ** 2
    return {"loss": loss.tolist(), "val_loss": val_loss.tolist(), "accuracy": (1 - loss / 2).tolist(),
            "val_accuracy": (1 - val_loss / 2).tolist()}


def _diagnosis_codes(run_dir: Path, capsys) -> list[str]:
    capsys.readouterr()
    assert main(["diagnose", str(run_dir), "--json"]) == 0
    return [f["code"] for f in json.loads(capsys.readouterr().out)["findings"]]


def test_keras_history_json_imports_epochs_as_steps_and_shows_overfitting(tmp_path: Path, capsys) -> None:
    history = _history()
    src = tmp_path / "training_history.json"
    src.write_text(json.dumps(history))
    assert main(["import", "keras-history", str(src), str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "loss -> train/loss" in out and "val_accuracy -> val/acc" in out
    run = tuidiag.open_run(tmp_path / "runs" / "training_history")
    pairs = (("loss", "train/loss"), ("val_loss", "val/loss"), ("accuracy", "train/acc"), ("val_accuracy", "val/acc"))
    for name, metric in pairs:
        series = run.series(metric)
        np.testing.assert_array_equal(series.steps, np.arange(60))
        np.testing.assert_array_equal(series.values, np.array(history[name]))
    assert run.status == "finished" and run.manifest["source"]["format"] == "keras-history"
    assert _diagnosis_codes(run.path, capsys)[0] == "overfitting"


def test_keras_history_keeps_nan_skips_null_and_spaces_validation_freq(tmp_path: Path, capsys) -> None:
    src = tmp_path / "hist.json"
    loss = [1.0 / (i + 1) for i in range(40)] + [float("nan")] * 5
    src.write_text(json.dumps({"history": {"loss": loss, "val_loss": [0.5] * 15, "lr": [0.1] * 44 + [None]}}))
    assert main(["import", "keras-history", str(src), str(tmp_path / "runs"), "--name", "nan-run"]) == 0
    assert "validation_freq=3" in capsys.readouterr().out
    run = tuidiag.open_run(tmp_path / "runs" / "nan-run")
    assert np.isnan(run.series("train/loss").values[40:]).all() and len(run.series("train/loss")) == 45
    np.testing.assert_array_equal(run.series("val/loss").steps, np.arange(2, 45, 3))
    assert len(run.series("lr/group0")) == 44
    assert "nonfinite_loss" in _diagnosis_codes(run.path, capsys)


def test_keras_csv_logger_file(tmp_path: Path, capsys) -> None:
    history = _history(30)
    src = tmp_path / "training.log"  # Keras' CSVLogger: epoch, then the sorted metric names
    keys = sorted(history)
    rows = ["epoch," + ",".join(keys)] + [f"{e}," + ",".join(str(history[k][e]) for k in keys) for e in range(30)]
    src.write_text("\n".join(rows) + "\n")
    assert main(["import", "csv", str(src), str(tmp_path / "runs")]) == 0
    run = tuidiag.open_run(tmp_path / "runs" / "training")
    assert run.manifest["source"]["format"] == "csv (keras)"
    np.testing.assert_array_equal(run.series("val/loss").steps, np.arange(30))
    np.testing.assert_array_equal(run.series("val/loss").values, np.array(history["val_loss"]))
    assert "epoch" not in run.metric_names


def test_keras_csv_logger_with_another_separator(tmp_path: Path) -> None:
    src = tmp_path / "semi.csv"
    src.write_text("epoch;learning_rate;loss\n0;0.01;1.5\n1;0.01;nan\n2;0.001;inf\n")
    assert main(["import", "csv", str(src), str(tmp_path / "runs")]) == 0
    run = tuidiag.open_run(tmp_path / "runs" / "semi")
    np.testing.assert_array_equal(run.series("train/loss").values, [1.5, np.nan, np.inf])
    np.testing.assert_array_equal(run.series("lr/group0").steps, [0, 1, 2])


def _lightning_run(root: Path) -> tuple[Path, Path]:
    """Train a tiny model with Lightning, logging to CSV and TensorBoard; returns metrics.csv and the TB dir."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    class Tiny(L.LightningModule):
        def __init__(self, lr: float = 0.05) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.net = nn.Linear(4, 1)

        def training_step(self, batch, _):
            loss = nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, _):
            self.log("val_loss", nn.functional.mse_loss(self.net(batch[0]), batch[1]))

        def configure_optimizers(self):
            optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
            return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)}

    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    loggers = [CSVLogger(str(root), name="csv"), TensorBoardLogger(str(root), name="tb", default_hp_metric=False)]
    trainer = L.Trainer(
        max_epochs=3, logger=loggers, callbacks=[LearningRateMonitor("step")], log_every_n_steps=1,
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False, accelerator="cpu", devices=1,
    )
    trainer.fit(Tiny(), data, data)
    return Path(loggers[0].log_dir) / "metrics.csv", Path(loggers[1].log_dir)


@pytest.mark.slow
def test_lightning_csv_and_tensorboard_loggers_import_every_logged_value(tmp_path: Path, capsys) -> None:
    csv, tb_dir = _lightning_run(tmp_path / "logs")
    capsys.readouterr()
    assert main(["import", "csv", str(csv), str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "train_loss_step -> train/loss" in out and "lr-SGD -> lr/group0" in out and "val_loss -> val/loss" in out
    run = tuidiag.open_run(tmp_path / "runs" / "version_0")
    table = pd.read_csv(csv)
    names = {"train_loss_step": "train/loss", "val_loss": "val/loss", "lr-SGD": "lr/group0",
             "train_loss_epoch": "train_loss_epoch", "epoch": "epoch"}
    assert set(table.columns) == set(names) | {"step"}
    for column, metric in names.items():
        logged = table[table[column].notna()]
        series = run.series(metric)
        np.testing.assert_array_equal(series.steps, logged["step"].to_numpy())
        np.testing.assert_array_equal(series.values, logged[column].to_numpy(np.float64))
    np.testing.assert_allclose(np.unique(run.series("lr/group0").values), [0.0125, 0.025, 0.05])
    assert run.manifest["config"] == {"lr": 0.05}
    assert _diagnosis_codes(run.path, capsys)
    # the same training through Lightning's TensorBoardLogger: the same values, stored as float32
    assert main(["import", "tensorboard", str(tb_dir), str(tmp_path / "runs"), "--name", "tb"]) == 0
    tb_run = tuidiag.open_run(tmp_path / "runs" / "tb")
    assert tb_run.manifest["config"] == {"lr": 0.05}
    for metric in ("train/loss", "val/loss", "lr/group0", "train_loss_epoch"):
        ours, theirs = tb_run.series(metric), run.series(metric)
        np.testing.assert_array_equal(ours.steps, theirs.steps)
        np.testing.assert_array_equal(ours.values, theirs.values.astype(np.float32))
