"""``TuidiagLogger``: what a LightningModule logs with ``self.log`` lands in the run, checked against CSVLogger.

Lightning's own ``CSVLogger`` runs beside it in the same fit, so every value the
tuidiag run holds is compared with what Lightning wrote for the same call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import tuidiag
from tests.lazy_module import LazyModule, installed
from tuidiag.format import LOSS, STATUS_FINISHED

pytestmark = pytest.mark.skipif(not installed("lightning"), reason="needs lightning")
pl = LazyModule("lightning.pytorch")
helpers = LazyModule("tests.lightning_helpers")
"""Lightning, its CSVLogger and the tiny module are imported when a test first uses them, not when this file is collected."""


def _fit(loggers: list, callbacks: list, epochs: int = 2) -> None:
    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(callbacks=callbacks, logger=loggers, accelerator="cpu", devices=1, max_epochs=epochs,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         log_every_n_steps=1)
    train, val = helpers.loaders()
    trainer.fit(helpers.LoggingMae(lr=0.01), train, val)


def _csv(root: Path) -> pd.DataFrame:
    (path,) = root.rglob("metrics.csv")
    return pd.read_csv(path)


def test_bound_logger_writes_training_step_values_beside_the_callbacks_rows(tmp_path: Path) -> None:
    callback = helpers.TuidiagCallback(tmp_path / "r", flush_interval=0.2)
    _fit([pl.loggers.CSVLogger(tmp_path / "csv"), callback.logger], [callback])
    run = tuidiag.open_run(tmp_path / "r")
    mae, loss = run.series("train_mae"), run.series(LOSS)
    assert mae.steps.tolist() == loss.steps.tolist() == list(range(16))  # one value per optimizer step, same steps
    expected = _csv(tmp_path / "csv")["train_mae"].dropna().to_numpy()
    assert mae.values == pytest.approx(expected, rel=1e-6)
    val = run.series("val_loss")
    assert val.steps.tolist() == [7, 15]  # once per validation, not twice (the callback leaves them to the logger)
    assert val.values == pytest.approx(_csv(tmp_path / "csv")["val_loss"].dropna().to_numpy(), rel=1e-6)
    config = json.loads((tmp_path / "r" / "run.json").read_text())["config"]
    assert config["lr"] == 0.01 and config["hidden"] == 16


def test_logger_on_its_own_writes_at_lightnings_steps_and_closes_finished(tmp_path: Path) -> None:
    logger = helpers.TuidiagLogger(tmp_path / "own", flush_interval=0.2)
    _fit([pl.loggers.CSVLogger(tmp_path / "csv"), logger], [], epochs=1)
    run = tuidiag.open_run(tmp_path / "own")
    table = _csv(tmp_path / "csv").dropna(subset=["train_mae"])
    assert run.series("train_mae").steps.tolist() == table["step"].tolist()
    assert run.series("train_mae").values == pytest.approx(table["train_mae"].to_numpy(), rel=1e-6)
    assert run.status == STATUS_FINISHED
    assert json.loads((tmp_path / "own" / "run.json").read_text())["config"]["lr"] == 0.01


def test_the_logger_needs_exactly_one_destination(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="run_dir or a callback"):
        helpers.TuidiagLogger()
    with pytest.raises(ValueError, match="not both"):
        helpers.TuidiagLogger(tmp_path, callback=helpers.TuidiagCallback(tmp_path / "r"))
