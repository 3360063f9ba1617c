"""The Transformers callback on a real Trainer with a tiny randomly initialised GPT-2 (nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

import tuidiag  # noqa: E402
from tuidiag.cli.main import main  # noqa: E402
from tuidiag.integrations.transformers import TuidiagCallback, eval_metric_name  # noqa: E402

VOCAB, SEQ = 100, 16


class TokenDataset(torch.utils.data.Dataset):
    """Random token sequences with a learnable pattern (each token repeats the previous one plus one)."""

    def __init__(self, n: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        start = torch.randint(0, VOCAB, (n, 1), generator=gen)
        self.ids = (start + torch.arange(SEQ)) % VOCAB

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _train(tmp_path: Path, run_dir: Path, max_grad_norm: float = 1.0, accumulation: int = 2) -> Trainer:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], max_steps=12, learning_rate=5e-3,
        per_device_train_batch_size=4, gradient_accumulation_steps=accumulation, max_grad_norm=max_grad_norm,
        logging_steps=1, eval_strategy="steps", eval_steps=4, save_strategy="no", disable_tqdm=True,
        lr_scheduler_type="linear", warmup_steps=2, seed=0,
    )
    callback = TuidiagCallback(run_dir, config={"task": "increment"}, flush_interval=0.2, weights_every=5)
    trainer = Trainer(model=model, args=args, train_dataset=TokenDataset(96, 1), eval_dataset=TokenDataset(16, 2),
                      callbacks=[callback])
    trainer.train()
    return trainer


def _logged(trainer: Trainer, key: str) -> tuple[list[int], list[float]]:
    rows = [row for row in trainer.state.log_history if key in row]
    return [row["step"] - 1 for row in rows], [row[key] for row in rows]


def test_trainer_run_records_pre_clip_grad_norm_loss_lr_and_eval_loss(tmp_path, run_dir) -> None:
    trainer = _train(tmp_path, run_dir, max_grad_norm=1.0)
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
    assert run.series("input/max").values.max() < VOCAB and len(run.series("input/max")) == 12
    assert len(run.series("grad_norm/transformer.wte.weight")) == 12
    assert run.series("weight_norm/lm_head.weight").steps.tolist() == [0, 5, 10] or run.has("weight_norm/transformer.wte.weight")
    config = run.manifest["config"]
    assert config["lr"] == 5e-3 and config["batch_size"] == 4 and config["task"] == "increment"
    assert config["training_args"]["gradient_accumulation_steps"] == 2 and config["model_config"]["n_embd"] == 32
    assert not [e for e in run.events if e.kind == "recorder_error"]


def test_without_clipping_or_accumulation(tmp_path, run_dir) -> None:
    trainer = _train(tmp_path, run_dir, max_grad_norm=0.0, accumulation=1)
    run = tuidiag.open_run(run_dir)
    _, logged_norm = _logged(trainer, "grad_norm")
    assert np.allclose(run.series("grad_norm/total").values, logged_norm, rtol=1e-4)
    assert not run.has("grad/clipped") and run.manifest["max_grad_norm"] is None
    _, logged_loss = _logged(trainer, "loss")
    assert np.allclose(run.series("train/loss").values, logged_loss, rtol=1e-4)


def test_diagnose_reads_a_transformers_run(tmp_path, run_dir, capsys) -> None:
    _train(tmp_path, run_dir)
    assert main(["diagnose", str(run_dir)]) == 0
    assert capsys.readouterr().out.strip()


def test_eval_metric_names() -> None:
    assert eval_metric_name("eval_loss") == "eval/loss"
    assert eval_metric_name("eval_accuracy") == "eval/accuracy"
    assert eval_metric_name("test_f1_macro") == "test/f1_macro"
    assert eval_metric_name("custom") == "custom"
