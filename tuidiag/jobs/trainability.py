"""Can the model be trained at all? Frozen parameters and cut autograd graphs, found before a job trains.

The jobs that train (overfit-one-batch, the LR finder) or judge what training
found (sharpness) run :func:`training_blocker` on one batch first. Instead of a
torch error ("optimizer got an empty parameter list", "element 0 of tensors does
not require grad"), the job then answers with a verdict that names the cause
(:class:`Blocker`, its ``code``):

- ``no_parameters``: the model has no parameters;
- ``all_frozen``: every parameter the job would train has ``requires_grad=False``;
- ``integer_output``: the model returns integer or boolean tensors (argmax, a
  comparison, ``.long()``): no gradient flows through them;
- ``detached_output``: the output has no autograd history (``.detach()``, a
  round trip through ``.item()``/``.numpy()``, ``torch.no_grad()`` in forward);
- ``loss_not_tensor``, ``loss_not_scalar``, ``loss_detached``: the loss is a
  Python number, not a scalar, or a tensor without ``grad_fn`` although the
  output has one (the loss function cuts the graph);
- ``no_gradient``: no trainable parameter receives a gradient from the loss
  (the trainable ones are unused, or reached only through detached paths).

The check runs one forward pass in training mode and one ``torch.autograd.grad``;
it leaves the model exactly as it found it (buffers such as BatchNorm statistics,
train/eval flags, random generators; no ``.grad`` is written).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tuidiag.jobs.tensors import BatchSource, as_xy, iter_tensors, to_device
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.isolation import collect_rng, cuda_rng_in_use, restore_rng

NAMES_SHOWN = 4
"""Parameter names quoted in an explanation."""


@dataclass
class Blocker:
    """Why the model cannot be trained: a code (see the module docstring) and a sentence for the user."""

    code: str
    explanation: str

    def to_json(self) -> dict[str, str]:
        """JSON-ready fields."""
        return {"code": self.code, "explanation": self.explanation}


def optimizer_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every tensor the optimizer updates, in group order."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def _names(model: nn.Module, params: list[torch.Tensor]) -> str:
    ids = {id(p) for p in params}
    names = [n for n, p in model.named_parameters() if id(p) in ids]
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    return ", ".join(names[:NAMES_SHOWN]) + more


def frozen_parameters(model: nn.Module) -> list[str]:
    """Names of the model's parameters with ``requires_grad=False``."""
    return [n for n, p in model.named_parameters() if not p.requires_grad]


def peek_batch(parts: Parts) -> tuple[Any, Any] | None:
    """The first batch of ``parts.batches`` without using it up (a one-shot iterator gets it put back)."""
    if parts.batches is None:
        return None
    if iter(parts.batches) is parts.batches:
        try:
            first = next(parts.batches)  # type: ignore[call-overload]
        except StopIteration:
            return None
        parts.batches = itertools.chain([first], parts.batches)
        return as_xy(first)
    return BatchSource(parts.batches).next()


@contextmanager
def _untouched(model: nn.Module) -> Iterator[None]:
    """Put buffers, train/eval flags and random generators back as they were."""
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    modes = [(m, m.training) for m in model.modules()]
    rng = collect_rng(cuda_rng_in_use(model))
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        for module, training in modes:
            module.training = training
        restore_rng(rng)


def _parameter_blocker(model: nn.Module, params: list[torch.Tensor], whose: str) -> Blocker | None:
    if not list(model.parameters()):
        return Blocker("no_parameters", "the model has no parameters: there is nothing to train")
    if not any(p.requires_grad for p in params):
        return Blocker("all_frozen", (
            f"every parameter {whose} is frozen: requires_grad=False on all {len(params)} parameter tensors "
            f"({_names(model, params)}), so nothing can learn; set requires_grad=True on the layers to train"))
    return None


