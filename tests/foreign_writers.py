"""Other trackers' real writers, driven line by line from stdin (run as a subprocess by the tests).

``python -m tests.foreign_writers KIND=PATH [KIND=PATH ...]`` starts one writer of each
kind (one process: torch is imported once), prints ``ready`` and then, for each line
``KIND STEP LOSS [VAL]`` read, logs the training loss, a learning rate and (given ``VAL``) a
validation loss at that step with that writer, flushes the way the tool flushes, and prints ``flushed KIND <time.time()>``
after the flush returned. ``quit`` (or end of input) closes every writer.

Kinds: ``tensorboard`` (torch's ``SummaryWriter``), ``wandb`` (``wandb.init`` in offline mode; it writes its ``.wandb`` file every
``x_transaction_log_flush_interval`` seconds, 15 by default, here 0.2, and a row given an
explicit ``step`` only once committed: here at once),
``lightning`` (Lightning's ``CSVLogger``), ``keras`` (the file Keras' ``CSVLogger`` writes:
``epoch,loss,lr``, one flushed row per epoch, written with the csv module as Keras does).
"""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path
from typing import Callable


Log = Callable[[int, float, "float | None"], None]


def tensorboard(path: Path) -> tuple[Log, Callable[[], None]]:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(path))

    def log(step: int, loss: float, val: float | None) -> None:
        writer.add_scalar("Loss/train", loss, step)
        writer.add_scalar("learning_rate", 0.01, step)
        if val is not None:
            writer.add_scalar("Loss/val", val, step)
        writer.flush()

    return log, writer.close


def wandb_offline(path: Path) -> tuple[Log, Callable[[], None]]:
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true", WANDB_CONSOLE="off")
    import wandb

    run = wandb.init(project="tuidiag-test", dir=str(path), config={"lr": 0.01, "model": {"width": 8}},
                     settings=wandb.Settings(x_stats_sampling_interval=1.0, x_transaction_log_flush_interval=0.2))

    def log(step: int, loss: float, val: float | None) -> None:
        run.log({"train_loss": loss, "lr": 0.01, **({} if val is None else {"val_loss": val})}, step=step, commit=True)

    return log, run.finish


def lightning(path: Path) -> tuple[Log, Callable[[], None]]:
    from lightning.fabric.loggers import CSVLogger  # the same metrics.csv writer as lightning.pytorch's, lighter to import

    logger = CSVLogger(str(path), name="lightning_logs")

    def log(step: int, loss: float, val: float | None) -> None:  # a first val_loss makes it rewrite the file (new header)
        logger.log_metrics({"train_loss": loss, "lr-Adam": 0.01, **({} if val is None else {"val_loss": val})}, step=step)
        logger.save()

    return log, lambda: logger.finalize("success")


def keras(path: Path) -> tuple[Log, Callable[[], None]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "w", newline="")
    writer = csv.DictWriter(handle, fieldnames=["epoch", "loss", "lr", "val_loss"])
    writer.writeheader()

    def log(step: int, loss: float, val: float | None) -> None:  # Keras writes "NA" for a key missing that epoch
        writer.writerow({"epoch": step, "loss": loss, "lr": 0.01, "val_loss": "NA" if val is None else val})
        handle.flush()

    return log, handle.close


WRITERS = {"tensorboard": tensorboard, "wandb": wandb_offline, "lightning": lightning, "keras": keras}


def main() -> None:
    writers = {}
    for argument in sys.argv[1:]:
        kind, path = argument.split("=", 1)
        writers[kind] = WRITERS[kind](Path(path))
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        kind, step, loss, *val = line.split()
        writers[kind][0](int(step), float(loss), float(val[0]) if val else None)
        print(f"flushed {kind} {time.time()!r}", flush=True)
    for _, close in writers.values():
        close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
