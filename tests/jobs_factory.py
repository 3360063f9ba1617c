"""Factories for the job tests (``Recorder(..., factory="jobs_factory:<name>")``) and a recording helper.

Each factory builds, on the CPU and deterministically, a small real model with its
optimizer, loss and batches. The ``nan_*`` factories plant one NaN source each;
it fires at step :data:`POISON_STEP` of the batches they return.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

import tuidiag

POISON_STEP = 3
BUILD_CALLS = {"count": 0}
"""How many times a factory of this module was called (the refusal test checks it stays 0)."""


def _blobs(n_batches: int, batch: int = 32, dims: int = 10, classes: int = 3, seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Gaussian blobs, one centre per class: an easy classification with a clear LR range."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dims, generator=gen) * 2.0
    out = []
    for _ in range(n_batches):
        y = torch.randint(0, classes, (batch,), generator=gen)
        out.append((centres[y] + torch.randn(batch, dims, generator=gen), y))
    return out


def healthy() -> dict[str, Any]:
    """MLP with BatchNorm and Dropout (buffers and RNG in play), Adam, cross-entropy, 20 batches."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return {"model": model, "optimizer": optimizer, "loss_fn": nn.CrossEntropyLoss(), "batches": _blobs(20)}


def plain_mlp() -> dict[str, Any]:
    """MLP without randomness in training, SGD with momentum: the LR-finder comparison problem."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    return {"model": model, "optimizer": optimizer, "loss_fn": nn.CrossEntropyLoss(), "batches": _blobs(25, batch=64)}


def broken() -> dict[str, Any]:
    """A model that ignores its input (``x * 0``): it cannot memorise a batch of random labels."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)

    class IgnoresInput(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(10, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x * 0)

    model = IgnoresInput()
    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1), "loss_fn": nn.CrossEntropyLoss(), "batches": _blobs(4)}


# ---- models that cannot train -------------------------------------------------------------

class Detached(nn.Module):
    """Returns its scores detached from the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).detach()


class IntegerOutput(nn.Module):
    """Returns the predicted class (argmax) instead of the scores."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).argmax(1)


class UsesFrozen(nn.Module):
    """The layers forward uses are frozen; the only trainable one is never called."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3)).requires_grad_(False)
        self.unused = nn.Linear(10, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _loss_without_grad_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tensor(F.cross_entropy(out, y).item())


def _loss_as_float(out: torch.Tensor, y: torch.Tensor) -> float:
    return F.cross_entropy(out, y).item()


def untrainable(case: str) -> dict[str, Any]:
    """A small classifier that cannot train, for one ``case`` of :data:`UNTRAINABLE`."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    loss_fn: Any = nn.CrossEntropyLoss()
    if case == "detached_output":
        model: nn.Module = Detached()
    elif case == "integer_output":
        model = IntegerOutput()
    elif case == "some_frozen":
        model = UsesFrozen()
    else:
        model = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    if case == "all_frozen":
        model.requires_grad_(False)
    if case == "loss_without_grad_fn":
        loss_fn = _loss_without_grad_fn
    if case == "loss_per_sample":
        loss_fn = nn.CrossEntropyLoss(reduction="none")
    if case == "loss_as_float":
        loss_fn = _loss_as_float
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"model": model, "optimizer": optimizer, "loss_fn": loss_fn, "batches": _blobs(4)}


UNTRAINABLE = {
    "all_frozen": "all_frozen", "some_frozen": "no_gradient", "detached_output": "detached_output",
    "loss_without_grad_fn": "loss_detached", "integer_output": "integer_output",
    "loss_per_sample": "loss_not_scalar", "loss_as_float": "loss_not_tensor",
}
"""Each case of :func:`untrainable` and the blocker code it must be reported with."""


def all_frozen() -> dict[str, Any]:
    """Every parameter has requires_grad=False."""
    return untrainable("all_frozen")


def some_frozen() -> dict[str, Any]:
    """The used layers are frozen, the trainable one is unused."""
    return untrainable("some_frozen")


def detached_output() -> dict[str, Any]:
    """forward returns ``x.detach()``."""
    return untrainable("detached_output")


def loss_without_grad_fn() -> dict[str, Any]:
    """The loss is rebuilt from ``.item()``: no grad_fn."""
    return untrainable("loss_without_grad_fn")


def integer_output() -> dict[str, Any]:
    """forward returns ``argmax``: an int64 tensor."""
    return untrainable("integer_output")


def loss_per_sample() -> dict[str, Any]:
    """The loss is not reduced (``reduction="none"``)."""
    return untrainable("loss_per_sample")


def loss_as_float() -> dict[str, Any]:
    """The loss function returns ``.item()``: a Python float."""
    return untrainable("loss_as_float")


def head_only() -> dict[str, Any]:
    """A frozen first layer, a trainable head: fine-tuning, which can still memorise a batch."""
    parts = plain_mlp()
    parts["model"][0].requires_grad_(False)
    return parts


def not_a_factory() -> dict[str, Any]:
    """Returns a dict without an optimizer (an invalid factory)."""
    return {"model": nn.Linear(2, 2), "loss_fn": nn.MSELoss()}


# ---- planted NaN sources -----------------------------------------------------------------