def _output_blocker(output: Any, trainable: int) -> Blocker | None:
    tensors = list(iter_tensors(output))
    floats = [t for t in tensors if t.is_floating_point() or t.is_complex()]
    if tensors and not floats:
        dtypes = ", ".join(sorted({str(t.dtype).replace("torch.", "") for t in tensors}))
        return Blocker("integer_output", (
            f"the model's output is an integer tensor ({dtypes}): no gradient flows through it "
            "(argmax, a comparison or .long() in forward?); return the float scores and let the loss take them"))
    if not any(t.requires_grad for t in floats):
        what = "the model's output has no autograd history (no grad_fn, requires_grad=False)" if floats else \
            "the model's output holds no tensor"
        return Blocker("detached_output", (
            f"{what} although {trainable} parameter tensors are trainable: forward cuts the graph "
            "(.detach(), .item() or .numpy() and back, torch.no_grad() or inference_mode() inside forward, "
            "or a new tensor built from values)"))
    return None


def _loss_blocker(loss: Any) -> Blocker | None:
    if not isinstance(loss, torch.Tensor):
        return Blocker("loss_not_tensor", (
            f"loss_fn returned a {type(loss).__name__}, not a tensor: .item() or float() inside the loss cuts "
            "the graph; return the tensor"))
    if loss.numel() != 1:
        return Blocker("loss_not_scalar", (
            f"loss_fn returned a tensor of shape {list(loss.shape)}, not a scalar: reduce it (.mean() or .sum())"))
    if not loss.requires_grad:
        return Blocker("loss_detached", (
            "the loss has no grad_fn although the model's output has one: loss_fn cuts the graph "
            "(.detach(), .item() and torch.tensor(...), .data, or torch.no_grad() inside the loss)"))
    return None


def _gradient_blocker(model: nn.Module, loss: torch.Tensor, trainable: list[torch.Tensor]) -> Blocker | None:
    grads = torch.autograd.grad(loss.reshape(()), trainable, allow_unused=True)
    if any(g is not None for g in grads):
        return None
    frozen = frozen_parameters(model)
    also = f"; the other {len(frozen)} parameter tensors are frozen (requires_grad=False)" if frozen else ""
    return Blocker("no_gradient", (
        f"none of the {len(trainable)} trainable parameter tensors ({_names(model, trainable)}) receives a gradient "
        f"from the loss: forward does not use them, or reaches them only through detached tensors{also}"))


def _frozen_path_blocker(parts: Parts, x: Any, trainable: list[torch.Tensor]) -> Blocker | None:
    """A detached output that is only frozen layers at work: with every parameter trainable, does it get a graph?"""
    frozen = [p for p in parts.model.parameters() if not p.requires_grad]
    if not frozen:
        return None
    try:
        for p in frozen:
            p.requires_grad_(True)
        output = parts.output(x)
    finally:
        for p in frozen:
            p.requires_grad_(False)
    if not any(t.requires_grad for t in iter_tensors(output)):
        return None
    return Blocker("no_gradient", (
        f"the output depends only on frozen parameters (requires_grad=False: {_names(parts.model, frozen)}); "
        f"the {len(trainable)} trainable parameter tensors ({_names(parts.model, trainable)}) are not used by forward"))


def training_blocker(parts: Parts, batch: tuple[Any, Any], params: list[torch.Tensor],
                     whose: str = "of the model") -> Blocker | None:
    """Why one training step on ``batch`` (already on the model's device) cannot update ``params``, or None.

    ``params`` are the tensors the job's optimizer would update; ``whose`` names
    them in the explanation ("of the model", "in the optimizer"). Errors raised by
    the user's forward or loss propagate unchanged.
    """
    blocked = _parameter_blocker(parts.model, params, whose)
    if blocked is not None:
        return blocked
    trainable = [p for p in params if p.requires_grad]
    x, y = batch
    with _untouched(parts.model), torch.enable_grad():
        parts.model.train()
        output = parts.output(x)
        blocked = _output_blocker(output, len(trainable))
        if blocked is not None:
            return _frozen_path_blocker(parts, x, trainable) or blocked if blocked.code == "detached_output" else blocked
        loss = parts.loss_fn(output, y)
        return _loss_blocker(loss) or _gradient_blocker(parts.model, loss, trainable)


def optimizer_blocker(parts: Parts, device: torch.device) -> Blocker | None:
    """:func:`training_blocker` for ``parts.optimizer`` on the first batch (None also when there is no batch)."""
    batch = peek_batch(parts)
    if batch is None:
        return None
    return training_blocker(parts, to_device(batch, device), optimizer_params(parts.optimizer), "in the run's optimizer")
