"""A tiny randomly initialised GPT-2 trained by a real ``Trainer`` (also run as a script by the DDP test)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from tuidiag.integrations.transformers import TuidiagCallback

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


def train(tmp_path: Path, run_dir: Path, max_grad_norm: float = 1.0, accumulation: int = 2,
          max_steps: int = 12, save_steps: int | None = None, resume_from: str | None = None) -> Trainer:
    """Train for ``max_steps`` optimizer steps with the callback recording into ``run_dir``
    (checkpoints every ``save_steps``; resumed from the checkpoint ``resume_from``)."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], max_steps=max_steps, learning_rate=5e-3,
        per_device_train_batch_size=4, gradient_accumulation_steps=accumulation, max_grad_norm=max_grad_norm,
        logging_steps=1, eval_strategy="steps", eval_steps=4, save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500, disable_tqdm=True,
        lr_scheduler_type="linear", warmup_steps=2, seed=0,
    )
    callback = TuidiagCallback(run_dir, config={"task": "increment"}, flush_interval=0.2, weights_every=5)
    trainer = Trainer(model=model, args=args, train_dataset=TokenDataset(96, 1), eval_dataset=TokenDataset(16, 2),
                      callbacks=[callback])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: extra threads only contend on a shared CPU (17 s instead of 1 s)
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    finally:
        torch.set_num_threads(threads)
    return trainer


if __name__ == "__main__":  # the DDP test: python tests/transformers_helpers.py TMP RUN_DIR
    from tests.rank_forks import fork_ranks  # two ranks as torchrun starts them, forked once transformers is imported

    sys.exit(fork_ranks(2, lambda: train(Path(sys.argv[1]), Path(sys.argv[2]), max_grad_norm=1.0, accumulation=2,
                                         max_steps=6)))
