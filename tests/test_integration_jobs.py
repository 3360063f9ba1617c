"""Live jobs on runs recorded through the Lightning and Transformers callbacks (real frameworks).

A request written mid-training must run inside it with the framework's own loss
(``training_step``; the model's ``loss`` with the batch's labels), and the training
must go on bit-identically: the same recorded losses, the same values logged with
``self.log``, the same final weights. A Lightning module with manual optimization
refuses jobs at once, saying why.
"""

from __future__ import annotations

import gc
import shutil
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tests.lazy_module import LazyModule, installed
from tuidiag.integrations.job_loss import MANUAL_OPTIMIZATION, WholeBatches
from tuidiag.store import control_channel as ctl
from tuidiag.store import open_run
from tuidiag.store.job_results import read_result

trainings = LazyModule("tests.integration_jobs_trainings")
"""The trainings (Lightning and Transformers are imported when a test first runs one, not when this file is collected)."""
pytestmark = pytest.mark.skipif(not installed("lightning", "transformers"), reason="needs lightning and transformers")
JOBS = [("lr_find", {"steps": 12}), ("overfit_batch", {"steps": 8}), ("sharpness", {"samples": 2, "batches": 2})]


def _same_training(plain: tuple[nn.Module, Path], with_job: tuple[nn.Module, Path], logged: tuple[str, ...]) -> None:
    (model_a, dir_a), (model_b, dir_b) = plain, with_job
    assert all(torch.equal(a, b) for a, b in zip(model_a.state_dict().values(), model_b.state_dict().values()))
    run_a, run_b = open_run(dir_a), open_run(dir_b)
    for name in ("train/loss", *logged):
        a, b = run_a.series(name), run_b.series(name)
        assert len(a) and a.steps.tolist() == b.steps.tolist() and a.values.tolist() == b.values.tolist(), name


def _done(run_dir: Path, request_id: str | None, job: str) -> dict[str, Any]:
    assert request_id is not None
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "done", status
    record = read_result(run_dir / status["result"])
    assert record["job"] == job and record["source"] == "live"
    return record["result"]


@pytest.fixture(scope="module")
def lightning_plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, Path]:
    run_dir = tmp_path_factory.mktemp("lightning") / "plain"
    return trainings.lightning(run_dir, lambda: trainings.LoggingRegressor(lr=0.01), None)[0], run_dir


@pytest.mark.parametrize("job", JOBS, ids=lambda j: j[0])
def test_lightning_jobs_run_training_step_and_leave_the_training_as_it_was(tmp_path, lightning_plain, job) -> None:
    model, request_id = trainings.lightning(tmp_path / "r", lambda: trainings.LoggingRegressor(lr=0.01), job)
    result = _done(tmp_path / "r", request_id, job[0])
    if job[0] == "lr_find":
        assert result["steps_run"] > 5 and result["suggested_lr"] > 0
    _same_training(lightning_plain, (model, tmp_path / "r"), logged=("train_mse_step",))


def test_lightning_manual_optimization_refuses_jobs_saying_why(tmp_path) -> None:
    module, request_id = trainings.lightning(tmp_path / "r", trainings.ManualRegressor, JOBS[0])
    status = ctl.read_status(tmp_path / "r", request_id)
    assert status["state"] == "failed" and MANUAL_OPTIMIZATION in status["message"]
    assert len(open_run(tmp_path / "r").series("train/loss")) == 8  # the training went on to its end


@pytest.fixture(scope="module")
def transformers_plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, Path]:
    root = tmp_path_factory.mktemp("transformers")
    return trainings.transformers(root / "out", root / "plain", None)[0], root / "plain"


@pytest.mark.parametrize("job", JOBS[:1], ids=lambda j: j[0])  # the other jobs take the loss the same way (Lightning runs them all)
def test_transformers_jobs_call_the_model_with_the_labels_and_leave_the_training_as_it_was(tmp_path, transformers_plain,
                                                                                         job) -> None:
    model, request_id = trainings.transformers(tmp_path / "out", tmp_path / "r", job)
    _done(tmp_path / "r", request_id, job[0])
    _same_training(transformers_plain, (model, tmp_path / "r"), logged=("train/loss_trainer",))
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


def test_whole_batches_give_back_only_what_they_kept_and_let_go_with_the_recorder() -> None:
    whole = WholeBatches(most=2)
    xs = [torch.zeros(1) for _ in range(3)]
    for i, x in enumerate(xs):
        whole.keep(x, {"input_ids": x, "i": i})
    assert [whole.of(x)["i"] for x in xs[1:]] == [1, 2] and whole.of(xs[2])["input_ids"] is xs[2]
    for stranger in (xs[0], torch.zeros(1)):  # evicted, or never given
        with pytest.raises(ValueError, match="not kept whole"):
            whole.of(stranger)
    x, labels = torch.zeros(2), torch.ones(2)
    whole.keep(x, (x, labels))
    assert whole.of(x)[1] is labels
    gone = weakref.ref(labels)
    del x, labels  # the recorder let x go: at the next keep its batch's other tensors go too
    whole.keep(xs[0], [xs[0]])
    gc.collect()
    assert gone() is None and whole.of(xs[0]) == [xs[0]]
