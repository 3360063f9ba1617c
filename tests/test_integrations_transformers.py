"""The Transformers callback on a real Trainer with a tiny randomly initialised GPT-2 (nothing downloaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tuidiag
from tests.lazy_module import LazyModule, installed
from tuidiag.cli.main import main

pytestmark = pytest.mark.skipif(not installed("transformers", "accelerate"), reason="needs transformers and accelerate")
helpers = LazyModule("tests.transformers_helpers")
"""The tiny GPT-2 and its Trainer (Transformers is imported when a test first uses them, not when this file is collected)."""
callbacks = LazyModule("tuidiag.integrations.transformers")

HELPERS = Path(__file__).resolve().parent / "transformers_helpers.py"


def _logged(trainer: Any, key: str) -> tuple[list[int], list[float]]:
    rows = [row for row in trainer.state.log_history if key in row]
    return [row["step"] - 1 for row in rows], [row[key] for row in rows]


@pytest.fixture(scope="module")
def clipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """One training with clipping and accumulation (the defaults of ``train``), read by several tests."""
    tmp_path = tmp_path_factory.mktemp("clipped")
    return helpers.train(tmp_path, tmp_path / "run", max_grad_norm=1.0), tmp_path / "run"


def test_trainer_run_records_pre_clip_grad_norm_loss_lr_and_eval_loss(clipped: tuple[Any, Path]) -> None:
    trainer, run_dir = clipped
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished"
    loss = run.series("train/loss")
    assert loss.steps.tolist() == list(range(12))
    steps, logged_loss = _logged(trainer, "loss")
    assert steps == list(range(12)) and np.allclose(loss.values, logged_loss, rtol=1e-4)
    # the Trainer logs the norm clip_grad_norm_ returns: the pre-clip total
    _, logged_norm = _logged(trainer, "grad_norm")
    total = run.series("grad_norm/total").values
    assert np.allclose(total, logged_norm, rtol=1e-4)
    assert total.max() > 1.0  # clipped steps are recorded with their pre-clip norm
    assert run.series("grad/clipped").values.tolist() == (total > 1.0).astype(float).tolist()
    _, logged_lr = _logged(trainer, "learning_rate")
    assert np.allclose(run.series("lr/group0").values, logged_lr, rtol=1e-6)
    eval_steps, eval_loss = _logged(trainer, "eval_loss")
    recorded_eval = run.series("eval/loss")
    assert recorded_eval.steps.tolist() == eval_steps == [3, 7, 11] and np.allclose(recorded_eval.values, eval_loss)
    assert not run.has("eval/runtime")
    assert run.series("input/max").values.max() < helpers.VOCAB and len(run.series("input/max")) == 12
    assert len(run.series("grad_norm/transformer.wte.weight")) == 12
    # the output layer is tied to the embedding (one parameter); optimizer.step() runs after the recorded step
    assert run.series("weight_norm/transformer.wte.weight").steps.tolist() == [0, 5, 10]
    config = run.manifest["config"]
    assert config["lr"] == 5e-3 and config["batch_size"] == 4 * 2 and config["task"] == "increment"
    assert config["training_args"]["gradient_accumulation_steps"] == 2 and config["model_config"]["n_embd"] == 32
    assert not [e for e in run.events if e.kind == "recorder_error"]


def test_without_clipping_or_accumulation(tmp_path, run_dir) -> None:
    trainer = helpers.train(tmp_path, run_dir, max_grad_norm=0.0, accumulation=1)
    run = tuidiag.open_run(run_dir)
    _, logged_norm = _logged(trainer, "grad_norm")
    assert np.allclose(run.series("grad_norm/total").values, logged_norm, rtol=1e-4)
    assert not run.has("grad/clipped") and run.manifest["max_grad_norm"] is None
    _, logged_loss = _logged(trainer, "loss")
    assert np.allclose(run.series("train/loss").values, logged_loss, rtol=1e-4)


def test_a_training_from_a_checkpoint_continues_the_run_and_a_new_one_never_mixes(tmp_path, run_dir) -> None:
    helpers.train(tmp_path, run_dir, max_steps=8, save_steps=4)  # steps 0-7, checkpoints after 4 and 8 steps
    helpers.train(tmp_path, run_dir, max_steps=10, resume_from=str(tmp_path / "out" / "checkpoint-4"))  # 4-9 replace 4-7
    run = tuidiag.open_run(run_dir)
    loss = run.series("train/loss")
    assert loss.steps.tolist() == list(range(10))  # each step once
    assert [(e.step, e.data["previous_last_step"]) for e in run.resumes] == [(4, 7)]
    assert (loss.wall_times[:4] < run.resumes[0].wall_time).all() and (loss.wall_times[4:] > run.resumes[0].wall_time).all()
    helpers.train(tmp_path, run_dir, max_steps=2)  # a new Trainer: a new run next to it
    assert tuidiag.open_run(tmp_path / "run-1").series("train/loss").steps.tolist() == [0, 1]
    assert tuidiag.open_run(run_dir).series("train/loss").steps.tolist() == list(range(10))


def test_diagnose_reads_a_transformers_run(clipped: tuple[Any, Path], capsys) -> None:
    assert main(["diagnose", str(clipped[1])]) == 0
    assert capsys.readouterr().out.strip()


def test_eval_metric_names() -> None:
    assert callbacks.eval_metric_name("eval_loss") == "eval/loss"
    assert callbacks.eval_metric_name("eval_accuracy") == "eval/accuracy"
    assert callbacks.eval_metric_name("test_f1_macro") == "test/f1_macro"
    assert callbacks.eval_metric_name("custom") == "custom"


def test_errors_inside_the_callback_never_reach_the_training(tmp_path, capsys) -> None:
    trainer = helpers.train(tmp_path, 5, max_steps=3)  # type: ignore[arg-type]  # not a path: Recorder raises ArgumentError
    assert trainer.state.global_step == 3
    assert capsys.readouterr().err.count("recorder error in callback.on_train_begin") == 1


@pytest.mark.slow
def test_ddp_ranks_record_the_all_reduced_pre_clip_gradients(tmp_path) -> None:
    """Two ranks with the environment ``torchrun --nproc-per-node 2`` gives its workers, forked from one
    interpreter that imported transformers once (``tests/rank_forks.py``)."""
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(HELPERS.parent.parent), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(HELPERS), str(tmp_path), str(run_dir)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    run = tuidiag.open_run(run_dir)
    assert run.ranks == [0, 1] and run.manifest["world_size"] == 2 and run.status == "finished"
    norms = [run.series("grad_norm/total", rank=rank) for rank in (0, 1)]
    assert norms[0].steps.tolist() == norms[1].steps.tolist() == list(range(6))
    # recorded after DDP's all-reduce (identical on both ranks; before it they differ) and before clipping to 1.0
    assert np.allclose(norms[0].values, norms[1].values, rtol=1e-5) and norms[0].values.max() > 1.0
    losses = [run.series("train/loss", rank=rank).values for rank in (0, 1)]
    assert not np.allclose(losses[0], losses[1])  # each rank's own batches
    assert run.series("eval/loss", rank=1).steps.tolist() == [3, 5]  # every 4 steps and at the end
