"""The Lightning callback on real CPU fits: pre-clip gradients, LR, loss, validation, DDP, errors contained."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import torch
from torch import nn

import tuidiag
from tests.conftest import full_only
from tests.lazy_module import LazyModule, installed
from tuidiag.cli.main import main

pytestmark = pytest.mark.skipif(not installed("lightning"), reason="needs lightning")
helpers = LazyModule("tests.lightning_helpers")
"""The tiny LightningModule and its trainer (Lightning is imported when a test first uses them, not when this file is collected)."""

CLIP = 30.0
"""Gradient norms of the tiny regression run between about 20 and 70."""
HELPERS = Path(__file__).resolve().parent / "lightning_helpers.py"


def _fit(run_dir: Path, model: nn.Module | None = None, **trainer_kwargs) -> nn.Module:
    train_loader, val_loader = helpers.loaders()
    model = model or helpers.TinyRegressor(lr=0.02)
    callback = helpers.TuidiagCallback(run_dir, config={"batch_size": 8}, flush_interval=0.2,
                               weights_every=4, activations_every=4)
    helpers.quiet_trainer(callback, **trainer_kwargs).fit(model, train_loader, val_loader)
    return model


def test_fit_with_clipping_records_pre_clip_gradients_lr_loss_and_validation(run_dir) -> None:
    model = _fit(run_dir, max_epochs=3, gradient_clip_val=CLIP, accumulate_grad_batches=2)
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished"
    # 8 batches per epoch, accumulated by 2: one recorded step per optimizer step
    loss = run.series("train/loss")
    assert loss.steps.tolist() == list(range(12))
    total = run.series("grad_norm/total").values
    assert np.allclose(total, model.own_grad_norms, rtol=1e-5)  # the module's own hook runs before clipping too
    assert total.max() > CLIP > total.min()  # some steps are clipped by the trainer, some not
    assert run.series("grad/clipped").values.tolist() == (total > CLIP).astype(float).tolist()
    assert np.allclose(run.series("grad/max_norm").values, CLIP)
    # StepLR halves the LR each epoch (4 optimizer steps)
    assert np.allclose(run.series("lr/group0").values, 0.02 * 0.5 ** (np.arange(12) // 4))
    val = run.series("val_loss")
    assert val.steps.tolist() == [3, 7, 11] and val.values[-1] < val.values[0]  # sanity check not recorded
    assert loss.values[-1] < loss.values[0]
    assert len(run.series("input/mean")) == 12 and len(run.series("time/data_wait")) == 11
    # Lightning runs the closure inside optimizer.step(): the weight hooks see the step index one late
    assert run.series("weight_norm/net.0.weight").steps.tolist() == [1, 5, 9]
    # activations of the first micro-batch of sampled steps only, no "#2" from the second micro-batch
    assert run.series("act/dead_frac/net.1").steps.tolist() == [0, 4, 8]
    assert not [name for name in run.metric_names if "#" in name]
    assert run.manifest["config"]["lr"] == 0.02 and run.manifest["config"]["batch_size"] == 8
    assert run.manifest["config"]["trainer"]["accumulate_grad_batches"] == 2
    assert run.manifest["max_grad_norm"] == CLIP
    assert not [e for e in run.events if e.kind == "recorder_error"]


def test_loss_is_the_mean_over_accumulated_micro_batches(run_dir) -> None:
    torch.manual_seed(0)
    model = helpers.TinyRegressor(lr=0.02)
    initial = copy.deepcopy(model.net)
    _fit(run_dir, model, max_epochs=1, accumulate_grad_batches=4)
    run = tuidiag.open_run(run_dir)
    loss = run.series("train/loss")
    assert loss.steps.tolist() == [0, 1]
    train_loader, _ = helpers.loaders()
    with torch.no_grad():
        first_four = [nn.functional.mse_loss(initial(x), y).item() for x, y in list(train_loader)[:4]]
    assert loss.values[0] == pytest.approx(np.mean(first_four), rel=1e-5)


def test_validate_after_fit_leaves_the_closed_run_alone(run_dir) -> None:
    callback = helpers.TuidiagCallback(run_dir)
    train_loader, val_loader = helpers.loaders()
    trainer = helpers.quiet_trainer(callback, max_epochs=1)
    model = helpers.TinyRegressor()
    trainer.fit(model, train_loader, val_loader)
    before = tuidiag.open_run(run_dir).series("val_loss").steps.tolist()
    trainer.validate(model, val_loader, verbose=False)
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished" and run.series("val_loss").steps.tolist() == before == [7]


def test_a_fit_from_a_checkpoint_continues_the_run_and_a_new_fit_never_mixes(tmp_path) -> None:
    run_dir, ckpt = tmp_path / "run", tmp_path / "epoch1.ckpt"
    train_loader, val_loader = helpers.loaders()

    def fit(epochs: int, ckpt_path: Path | None = None) -> Any:
        trainer = helpers.quiet_trainer(helpers.TuidiagCallback(run_dir, flush_interval=0.2), max_epochs=epochs)
        trainer.fit(helpers.TinyRegressor(lr=0.02), train_loader, val_loader, ckpt_path=ckpt_path)
        return trainer

    fit(1).save_checkpoint(ckpt)  # 8 steps: 0-7
    fit(3, ckpt)  # resumed at global_step 8: steps 8-23 continue the run
    fit(2, ckpt)  # resumed from the older checkpoint again: 8-15 replace the abandoned 8-23
    run = tuidiag.open_run(run_dir)
    loss = run.series("train/loss")
    assert loss.steps.tolist() == list(range(16))  # each step once
    assert [(e.step, e.data["from_step"], e.data["previous_last_step"]) for e in run.resumes] == [(8, 8, 7), (8, 8, 23)]
    assert (loss.wall_times[:8] < run.resumes[0].wall_time).all() and (loss.wall_times[8:] > run.resumes[1].wall_time).all()
    assert run.series("val_loss").steps.tolist() == [7, 15] and run.last_step == 15
    fit(1)  # a new Trainer (global_step 0): a new run next to it
    assert tuidiag.open_run(tmp_path / "run-1").series("train/loss").steps.tolist() == list(range(8))
    assert tuidiag.open_run(run_dir).series("train/loss").steps.tolist() == list(range(16))


def test_diagnose_reads_a_lightning_run(run_dir, capsys) -> None:
    _fit(run_dir, max_epochs=2, gradient_clip_val=1.0)
    assert main(["diagnose", str(run_dir), "--json"]) == 0
    assert '"findings"' in capsys.readouterr().out


def test_an_exception_in_training_closes_the_run_as_failed(run_dir) -> None:
    class Exploding(helpers.TinyRegressor):
        def training_step(self, batch, batch_idx):
            if self.global_step == 3:
                raise RuntimeError("boom")
            return super().training_step(batch, batch_idx)

    train_loader, val_loader = helpers.loaders()
    trainer = helpers.quiet_trainer(helpers.TuidiagCallback(run_dir), max_epochs=1)
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit(Exploding(), train_loader, val_loader)
    run = tuidiag.open_run(run_dir)
    assert run.status == "failed" and run.series("train/loss").steps.tolist() == [0, 1, 2]


def test_errors_inside_the_callback_never_reach_the_training(tmp_path, capsys) -> None:
    callback = helpers.TuidiagCallback(5)  # type: ignore[arg-type]  # Recorder raises ArgumentError: reported once, training goes on
    train_loader, val_loader = helpers.loaders()
    trainer = helpers.quiet_trainer(callback, max_epochs=1)
    trainer.fit(helpers.TinyRegressor(), train_loader, val_loader)
    assert trainer.global_step == 8 and callback.recorder is None
    assert capsys.readouterr().err.count("recorder error in callback.on_train_start") == 1


def test_the_callback_pickles_before_the_fit_as_ddp_spawn_needs(run_dir) -> None:
    """``ddp_spawn`` sends the callback to its processes by pickle: it holds nothing until the fit starts."""
    callback = helpers.TuidiagCallback(run_dir, config={"batch_size": 8}, flush_interval=0.2)
    copied = pickle.loads(pickle.dumps(callback))
    assert (copied.run_dir, copied.config, copied.recorder_kwargs) == (run_dir, {"batch_size": 8}, {"flush_interval": 0.2})
    assert copied.recorder is None


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", pytest.param("ddp_spawn", marks=full_only)])
def test_ddp_on_cpu_writes_shards_of_both_ranks(tmp_path, python, strategy) -> None:
    """Both ranks record into one run. ``ddp``: two ranks as torchrun starts them, forked from one
    interpreter that imported Lightning once (``tests/rank_forks.py``). ``ddp_spawn`` (full run only)
    proves the same through the same callback hooks, with three interpreters importing Lightning (5 s
    of CPU each); what it needs besides, a callback that pickles, is tested above."""
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(HELPERS.parent.parent), OMP_NUM_THREADS="1")
    result = subprocess.run([python, str(HELPERS), str(run_dir), strategy], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    names = sorted(p.name for p in (run_dir / "metrics").glob("*.parquet"))
    assert {n.split("-")[0] for n in names} == {"r0", "r1"}
    run = tuidiag.open_run(run_dir)
    assert run.ranks == [0, 1] and run.manifest["world_size"] == 2 and run.status == "finished"
    # 64 samples, 2 ranks, batch 8: 4 steps per epoch on each rank, 2 epochs
    for rank in (0, 1):
        assert run.series("train/loss", rank=rank).steps.tolist() == list(range(8))
        assert len(run.series("val_loss", rank=rank)) == 2
    # DDP all-reduces the gradients before Lightning's hook: both ranks see the same norms
    norms = [run.series("grad_norm/total", rank=rank).values for rank in (0, 1)]
    assert np.allclose(norms[0], norms[1], rtol=1e-5)
