"""A tiny real LightningModule for the integration tests (also run as a script by the DDP test)."""

from __future__ import annotations

import sys

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tuidiag.integrations.lightning import TuidiagCallback, TuidiagLogger  # noqa: F401  (the logger test's)


class TinyRegressor(pl.LightningModule):
    """A ReLU MLP on a synthetic regression task; keeps its own pre-clip gradient norms to compare with."""

    def __init__(self, lr: float = 0.5, hidden: int = 16) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.own_grad_norms: list[float] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.net(x), y))

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        self.own_grad_norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))

    def configure_optimizers(self) -> dict:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


class LoggingMae(TinyRegressor):
    """Logs a training metric every step and a validation metric every epoch (the logger test's module)."""

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.log("train_mae", (self.net(batch[0]) - batch[1]).abs().mean())
        return loss


def loaders(n: int = 64, batch_size: int = 8, seed: int = 0) -> tuple[DataLoader, DataLoader]:
    """Train and validation loaders of a noisy linear target (scaled up so early gradients are large)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=gen) * 3
    y = x @ torch.tensor([[2.0], [-1.0], [0.5], [3.0]]) + 0.1 * torch.randn(n, 1, generator=gen)
    train = DataLoader(TensorDataset(x, y), batch_size=batch_size)
    val = DataLoader(TensorDataset(x[:16], y[:16]), batch_size=batch_size)
    return train, val


def quiet_trainer(callback: TuidiagCallback, **kwargs) -> pl.Trainer:
    """A CPU trainer without logger, checkpoints, progress bar or model summary."""
    settings = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
    settings.update(kwargs)
    return pl.Trainer(callbacks=[callback], **settings)


def fit_on_two_ranks(run_dir: str, strategy: str) -> None:
    """The DDP test's fit, on two CPU ranks with ``strategy``."""
    pl.seed_everything(0, verbose=False)
    train_loader, val_loader = loaders()
    trainer = quiet_trainer(TuidiagCallback(run_dir, flush_interval=0.2), strategy=strategy, devices=2,
                            max_epochs=2, gradient_clip_val=1.0)
    trainer.fit(TinyRegressor(lr=0.01), train_loader, val_loader)


if __name__ == "__main__":  # the DDP test: python tests/lightning_helpers.py RUN_DIR STRATEGY
    if sys.argv[2] == "ddp":  # two ranks as torchrun starts them, forked once Lightning is imported
        from tests.rank_forks import fork_ranks

        sys.exit(fork_ranks(2, lambda: fit_on_two_ranks(sys.argv[1], "ddp")))
    fit_on_two_ranks(sys.argv[1], sys.argv[2])  # ddp_spawn: Lightning starts its processes itself
