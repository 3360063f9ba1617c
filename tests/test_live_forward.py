"""``rec.watch(..., forward=fn)``: live jobs on a model called with keyword arguments, as Transformers models are.

A tiny real module whose ``forward(input_ids, attention_mask, labels=None)`` cannot be
called as ``model(x)``. Two batch styles (the whole batch to ``rec.batch(batch)`` with the
loss in the model's output; inputs and labels apart with a loss on the logits) x every
live job: each finishes, and the training after it is bit-identical to one without it.
The regression: without ``forward=`` the job failed with "forward() missing ... 'attention_mask'".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import tuidiag
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import read_result

VOCAB, CLASSES, SEQ, BATCH = 40, 3, 6, 8


class KeywordModel(nn.Module):
    """Called as ``model(**batch)``; returns a dict with ``logits`` and, given ``labels``, ``loss``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1)  # an all-zero mask: 0/0 = NaN
        out = {"logits": self.head(pooled)}
        if labels is not None:
            out["loss"] = F.cross_entropy(out["logits"], labels)
        return out


def _batch(gen: torch.Generator, empty_mask: bool = False) -> dict[str, torch.Tensor]:
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[:, SEQ // 2:] = torch.randint(0, 2, (BATCH, SEQ - SEQ // 2), generator=gen)
    if empty_mask:
        mask[0] = 0
    return {"input_ids": torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen), "attention_mask": mask,
            "labels": torch.randint(0, CLASSES, (BATCH,), generator=gen)}


STYLES: dict[str, dict[str, Any]] = {
    # rec.batch(batch): the labels travel in x, the loss comes out of the model
    "loss-in-output": {"split": lambda b: (b, None), "loss_fn": lambda out, y: out["loss"]},
    # rec.batch(inputs, labels): a loss function on the logits
    "labels-apart": {"split": lambda b: ({k: v for k, v in b.items() if k != "labels"}, b["labels"]),
                     "loss_fn": lambda out, y: F.cross_entropy(out["logits"], y)},
}
FORWARD: Callable[[nn.Module, Any], Any] = lambda model, x: model(**x)  # noqa: E731


def _train(run_dir: Path, style: str, request: tuple[str, dict[str, Any]] | None, forward: Any = FORWARD,
           steps: int = 10, nan_at: int | None = None) -> tuple[list[float], str | None]:
    split, loss_fn = STYLES[style]["split"], STYLES[style]["loss_fn"]
    torch.manual_seed(0)
    model = KeywordModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    losses, request_id = [], None
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        rec.watch(model, optimizer, loss_fn=loss_fn, forward=forward)
        for step in range(steps):
            if request is not None and step == 4:
                request_id = ctl.write_request(run_dir, *request)
                rec.flush()  # the writer thread polls RUN/control at each flush
            batch = _batch(gen, empty_mask=step == nan_at)
            x, y = split(batch)
            rec.batch(x, y)
            loss = loss_fn(model(**x), y)
            loss.backward()
            rec.step(loss)
            if torch.isfinite(loss):
                optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    return losses, request_id


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize("job,args", [("lr_find", {"steps": 10}), ("overfit_batch", {"steps": 5}),
                                      ("sharpness", {"samples": 2, "batches": 2})])
@pytest.mark.parametrize("style", list(STYLES))
def test_a_live_job_runs_on_a_keyword_model(tmp_path: Path, style: str, job: str, args: dict[str, Any]) -> None:
    plain, _ = _train(tmp_path / "plain", style, None)
    losses, request_id = _train(tmp_path / "run", style, (job, args))
    status = ctl.read_status(tmp_path / "run", request_id)
    assert status["state"] == "done", status
    assert read_result(tmp_path / "run" / status["result"])["result"]
    assert losses == plain  # the job restored everything


@pytest.mark.parametrize("style", list(STYLES))
def test_the_live_nan_hunt_replays_through_forward(tmp_path: Path, style: str) -> None:
    """An all-zero attention mask divides 0 by 0 inside the model: the armed hunt replays ``model(**x)``."""
    _, request_id = _train(tmp_path / "run", style, ("nan_hunt", {"steps": 20}), nan_at=7)
    status = ctl.read_status(tmp_path / "run", request_id)
    assert status["state"] == "done", status
    result = read_result(tmp_path / "run" / status["result"])["result"]
    assert result["step"] == 7 and result["pass"] == "forward" and result["op"] == "div", result


def test_without_forward_the_job_fails_and_says_why(tmp_path: Path) -> None:
    """The regression: ``model(x)`` on a keyword model. The job fails; the training goes on."""
    losses, request_id = _train(tmp_path / "run", "labels-apart", ("lr_find", {"steps": 10}), forward=None)
    status = ctl.read_status(tmp_path / "run", request_id)
    assert status["state"] == "failed" and "attention_mask" in status["message"], status
    assert len(losses) == 10


def test_a_forward_that_is_not_callable_is_rejected_and_counted(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=30.0) as rec:
        model = nn.Linear(2, 1)
        rec.watch(model, torch.optim.SGD(model.parameters(), lr=0.1), loss_fn=nn.MSELoss(), forward="model(**x)")
        rec.step(1.0)
    assert any("forward" in str(event.message) for event in tuidiag.open_run(tmp_path / "run").events)