def _regression(n: int, dims: int, seed: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.rand(8, dims, generator=gen) + 0.1
        out.append((x, x.sum(1, keepdim=True) + 1.0))
    return out


def nan_log0() -> dict[str, Any]:
    """log(0) in the loss: a log-MSE on a ReLU output that is exactly 0 for one sample."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(fc=nn.Linear(4, 1), act=nn.ReLU()))
    with torch.no_grad():
        model.fc.weight.fill_(0.5)
        model.fc.bias.fill_(0.1)
    batches = _regression(6, 4)
    batches[POISON_STEP][0][0] = -10.0  # this sample's ReLU output is exactly 0

    def log_mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (torch.log(out) - torch.log(y)).pow(2).mean()

    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=1e-3), "loss_fn": log_mse, "batches": batches}


class RowNormalize(nn.Module):
    """Divides each row by its sum (bag-of-words frequencies): 0/0 on an empty row."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.sum(dim=1, keepdim=True)


def nan_div0() -> dict[str, Any]:
    """Division by zero in a custom layer: an all-zero count vector at the poisoned step."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(norm=RowNormalize(), head=nn.Linear(6, 3)))
    gen = torch.Generator().manual_seed(3)
    batches = [(torch.randint(1, 5, (8, 6), generator=gen).float(), torch.randint(0, 3, (8,), generator=gen)) for _ in range(6)]
    batches[POISON_STEP][0][2] = 0.0  # an empty document
    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=1e-2), "loss_fn": nn.CrossEntropyLoss(), "batches": batches}


class NaiveSoftmax(nn.Module):
    """``exp(x) / sum(exp(x))`` without subtracting the maximum: overflows for logits above ~88."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x)
        return e / e.sum(dim=1, keepdim=True)


def nan_overflow() -> dict[str, Any]:
    """Overflow from huge logits: inputs scaled up 1000x at the poisoned step reach the naive softmax."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(fc=nn.Linear(4, 5), softmax=NaiveSoftmax()))
    batches = _blobs(6, batch=8, dims=4, classes=5)
    batches[POISON_STEP] = (batches[POISON_STEP][0] * 1000.0, batches[POISON_STEP][1])

    def nll(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.nll_loss(torch.log(p + 1e-9), y)

    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=1e-2), "loss_fn": nll, "batches": batches}


class MaskedAttention(nn.Module):
    """Hand-written causal self-attention: ``masked_fill(-inf)`` by design, then a naive ``exp`` that overflows."""

    def __init__(self, dims: int) -> None:
        super().__init__()
        self.q = nn.Linear(dims, dims, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q(x)
        scores = q @ q.transpose(1, 2)
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        e = torch.exp(scores)
        return (e / e.sum(-1, keepdim=True)) @ x


def nan_masked_attention() -> dict[str, Any]:
    """The -inf mask is by design; the exp of large scores (inputs scaled 100x at the poisoned step) overflows."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(attn=MaskedAttention(4), head=nn.Flatten(), out=nn.Linear(12, 1)))
    gen = torch.Generator().manual_seed(4)
    batches = [(torch.randn(8, 3, 4, generator=gen), torch.randn(8, 1, generator=gen)) for _ in range(6)]
    batches[POISON_STEP] = (batches[POISON_STEP][0] * 100.0, batches[POISON_STEP][1])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return {"model": model, "optimizer": optimizer, "loss_fn": nn.MSELoss(), "batches": batches}


def nan_batch() -> dict[str, Any]:
    """A NaN in one input batch (a corrupt record)."""
    parts = healthy()
    parts["batches"] = parts["batches"][:6]
    parts["batches"][POISON_STEP][0][5, 7] = float("nan")
    return parts


class SafeLog(torch.autograd.Function):
    """``log(max(|x|, 1e-3))`` whose backward forgets the clamp: ``grad / x`` is inf where x == 0."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.log(x.abs().clamp(min=1e-3))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad / x


class SafeLogAct(nn.Module):
    """The activation that uses :class:`SafeLog`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SafeLog.apply(x)


def nan_backward_inf() -> dict[str, Any]:
    """inf only in the backward pass of a custom autograd.Function (an all-zero input row)."""
    BUILD_CALLS["count"] += 1
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(4, 6, bias=False), act=SafeLogAct(), fc2=nn.Linear(6, 1)))
    batches = _regression(6, 4)
    batches[POISON_STEP][0][1] = 0.0  # fc1's output row is exactly 0
    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=1e-3), "loss_fn": nn.MSELoss(), "batches": batches}


# ---- recording a run --------------------------------------------------------------------

def record(run_dir: Path, factory: str, steps: int = 6) -> int:
    """Train the factory's parts through the Recorder until the first non-finite step; return steps run."""
    from importlib import import_module

    module_name, name = factory.split(":")
    parts = getattr(import_module(module_name), name)()
    model, optimizer, loss_fn = parts["model"], parts["optimizer"], parts["loss_fn"]
    done = 0
    with tuidiag.Recorder(run_dir, config={"factory": factory}, factory=factory, flush_interval=0.05) as rec:
        rec.watch(model, optimizer, loss_fn=loss_fn)
        for step, (x, y) in enumerate(parts["batches"][:steps]):
            rec.batch(x, y)
            loss = loss_fn(model(x), y)
            loss.backward()
            rec.step(loss)
            done = step + 1
            grads_finite = all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
            if not torch.isfinite(loss) or not grads_finite:
                break
            optimizer.step()
            optimizer.zero_grad()
    return done
